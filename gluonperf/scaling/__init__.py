"""Scaling: how far data parallelism goes, predicted from measured parts and checked against
runs on this machine (`python -m gluonperf.predict`).

- `model`: the arithmetic, pure functions without MXNet: links, ring allreduce, parameter
  servers and Horovod's fused ring, a step from compute t1 and communication t2, efficiency;
- `parts`: the measured parts a prediction takes: the model's gradient bytes, the one-device
  step (from `train --scaling` records, or measured now), a link (from `bench allreduce`
  records, copyto between contexts, TCP over loopback);
- `predictions`: `model.sweep` as records (bench 'predict', 'predict-best');
- `judging`: a prediction against the measured step's interval (within 25%, outside,
  inconclusive), and what a job asks of the cores; the 'predict-check' record;
- `validation`: `predict --validate`: predict what this machine can run (CPU contexts,
  dist_sync and Horovod over loopback), run it, judge it;
- `runs`: the training runs a validation starts (through `runtime.guard` and
  `gluonperf.launch`) and the records they leave; it never times anything itself;
- `engines`: `bench engines`, one process with N contexts against N processes on Horovod and on
  dist_sync, training the same model, through the same runs;
- `horovod_rank`: the code that runs inside a Horovod rank (`gluonperf.workers.exchange`); it
  never starts a process.

It may import training (models, model specs, the training loop's scaling steps), measure
(intervals, the harness), records, config and runtime (guard, threads, the Horovod
launcher); never experiments, inference or script (beside it), nor render, cli or the commands
(above it). Nothing here parses arguments or prints.
"""

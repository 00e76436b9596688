"""Scaling: how far data parallelism goes, predicted from measured parts and checked against
runs on this machine (`python -m gluonperf.predict`; `bench engines`).

- `model`: the arithmetic, pure functions without MXNet; `parts`: what a prediction takes
  (gradient bytes, the one-device step, a link); `predictions`: the sweep as records;
- `judging`, `validation`, `runs`: `predict --validate`: a prediction against the runs it
  starts (which do the timing);
- `engines`: `bench engines`, one process with N contexts against Horovod and dist_sync.

It may import training, measure, records, config and runtime; never experiments, inference or
script (beside it), nor render, cli or the commands (above it). Nothing here parses arguments
or prints.
"""

"""Inference as users deploy it: what `python -m gluonperf.infer` measures (issue 61).

What a model is as deployed and what each precision rung costs (the ladder):
- `ladder`: the rungs (fp32, static, fused, bf16, int8), built once in the parent and
  loaded in every process that serves (`Rung` crosses processes as text); `runtimes` and
  `onnx_export`: ONNX Runtime's and OpenVINO's rungs, from the static graph exported to ONNX;
- `calibration`, `accuracy`, `coldstart`: INT8's calibration samples, each rung's accuracy
  against fp32 static, a fresh process's start to first answer (the ladder's half).

How fast it answers under load (the serve half):
- `loadgen`: MLPerf Inference's scenarios through MLPerf's own LoadGen (`mlperf_loadgen`),
  which issues the queries and keeps the clock, and the reading of its logs;
- `search`: the server scenario's highest rate within a latency bound (pure logic);
- `instances`: the system under test, worker processes (instances x threads, pinned), fed
  indices of samples that sit in shared memory (`samples`), each running `workers/serving.py`;
- `serve`: the runs of one command, rounds interleaved, into records; `deploy`: what to deploy.
- `estimate`: about how long a plan takes, from a few calls of each rung timed in the parent,
  and the default largest batch fitted to a time budget.

It may import training (model specs and models), measure (intervals and verdicts), records
and runtime (guard's process groups); never render, cli or the commands. The code that runs in
a worker (`workers/serving.py`) never spawns; the code that spawns (`instances`) never times: LoadGen does.
"""

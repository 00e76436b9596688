"""Inference as users deploy it: what `python -m gluonperf.infer` measures (issue 61).

The ladder (the model as deployed, what each precision rung costs): `ladder`, `runtimes`,
`onnx_export`, `exported`, `calibration`, `accuracy`, `coldstart`, `primitives`,
`runtime_kernels`. The serve half (how fast it answers under load): `loadgen` (MLPerf's
LoadGen), `search`, `instances` and `samples` (the system under test), `serve`, `rounds`,
`estimate`, `deploy`, `deploy_code`. Each module's docstring says what it holds.

It may import training (model specs and models), measure (intervals and verdicts), records
and runtime (guard's process groups); never render, cli or the commands. The code that runs
in a worker (`workers/serving.py`) never spawns; the code that spawns (`instances`) never
times: LoadGen does.
"""

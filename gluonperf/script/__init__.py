"""A user's training script, which gluonperf has never seen, profiled (`python -m gluonperf.profile
-- python train.py`) and tuned (`python -m gluonperf.tune -- python train.py`) from outside.

Inside the script (loaded by the hooks' sitecustomize, gluonperf/workers/script_site, once the
script imports MXNet; they never start a process): `driver.py` (profile --'s StepProfiler and
what it writes), `listener.py` (tune --'s listener in each run), `probe.py` (the model probe
both use) and `memory.py` (memory over the whole run). Between the two processes: `wire.py`
(the environment, and the records the child leaves, `<pid>.jsonl`). In gluonperf's process,
which never times the script: `runner.py` (tuning's runner for a script), `levers.py` and
`bounds.py` (what tune -- tries, and what a lever can gain at best), `summary.py`, `parts.py`
and `advice.py` (profile --'s records, advice and tune --'s recipe), `tables.py` and `text.py`
(what a person reads). The commands' halves: gluonperf/cli/profile_script.py and tune_script.py.

The one thing to know: script/ never imports tuning/ (the command hands the runner to tuning's
search), nor the areas beside it, render/, cli/ or the commands (tests/test_layers.py).
How a script is measured: docs/your_script.md.
"""

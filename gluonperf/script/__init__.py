"""A user's training script, which gluonperf has never seen, profiled (`python -m gluonperf.profile
-- python train.py`) and tuned (`python -m gluonperf.tune -- python train.py`) from outside.

Inside the script, once it imports MXNet (through gluonperf/workers/script_site; they never
start a process): `driver` (profile --), `listener` (tune --), `probe` (the model), `memory`
(the whole run). Between the two processes: `wire`. In gluonperf's process, which never times
the script: `runner`, `levers`, `bounds`, `summary`, `parts`, `advice`, `tables`, `text`. The
commands' halves: gluonperf/cli/profile_script.py and tune_script.py.

The one thing to know: script/ never imports tuning/ (the command hands the runner to tuning's
search), nor the areas beside it, render/, cli/ or the commands (tests/test_layers.py).
How a script is measured: docs/your_script.md.
"""

"""A user's training script, which gluonperf has never seen, profiled (`python -m gluonperf.profile
-- python train.py`) and tuned (`python -m gluonperf.tune -- python train.py`) from outside.

Where is the code that runs inside my script? Here, in four modules that never start a
process; they are loaded by the hooks' sitecustomize (gluonperf/workers/script_site) once the
script imports MXNet, and listen to the hooks on Trainer.step, the data loaders and the Blocks
(gluonperf/runtime/script_hooks.py):
- `driver.py`: profile --'s driver (its StepProfiler, and what it writes once the steps are
  measured);
- `listener.py`: tune --'s listener in each run (the candidate's changes made from outside, the
  timed steps, the probe's description of the script);
- `probe.py`: the model probe both use (which Block the Trainer updates, its FLOPs, the model
  alone hybridized, the operators);
- `memory.py`: memory over the whole run (profile --).

Between the two processes, `wire.py`: the environment variables and entry points, the child's
environment (profile and tune alike), one writer in the child and one reader in the parent of
the records the child leaves (`<pid>.jsonl`).

In gluonperf's process, what starts the script never times it, and formatting is apart:
- `runner.py`: the script's runner for tuning (runs the command for a candidate, reads its
  images/s; `probe`), which answers tuning's runner protocol (gluonperf/tuning/runner.py);
- `levers.py`: the levers tune -- tries on a script (how to add one: its docstring), and
  `bounds.py`: what a lever can gain at best, from the probe;
- `summary.py` and `parts.py`: profile --'s records from what the driver wrote;
- `advice.py`: profile --'s advice and tune --'s recipe, as records;
- `tables.py` and `text.py`: the tables and the lines a person reads (`tables.report(prof)`:
  profile's tables for a StepProfiler of one's own loop).

The commands' halves are gluonperf/cli/profile_script.py and gluonperf/cli/tune_script.py; the
latter hands the script's runner and levers to tuning's one search.

It may import runtime/, records, config, measure/ (the Blocks and operators that profile --model
reads too) and training/. It never imports tuning/ (the command hands the runner over; the levers
build candidates with the methods of the candidate they are given), nor the areas beside it
(experiments/, inference/, scaling/), render/, cli/ or the commands.
"""

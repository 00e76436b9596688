"""Tuning: trying candidate settings against a baseline, interleaved, until each verdict is
settled, and keeping what is faster (`tune --model` and `tune -- python train.py` alike).

- `candidates.py`: a candidate (environment variables and flags, by name) and `unique`;
- `runner.py`: the runner protocol, what tuning asks of whatever runs a candidate;
- `rounds.py`: how many rounds a candidate gets and when it leaves them, and the tune's `Budget`;
- `schedule.py`: the interleaved rounds, their Results (ratios, intervals, verdicts), `winner`
  and `Sweeps`;
- `search.py`: `sweep`, `paired_sweep` (warm workers) and the one coordinate search
  (`coordinate`), with its run counting (`planned_runs`);
- `model.py`: `tune --model`'s search per batch size, and its 'best' record;
- `simulate.py`: the search checked on a simulated runner and clock.

The one thing to know: tuning/ knows no runner and no lever. Each area gives its own runner
(gluonperf/training/runners.py, gluonperf/script/runner.py) with its levers, and the command
hands it in; tests/test_layers.py keeps tuning/ from importing them. How to add a lever:
docs/commands/tune.md, "Adding a lever"; how the verdicts are reached: docs/verdicts.md.
"""

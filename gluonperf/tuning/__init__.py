"""Tuning: trying candidate settings against a baseline, interleaved, until each verdict is
settled, and keeping what is faster (`tune --model` and `tune -- python train.py` alike).

- `candidates.py`: a candidate (environment variables and flags, by name) and `unique`.
- `runner.py`: the runner protocol, what tuning asks of whatever runs a candidate (its figure,
  its baseline's name, its levers, whether it runs warm workers...). tuning/ knows no runner:
  each area gives its own (gluonperf's training loop and the steprate worker:
  gluonperf/training/runners.py; a user's script: gluonperf/script/runner.py) and the command
  hands it in.
- `rounds.py`: how many rounds a candidate gets and when it leaves them (sequential, fixed,
  exhaustive), and the whole tune's `Budget`.
- `schedule.py`: the interleaved rounds, the Results they make (ratios with intervals and
  verdicts), `winner`, and `Sweeps` (what a stopped command keeps).
- `search.py`: the sweep engine (`sweep`, `paired_sweep` with warm workers) and the ONE
  coordinate search (`coordinate`: a lever at a time against the best so far, the error rate
  split over every planned candidate, the kept set confirmed, the budget kept), with its run
  counting (`planned_runs`).
- `model.py`: `tune --model`'s search per batch size, and its 'best' record.
- `simulate.py`: the search checked by simulation: a simulated runner and clock, thousands of
  tunes in seconds (benchmarks/verdicts.py --parts simulate, tests/test_tune_simulation.py).

How do I add a lever? A lever is a function of the best candidate so far that returns the
candidates to try (the best first), built with the candidate's own `with_env`/`with_flags`;
each runner offers the levers that apply to it. For gluonperf's training loop and the steprate
worker they are in gluonperf/training/levers.py (with the environment levers any runner can
try: engine, allocator, bulk, openmp); for a user's script in gluonperf/script/levers.py, with
the bound that names a lever that cannot pay in gluonperf/script/bounds.py. The search needs no
change.

It may import runtime/, records, config, measure/ and training/model_spec (a spec's text for
the records), never a runner (training/runners.py, script/), nor anything above it
(experiments/, inference/, script/, render/, cli/, the commands).
"""

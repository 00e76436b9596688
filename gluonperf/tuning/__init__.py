"""Tuning: trying candidate settings against a baseline, interleaved, until each verdict is
settled, and keeping what is faster (`tune --model` and `tune -- python train.py` alike).

Its modules: `candidates` (a candidate: environment variables and flags), `runner` (what
tuning asks of whatever runs a candidate), `rounds` (how many rounds; the tune's `Budget`),
`schedule` (the interleaved rounds and their Results), `search` (the sweeps and the one
coordinate search), `model` (`tune --model`'s search per batch size) and `simulate`.

The one thing to know: tuning/ knows no runner and no lever. Each area gives its own runner
(gluonperf/training/runners.py, gluonperf/script/runner.py) with its levers, and the command
hands it in; tests/test_layers.py keeps tuning/ from importing them. How to add a lever:
docs/commands/tune.md, "Adding a lever"; how the verdicts are reached: docs/verdicts.md.
"""

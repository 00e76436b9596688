"""What gets trained and how: the Trainer loop, models, data, optimizers, the flat kvstore, recompute,
precision; and how `tune --model` runs them (`runners.py`: gluonperf.train and the steprate worker,
each a runner of tuning's protocol) and what it tries on them (`levers.py`, with the environment
levers any runner can try).

It may import runtime/, records, config and measure/; nothing above it: its runners answer
tuning's protocol (gluonperf/tuning/runner.py) and its levers build candidates with the
methods of the candidate they are given, without importing tuning/."""

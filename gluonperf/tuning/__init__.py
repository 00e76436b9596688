"""Tuning: trying candidate settings against a baseline, interleaved, until each verdict is settled.

Holds how many rounds a candidate gets and when it leaves (`rounds`). It knows no runner (what
a run of a candidate is: gluonperf's training loop, the steprate worker, a user's script): the
areas that run candidates hand their runner in. It may import measure/, records and runtime/,
never the areas above it (experiments/, inference/, the commands).
"""

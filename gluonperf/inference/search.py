"""The server scenario's answer: the highest rate whose p99 stays within the latency bound.

A rate is *valid* when LoadGen says so of a server run at that target rate (its p99 within the
bound, its minimums met, its early stopping passed): `run(rate)` makes that run, to the
minimums in force, and returns a `Trial`. The search brackets the answer between a rate LoadGen
called valid and one it called invalid, stepping by `growth` from `start` until it has both,
then halves the bracket (geometrically: rates span decades) until the invalid end is within
`tolerance` of the valid one or `max_trials` runs are spent. Looking down for a valid rate, it
stops once a lower rate no longer lowers the p99: the bound is then beyond the system's own
latency at any load. It reports the bracket, never a
rate it did not run: the valid end is the answer, the invalid end says how far above it the
truth may lie. Pure logic: the tests give it a fake `run`.
"""
import math
from dataclasses import dataclass, field
from typing import Callable, Optional, Tuple


@dataclass(frozen=True)
class Trial:
    """One run at a target `rate` (queries/s): LoadGen's verdict, its p99, the run's fields."""
    rate: float
    valid: bool
    p99_s: Optional[float] = None
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Peak:
    """The search's outcome: `best` the highest valid rate run (None when none was valid),
    `above` the lowest invalid rate above it (None when every rate run was valid), every
    trial in the order run, and whether the bracket closed to within `tolerance`."""
    best: Optional[Trial]
    above: Optional[Trial]
    trials: Tuple[Trial, ...]
    tolerance: float

    @property
    def resolved(self):
        return self.best is not None and self.above is not None and \
            self.above.rate <= self.best.rate * (1 + self.tolerance)

    def closest(self):
        """With no valid rate: the trial whose p99 came nearest the bound (the lowest p99)."""
        if self.best is not None:
            return self.best
        timed = [t for t in self.trials if t.p99_s is not None]
        return min(timed, key=lambda t: t.p99_s) if timed else min(self.trials, key=lambda t: t.rate)


def _no_better(trials, margin=0.1):
    """Stepping down, the last two rates were invalid and the lower one's p99 is not at least
    `margin` lower: the latency no longer falls with the load, so it is the system's own tail,
    not queueing, and no lower rate will meet the bound (each lower rate also takes longer to
    run its minimum queries)."""
    if len(trials) < 2 or trials[-1].valid or trials[-2].valid:
        return False
    low, high = trials[-1], trials[-2]
    return (low.rate < high.rate and low.p99_s is not None and high.p99_s is not None
            and low.p99_s > (1 - margin) * high.p99_s)


def find_peak_rate(run: Callable[[float], Trial], start, tolerance=0.1, growth=2.0, max_trials=12, lowest=None):
    """The highest rate `run` calls valid, bracketed (`Peak`). `start`: the first rate to try
    (an estimate of the system's capacity, a little below it); `lowest`: the rate below which
    the search gives up looking for a valid one (default start / 64); it also gives up when
    halving the rate no longer lowers the p99 (`_no_better`)."""
    if not (start > 0 and math.isfinite(start)):
        raise ValueError("the starting rate must be a positive number, got %r" % start)
    if not (tolerance > 0 and growth > 1 and max_trials >= 1):
        raise ValueError("need tolerance > 0, growth > 1 and max_trials >= 1")
    lowest = start / 64.0 if lowest is None else lowest
    trials = []

    def attempt(rate):
        trial = run(rate)
        trials.append(trial)
        return trial

    first = attempt(start)
    valid, invalid = (first, None) if first.valid else (None, first)
    while len(trials) < max_trials and (valid is None or invalid is None):
        if valid is None:
            rate = invalid.rate / growth
            if rate < lowest or _no_better(trials):
                break
            trial = attempt(rate)
        else:
            trial = attempt(valid.rate * growth)
        if trial.valid:
            valid = trial
        else:
            invalid = trial
    while (valid is not None and invalid is not None and len(trials) < max_trials
           and invalid.rate > valid.rate * (1 + tolerance)):
        trial = attempt(math.sqrt(valid.rate * invalid.rate))
        if trial.valid:
            valid = trial
        else:
            invalid = trial
    return Peak(valid, invalid, tuple(trials), tolerance)

"""How many rounds each candidate gets, and when it leaves them.

A round runs the baseline and every candidate still in once, in a rotating order; a
candidate's ratio is its figure over the baseline's in that round (`schedule`). Three policies:

- **sequential** (`Rounds()`, tune's `--rounds auto`, the default): looks after every round
  from the 3rd to `maximum` (`measure.sequential.Plan`), the error rate split over the
  candidates tried (Bonferroni) and spent over the looks; a candidate leaves once its verdict
  is settled (`sequential.settle`: faster or slower beyond the noise, unable to reach the
  smallest speed-up worth a change, or unable to be shown faster within the plan). Its
  interval is the one of the look where it left, valid under that stopping. `budget` seconds
  of a lever start no new round (the intervals stay valid: they hold whenever the rounds stop).
  A round during which the machine was busy elsewhere is run again, at most `reruns` (4) times
  a lever, and not once a run again was disturbed too (`schedule.interleave`): the plan's few
  rounds cannot absorb one spoiled round.
- **fixed** (`Rounds(fixed=N)`): every candidate N rounds, judged once at the end at 95%
  (Bonferroni over the candidates).
- **exhaustive** (`Rounds(exhaustive=True)`, `--rounds exhaustive`): tune's rule before the
  sequential plan: at least `minimum` rounds, then more until every candidate's fixed-n
  interval is within +-`precision` of its estimate, at most 30 rounds, no budget. The rule
  looks at the intervals' width only, never at whether a result looks significant; slow, kept
  as the reference the sequential plan is checked against (benchmarks/advice.py).
"""
import math

from ..measure import sequential, stats

SEQUENTIAL, FIXED, EXHAUSTIVE = "sequential", "fixed", "exhaustive"


class Rounds:
    """A rounds policy (see the module's docstring)."""

    def __init__(self, fixed=None, maximum=8, budget=300.0, exhaustive=False, minimum=5, precision=0.05, reruns=4):
        if fixed is not None and fixed < 1:
            raise ValueError("rounds must be at least 1, got %r" % fixed)
        if fixed is None and not exhaustive and maximum < sequential.FIRST_LOOK:
            raise ValueError("a sequential plan needs at least %d rounds, got %r" % (sequential.FIRST_LOOK, maximum))
        self.fixed, self.precision = fixed, precision
        self.budget = math.inf if exhaustive else budget
        self.kind = FIXED if fixed is not None else EXHAUSTIVE if exhaustive else SEQUENTIAL
        self.minimum = minimum
        self.maximum = 30 if exhaustive else maximum
        self.reruns = reruns if self.kind == SEQUENTIAL else 0  # fixed and exhaustive: exactly the rounds asked for

    @property
    def planned(self):
        """The most rounds a candidate can get (a progress bar's total): the fixed number, or the
        sequential plan's or the exhaustive rule's last round."""
        return self.fixed if self.kind == FIXED else self.maximum

    def alpha(self, tried, stable=True):
        """The error rate of one candidate of `tried` (Bonferroni), 5% in all on a stable machine, 1% else."""
        return (1 - stats.level_for(stable)) / max(1, tried)

    def plan(self, tried, stable=True):
        return sequential.Plan(self.maximum, self.alpha(tried, stable))

    def interval(self, ratios, tried, stable=True):
        """The interval a candidate's per-round `ratios` give under this policy."""
        if self.kind == SEQUENTIAL:
            return self.plan(tried, stable).interval(ratios)
        return stats.ratio_interval(ratios, 1 - self.alpha(tried, stable))

    def settle(self, ratios, tried, stable=True, threshold=stats.THRESHOLD):
        """Why a candidate with these per-round `ratios` leaves the rounds now, or None."""
        if self.kind == FIXED:
            return sequential.PLAN_DONE if len(ratios) >= self.fixed else None
        if self.kind == EXHAUSTIVE:
            return sequential.PLAN_DONE if len(ratios) >= self.maximum else None
        if len(ratios) >= self.maximum:
            return sequential.PLAN_DONE
        return sequential.settle(self.plan(tried, stable), ratios, threshold)

    def more(self, done, ratios, elapsed):
        """Start another round after `done` rounds, given {name: [ratio per round]} of the candidates
        still in and the seconds spent? (The candidates' own stopping is `settle`'s.)"""
        if self.kind == FIXED:
            return done < self.fixed
        if done >= self.maximum or elapsed >= self.budget:
            return False
        if self.kind == SEQUENTIAL or done < self.minimum:
            return True
        for values in ratios.values():
            values = [v for v in values if v is not None]
            if len(values) >= 2 and len(set(values)) > 1:
                i = stats.ratio_interval(values)
                if max(i.high / i.estimate, i.estimate / i.low) - 1 > self.precision:
                    return True
        return False


def as_rounds(rounds):
    """A Rounds from a Rounds or a number of rounds."""
    return rounds if isinstance(rounds, Rounds) else Rounds(fixed=rounds)

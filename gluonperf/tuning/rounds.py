"""How many rounds each candidate gets, and when it leaves them: `Rounds` and the tune's `Budget`.

Three policies: **sequential** (`Rounds()`, `--rounds auto`, the default: a look after every
round from the 3rd to the plan's last, `measure.sequential`, the plan as long as the `Budget`
affords, the error rate split over every candidate the tune plans, a disturbed round run again
at most `reruns` times a lever); **fixed** (`Rounds(fixed=N)`: N rounds, judged once at the
end); **exhaustive** (`Rounds(exhaustive=True)`: tune's rule before the sequential plan, kept
as the reference it is checked against).

The one thing to know: a sequential interval is the one of the look where the candidate left,
valid under that stopping (and whenever the budget stops the rounds). Why each rule, and what
it gives: docs/verdicts.md, "Many candidates: tune" and "An unstable machine".
"""
import copy
import time

from ..measure import machine, sequential, stats

SEQUENTIAL, FIXED, EXHAUSTIVE = "sequential", "fixed", "exhaustive"
MAXIMUM = 20  # the sequential plan's last round: more where the evidence is close (tests/test_tune_simulation.py)
PLAN_LENGTHS = (3, 4, 5, 6, 8, 10, 12, 16, 20)  # a lever's plan is cut to one of these by its share of the budget


class Budget:
    """The whole tune's time, kept: `seconds` from `start()`, read on `clock`. No round starts
    unless its runs fit, at the longest run seen so far (and `per_run`, the first guess) with
    MARGIN, before the end less `reserve`, the seconds kept for the confirmation until the levers
    are done (`close`). `left()` never rises."""
    MARGIN = 1.1

    def __init__(self, seconds, per_run=0.0, clock=time.monotonic):
        if not seconds > 0 or per_run < 0:
            raise ValueError("a budget needs seconds > 0 and per_run >= 0, got %r and %r" % (seconds, per_run))
        self.seconds, self.per_run, self.clock = float(seconds), float(per_run), clock
        self.began = None
        self.end = None
        self.reserve = 0.0

    def start(self, at=None):
        """The budget's time runs from `at` (a reading of `clock`: the command's start), or now."""
        if self.began is None:
            self.began = self.clock() if at is None else at
            self.end = self.began + self.seconds
        return self

    def left(self):
        """Seconds until the tune's end (the whole budget before it starts)."""
        return self.seconds if self.began is None else max(0.0, self.end - self.clock())

    def ran(self, seconds):
        """A run took `seconds`: later rounds are planned at the longest run seen."""
        self.per_run = max(self.per_run, seconds)

    def round_seconds(self, runs):
        return runs * self.per_run * self.MARGIN

    def fits(self, runs):
        """Can `runs` more runs end before the end less `reserve`?"""
        self.start()
        return self.clock() + self.round_seconds(runs) <= self.end - self.reserve

    def open(self, runs_per_round):
        """A lever starts: it may use the time left to the levers (the end less `reserve`), in the
        order they are tried (those that pay on most scripts first). Returns the rounds of
        `runs_per_round` runs that fit, 0 when not even its first look's do: it is not reached."""
        self.start()
        left, per_round = max(0.0, self.end - self.reserve - self.clock()), self.round_seconds(runs_per_round)
        if per_round <= 0:  # no run seen and no first guess: as many rounds as there is time, unknown
            return MAXIMUM if left > 0 else 0
        return int(left // per_round)

    def close(self):
        """The levers are done: what is left is the confirmation's."""
        self.reserve = 0.0


class Rounds:
    """A rounds policy (see the module's docstring)."""

    def __init__(self, fixed=None, maximum=MAXIMUM, budget=None, exhaustive=False, minimum=5, precision=0.05,
                 reruns=4):
        if fixed is not None and fixed < 1:
            raise ValueError("rounds must be at least 1, got %r" % fixed)
        if fixed is None and not exhaustive and maximum < sequential.FIRST_LOOK:
            raise ValueError("a sequential plan needs at least %d rounds, got %r" % (sequential.FIRST_LOOK, maximum))
        self.fixed, self.precision = fixed, precision
        self.kind = FIXED if fixed is not None else EXHAUSTIVE if exhaustive else SEQUENTIAL
        if budget is not None and not isinstance(budget, Budget):
            budget = Budget(budget)
        self.budget = budget if self.kind == SEQUENTIAL else None  # a Budget (or its seconds), or None: no limit
        self.minimum = minimum
        self.maximum = 30 if exhaustive else maximum
        self.reruns = reruns if self.kind == SEQUENTIAL else 0  # fixed and exhaustive: exactly the rounds asked for
        self.family = None      # candidates the error rate is split over (None: the lever's own): `for_lever`
        self.machine = machine  # the machine the rounds watch (a simulation gives its own: tuning/simulate.py)

    def for_lever(self, family, fits=None):
        """This policy for one lever of a tune: the error rate split over `family` candidates (every
        planned candidate of every lever, so that the recipe holds the level as a whole), and the
        sequential plan's last round at most the `fits` rounds the budget left affords
        (fixed before its first round, so its looks are planned), the same budget."""
        out = copy.copy(self)
        out.family = family
        if fits is not None and self.kind == SEQUENTIAL:  # one of a few lengths, whose plans are kept (lru_cache)
            out.maximum = max([n for n in PLAN_LENGTHS if n <= min(self.maximum, fits)] or [sequential.FIRST_LOOK])
        return out

    @property
    def planned(self):
        """The most rounds a candidate can get (a progress bar's total): the fixed number, or the
        sequential plan's or the exhaustive rule's last round."""
        return self.fixed if self.kind == FIXED else self.maximum

    def alpha(self, tried, stable=True):
        """The error rate of one candidate (Bonferroni over the `family`, else over the lever's
        `tried`), 5% in all on a stable machine, 1% else."""
        return (1 - stats.level_for(stable)) / max(1, self.family or tried)

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

    def more(self, done, ratios, runs):
        """Start another round of `runs` runs after `done` rounds, given {name: [ratio per round]} of
        the candidates still in? (The candidates' own stopping is `settle`'s.)"""
        if self.kind == FIXED:
            return done < self.fixed
        if done >= self.maximum or (self.budget is not None and not self.budget.fits(runs)):
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

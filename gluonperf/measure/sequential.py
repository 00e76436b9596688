"""Stopping a comparison once its verdict is settled, with intervals that stay valid.

A `Plan` fixes a candidate's looks in advance (after every round from `first` to `rounds`) and
spends its error rate `alpha` over them (alpha * t**2, Kim and DeMets 1987), with each look's t
quantile (`boundaries`) simulated once per plan so that the intervals of all its looks cover the
true ratio together with probability 1 - alpha, whatever stopped it (a settled verdict,
futility, the budget, Ctrl-C). `settle` says whether a verdict can still change: faster or
slower beyond the noise, futile (it cannot be shown faster; costs no error rate), or SHORT (the
plan cannot settle it at this spread). The reasoning, the sources and the simulations that
check it: docs/verdicts.md.
"""
import functools
import math
from dataclasses import dataclass

from . import stats

FIRST_LOOK = 3      # rounds at the first look: with 2, a t interval has 1 degree of freedom
BEHIND_LOOK = 2     # a candidate slower than its baseline in each of this many rounds may leave (futility)
BEHIND_SIDE = 0.90  # ... when the upper end of its one-sided t interval at this level is under 1 + threshold
SPREAD_LOOK = 5     # from this round on, the spread seen so far may tell that the plan is too short to show a gain
EARLY_SHARE = 0.01  # of a candidate's alpha, for the interval of one that left before the first look
RHO = 2             # the power of the spending function alpha * t**RHO
SIMULATED = 400_000  # sequences simulated to set a plan's boundaries (about 0.3 s a plan, once)
# the outcomes of `settle`, as the records' `stopped` field says them
FASTER, SLOWER, CANNOT_PAY, FUTILE, SHORT, BEHIND, PLAN_DONE = (
    "faster", "slower", "cannot pay", "cannot be shown faster", "plan too short", "slower in every round",
    "plan done")


def spent(alpha, share):
    """Alpha spent by the power-family spending function after `share` (0..1) of the planned rounds."""
    share = min(1.0, max(0.0, share))
    return alpha * share ** RHO


@functools.lru_cache(maxsize=64)
def boundaries(rounds, alpha, first=FIRST_LOOK):
    """{rounds n: the two-sided level of the t interval at the look after n rounds}, for the looks
    of a plan (BEHIND_LOOK, then `first`..`rounds`): each look's t quantile is set on SIMULATED
    sequences of standard normal rounds (seed 0) so that the share of sequences whose |t| first
    crosses it there is that look's share of `alpha` (see the module's docstring)."""
    import numpy as np
    from scipy.special import stdtr
    z = np.random.default_rng(0).standard_normal((SIMULATED, rounds))
    sums, squares = np.cumsum(z, axis=1), np.cumsum(z * z, axis=1)
    crossed, levels = np.zeros(SIMULATED, dtype=bool), {}
    for n in ([BEHIND_LOOK] if BEHIND_LOOK < first else []) + list(range(first, rounds + 1)):
        share = EARLY_SHARE * alpha if n < first else max(EARLY_SHARE * alpha, spent(alpha, n / rounds))
        mean = sums[:, n - 1] / n
        sd = np.sqrt(np.maximum(squares[:, n - 1] - n * mean * mean, 0) / (n - 1))
        t = np.abs(mean) * math.sqrt(n) / sd
        alive = t[~crossed]
        new = int(round(share * SIMULATED)) - int(crossed.sum())  # first crossings this look may add
        if new <= 0:
            levels[n] = 1 - 1e-12  # nothing left to spend here: an interval as good as infinite
            continue
        quantile = np.partition(alive, len(alive) - new)[len(alive) - new]
        crossed |= t >= quantile
        levels[n] = float(2 * stdtr(n - 1, quantile) - 1)
    return levels


@dataclass(frozen=True)
class Plan:
    """Looks after rounds `first`..`rounds`, `alpha` spent over them (see the module's docstring)."""
    rounds: int
    alpha: float = 1 - stats.LEVEL
    first: int = FIRST_LOOK

    def __post_init__(self):
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be between 0 and 1, got %r" % self.alpha)
        if self.first < 2 or self.rounds < self.first:
            raise ValueError("a plan needs its first look at 2 rounds or more and no later than its last round "
                             "(first %r, rounds %r)" % (self.first, self.rounds))

    def level(self, n):
        """The confidence level of the interval at the look after `n` rounds (`boundaries`). Before
        the first look (a candidate that left after BEHIND_LOOK rounds, slower in each) the
        interval shown gets EARLY_SHARE of alpha, taken from the first look's share, so that every
        interval a candidate can show is in the plan."""
        if n < 1:
            raise ValueError("a look needs at least one round, got %r" % n)
        if n < BEHIND_LOOK:
            return 1 - EARLY_SHARE * self.alpha
        levels = boundaries(self.rounds, self.alpha, self.first)
        return levels[BEHIND_LOOK] if n < self.first else levels[min(n, self.rounds)]

    def interval(self, ratios):
        """The interval of per-round `ratios` (None entries left out) at this look's level."""
        n = sum(r is not None for r in ratios)
        return stats.ratio_interval(ratios, self.level(n))

    def final_half_width(self, sd_log):
        """The half-width (in log ratio) the interval would have at the last look with this spread."""
        n = self.rounds
        return stats.t_quantile(0.5 + self.level(n) / 2, n - 1) * sd_log / math.sqrt(n)


def settle(plan, ratios, threshold=stats.THRESHOLD):
    """Why a candidate with these per-round `ratios` leaves the rounds now (FASTER, SLOWER,
    CANNOT_PAY, FUTILE, SHORT, BEHIND, PLAN_DONE), or None when its verdict can still change. FUTILE
    and BEHIND are evidence against a change worth making; SHORT is the plan's length against the
    spread, which says nothing of the candidate: more rounds may settle it."""
    values = [r for r in ratios if r is not None]
    n = len(values)
    if n >= plan.rounds:
        return PLAN_DONE
    bound = 1 + threshold
    if BEHIND_LOOK <= n < plan.first:
        if all(v < 1 for v in values) and _hopeful(values, stats.t_quantile(BEHIND_SIDE, n - 1)) <= math.log(bound):
            return BEHIND
        return None
    if n < plan.first:
        return None
    interval = plan.interval(values)
    if interval.low > 1 and interval.estimate > bound:
        return FASTER
    if interval.high < 1:
        return SLOWER
    if interval.high < bound:
        return CANNOT_PAY
    hopeful = _hopeful(values)
    if hopeful <= math.log(bound):
        return FUTILE
    if n >= SPREAD_LOOK and hopeful - plan.final_half_width(interval.sd_log or 0.0) <= 0:
        return SHORT
    return None


def _hopeful(values, errors=1.0):
    """The mean log ratio `errors` standard errors better than seen."""
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
    return mean + errors * sd / math.sqrt(len(logs))

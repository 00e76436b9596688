"""Stopping a comparison once its verdict is settled, with intervals that stay valid.

tune compares each candidate with its lever's baseline, round after round. Looking at a
fixed-n 95% interval after every round and stopping as soon as it excludes 1 would make a
chance win far more likely than 5%: every look is another chance. A `Plan` fixes the looks
in advance and spends the error rate over them (a group-sequential design, its intervals
repeated confidence intervals: Jennison and Turnbull 1989, "Interim analyses: the repeated
confidence interval approach", JRSS B 51:305-361; Jennison and Turnbull 2000, "Group
Sequential Methods with Applications to Clinical Trials", ch. 7 and 9):

- a candidate is looked at after every round from `first` (3: the fewest rounds whose t
  interval is of use) to `rounds`, the plan's last (and after 2, for one that was slower than
  its baseline in both: EARLY_SHARE of its error rate);
- its error rate `alpha` (0.05, already split over the candidates tried: Bonferroni) is
  spent over those looks by the power-family spending function alpha * t**2, where t is the
  share of the planned rounds done (Kim and DeMets 1987, "Design and analysis of group
  sequential tests based on the type I error spending rate function", Biometrika 74:149-154):
  little at the first looks, whose t intervals have 2 or 3 degrees of freedom and are wide
  anyway, more at the last ones, where a gain of 1.2x under a noisy host is decided;
- the interval at a look is the usual t interval on the mean log ratio (`stats.ratio_interval`)
  at that look's level, whose t quantiles (`boundaries`) are set so that the probability of
  a first miss at each look is exactly that look's share of alpha, given that the t
  statistics of one candidate's looks are strongly correlated (they share rounds). That joint
  distribution does not depend on the true ratio or the spread (the t statistics are pivotal
  for independent, normal log ratios, which each fixed-n t interval assumes already), so it
  is computed once per plan by simulation: SIMULATED sequences of standard normal rounds from
  a fixed seed, the quantile of the largest |t| among the sequences not yet crossed at each
  look. With 400,000 sequences the error rate is met within about 2% of itself.

All the intervals a candidate shows over its looks then cover its true ratio together with
probability 1 - alpha, whatever rule stopped it: a settled verdict, futility, a time budget,
Ctrl-C. That is what makes stopping early honest. (Before, each look got its share of alpha
on its own, Bonferroni over the looks: valid too, but it paid for the looks as if they were
independent, and on the tabular MLP script it missed a 1.2x gain in 2 tunes of 20.)

`settle` says whether a candidate's verdict can still change: faster or slower beyond the
noise, unable to reach the smallest speed-up worth a change (its interval's upper end below
1 + threshold), or, futility, which can only stop a candidate from being called faster and so
costs no error rate: even one standard error better than it has looked so far it stays below
1 + threshold (from the 3rd round; from the 2nd when it was slower than its baseline in both and
the upper end of a one-sided 90% t interval stays below 1 + threshold: one standard error of 2
rounds cost a 1.3x gain 5% of its tunes at a run-to-run spread of 25%),
or, SHORT, from the 5th round, with the spread seen so far its interval could not exclude 1 by the
plan's last round (the plan is too short for the noise: more rounds may settle it). (The spread
of 3 rounds is too uncertain to give up on a candidate for it: one outlying round of three can
triple it.)
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

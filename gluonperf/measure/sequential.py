"""Stopping a comparison once its verdict is settled, with intervals that stay valid.

tune compares each candidate with its lever's baseline, round after round. Looking at a
fixed-n 95% interval after every round and stopping as soon as it excludes 1 would make a
chance win far more likely than 5%: every look is another chance. A `Plan` fixes the looks
in advance and spends the error rate over them (a group-sequential design):

- a candidate is looked at after every round from `first` (3: the fewest rounds whose t
  interval is of use) to `rounds`, the plan's last;
- its error rate `alpha` (0.05, already split over the candidates tried: Bonferroni) is
  spent over those looks by Lan and DeMets' Pocock-type spending function
  alpha * log(1 + (e - 1) * t), where t is the share of the planned rounds done (Lan and
  DeMets 1983, "Discrete sequential boundaries for clinical trials", Biometrika 70:659-663;
  Jennison and Turnbull 2000, "Group Sequential Methods with Applications to Clinical
  Trials", ch. 7);
- the interval at a look is the usual t interval on the mean log ratio (`stats.ratio_interval`),
  at the level 1 - (that look's share of alpha).

By Bonferroni's inequality all the intervals a candidate shows over its looks cover its true
ratio together with probability at least 1 - alpha, whatever rule stopped it: a settled
verdict, futility, a time budget, Ctrl-C. That is what makes stopping early honest. It is
conservative: exact group-sequential boundaries would be narrower, but they need the joint
distribution of the looks' statistics, which t statistics with a few degrees of freedom do
not give simply; the union bound needs nothing beyond what each fixed-n t interval assumes
(log ratios independent from round to round and close to normal).

`settle` says whether a candidate's verdict can still change: faster or slower beyond the
noise, unable to reach the smallest speed-up worth a change (its interval's upper end below
1 + threshold), or, futility, which can only stop a candidate from being called faster and so
costs no error rate: even one standard error better than it has looked so far it stays below
1 + threshold (from the 3rd round; from the 2nd when it was slower than its baseline in both),
or, from the 5th round, with the spread seen so far its interval could not exclude 1 by the
plan's last round. (The spread of 3 rounds is too uncertain to give up on a candidate for it:
one outlying round of three can triple it.)
"""
import math
from dataclasses import dataclass

from . import stats

FIRST_LOOK = 3      # rounds at the first look: with 2, a t interval has 1 degree of freedom
BEHIND_LOOK = 2     # a candidate slower than its baseline in each of this many rounds may leave (futility)
SPREAD_LOOK = 5     # from this round on, the spread seen so far may tell that the plan is too short to show a gain
EARLY_SHARE = 0.01  # of a candidate's alpha, for the interval of one that left before the first look
# the outcomes of `settle`, as the records' `stopped` field says them
FASTER, SLOWER, CANNOT_PAY, FUTILE, BEHIND, PLAN_DONE = (
    "faster", "slower", "cannot pay", "cannot be shown faster", "slower in every round", "plan done")


def spent(alpha, share):
    """Alpha spent by the Pocock-type spending function after `share` (0..1) of the planned rounds."""
    share = min(1.0, max(0.0, share))
    return alpha * math.log(1 + (math.e - 1) * share)


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
        """The confidence level of the interval at the look after `n` rounds: 1 minus the alpha spent
        between the previous look and this one. Before the first look (a candidate that left after
        BEHIND_LOOK rounds, slower in each) the interval shown gets EARLY_SHARE of alpha, taken from
        the first look's share, so that every interval a candidate can show is in the plan."""
        if n < 1:
            raise ValueError("a look needs at least one round, got %r" % n)
        if n < self.first:
            return 1 - EARLY_SHARE * self.alpha
        n = min(n, self.rounds)
        before = spent(self.alpha, (n - 1) / self.rounds) if n > self.first else EARLY_SHARE * self.alpha
        return 1 - (spent(self.alpha, n / self.rounds) - before)

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
    CANNOT_PAY, FUTILE, PLAN_DONE), or None when its verdict can still change."""
    values = [r for r in ratios if r is not None]
    n = len(values)
    if n >= plan.rounds:
        return PLAN_DONE
    bound = 1 + threshold
    if BEHIND_LOOK <= n < plan.first:
        if all(v < 1 for v in values) and _hopeful(values) <= math.log(bound):
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
        return FUTILE
    return None


def _hopeful(values):
    """The mean log ratio one standard error better than seen."""
    logs = [math.log(v) for v in values]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1)) if len(logs) > 1 else 0.0
    return mean + sd / math.sqrt(len(logs))

"""Intervals and verdicts: is a change real, or noise?

The unit of evidence is a ratio per round, each round setting a variant against a baseline
measured next to it: per-round ratios cancel the machine's slow drift.

- `ratio_interval`: the default, a Student t interval on the mean log ratio (from 2 rounds).
- `median_interval`: the distribution-free interval of the median (6 rounds for 95%).
- `two_sample_interval`: two runs not interleaved (two saved files), widened by a noise floor.
- `verdict`: faster / slower, same within +-m, or inconclusive with the rounds to settle it.

SciPy is imported inside the functions that need it, so that a command's start-up does not pay
for it. The rules, and why: docs/verdicts.md.
"""
import functools
import math
from dataclasses import dataclass
from typing import Optional

from ..records import READABLE_SPAN, level_text

LEVEL = 0.95
UNSTABLE_LEVEL = 0.99       # an unstable machine gets wider intervals (see `level_for`)
THRESHOLD = 0.05            # default: changes within +-5% are "the same"
MAX_ROUNDS = 1000           # rounds_needed gives up beyond this
# Run-to-run drift of one configuration: the SD of the log of a run's level from one fresh
# process to the next, which no sample from within one run can show. It depends on how long
# one timed call takes: a call of tens of microseconds moves with the process's memory layout
# and Python's overheads, a call of tens of milliseconds is mostly arithmetic. Bands of the
# call's time (up to, in seconds) and their floor, measured with `benchmarks/verdicts.py
# --parts floor`; the data and its machines: docs/verdicts.md and benchmarks/results/.
# Used only when two runs that were not interleaved are compared.
NOISE_FLOORS = ((1e-3, 0.26), (10e-3, 0.20), (math.inf, 0.16))
NOISE_FLOOR = NOISE_FLOORS[0][1]  # the widest: for a record that does not say how long a call takes
# The same drift once each run's level is held against the yardstick timed in its own repeats
# (harness.yardstick: the machine's speed at that moment): the SD of the log of a run's
# median(time / yardstick) from one fresh process to the next, by the same bands of call time,
# measured with `benchmarks/verdicts.py --parts floor`.
YARDSTICK_FLOORS = ((1e-3, 0.13), (10e-3, 0.13), (math.inf, 0.08))
# What several runs saved one after another (--processes N, or files concatenated) still
# share: the host's speed moves over minutes, so consecutive processes drift together and
# their spread understates how far the next saved run may lie. The SD of a saved run's mean
# log level beyond what its runs show, measured with `benchmarks/verdicts.py --parts single`.
SESSION_FLOOR = 0.08


def noise_floor(call_s=None, yardstick=False):
    """The run-to-run noise floor (SD of one run's log level) for a benchmark whose one timed
    call takes `call_s` seconds (NOISE_FLOORS, or YARDSTICK_FLOORS for levels held against the
    yardstick); the widest floor when the call's time is not known."""
    bands = YARDSTICK_FLOORS if yardstick else NOISE_FLOORS
    if call_s is None or not (call_s > 0 and math.isfinite(call_s)):
        return bands[0][1]
    return next(floor for upto, floor in bands if call_s <= upto)  # the last band has no end


@dataclass(frozen=True)
class Interval:
    """A ratio with its confidence interval: `estimate` (the geometric mean of the per-round
    ratios, or the median for the order-statistic method), `low`..`high` at `level`, over `n`
    rounds. `sd_log` is the SD of one round's log ratio (what `rounds_needed` scales)."""
    estimate: float
    low: float
    high: float
    n: int
    level: float = LEVEL
    method: str = "t"
    sd_log: Optional[float] = None

    def fields(self, key="ratio"):
        """Flat record fields: key, key_ci_low, key_ci_high, key_n, key_level."""
        return {key: self.estimate, key + "_ci_low": self.low, key + "_ci_high": self.high,
                key + "_n": self.n, key + "_level": self.level}

    def describe(self, unit="x", what="rounds", level=None):
        """'1.12x (95% CI 1.04-1.21, 12 rounds)'; `level`: the level to state, when the interval
        holds it jointly with others (see `ci_text`). An interval too wide to tell a reader anything
        (`readable`: 2 rounds at a corrected level can span 1e-16 to 1e15) is not written out:
        '0.72x (2 rounds: too few for an interval)'."""
        rounds = "%d %s" % (self.n, what if self.n != 1 else what.rstrip("s"))
        if self.method == "t" and self.n >= 1 and not readable(self):
            return "%s%s (%s: too few for an interval)" % (_num(self.estimate), unit, rounds)
        return "%s%s (%s, %s)" % (_num(self.estimate), unit, self.ci_text(level), rounds)

    def ci_text(self, level=None):
        """'95% CI 1.04-1.21' at the interval's own level, or at `level`: an interval built at a
        higher level so that a family of them holds `level` together (over the candidates of a
        lever, Bonferroni, and the looks of a sequential plan) is stated at the family's level,
        which is what a reader may rely on. `level` may not exceed the interval's own."""
        if level is not None and level > self.level + 1e-9:
            raise ValueError("an interval at %s cannot be stated at %s" % (self.level, level))
        stated = level_text(self.level if level is None else level)
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return "%s CI unknown" % stated
        return "%s CI %s-%s" % (stated, _num(self.low), _num(self.high))


def _num(x):
    if x is None or not math.isfinite(x):
        return str(x)
    return "%.2f" % x if 0.1 <= abs(x) < 100 else "%.3g" % x


def _logs(ratios):
    out = []
    for r in ratios:
        if r is None:
            continue
        r = float(r)
        if not (r > 0 and math.isfinite(r)):
            raise ValueError("a ratio must be a positive finite number, got %r" % r)
        out.append(math.log(r))
    return out


def _check_level(level):
    if not 0 < level < 1:
        raise ValueError("level must be between 0 and 1, got %r" % level)


@functools.lru_cache(maxsize=4096)
def t_quantile(p, dof):
    """Student's t quantile (`scipy.stats.t.ppf(p, dof)`; the normal's for infinite dof).
    From scipy.special, the functions scipy.stats calls: importing scipy.stats takes about
    0.5 s more of every command's start. Kept: a tune asks for the same few again and again."""
    from scipy.special import ndtri, stdtrit
    return float(ndtri(p)) if math.isinf(dof) else float(stdtrit(dof, p))


def _half_binomial_cdf(k, n):
    """P(B <= k) for B ~ binomial(n, 1/2), exactly (one rounding, at the division)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n


def ratio_interval(ratios, level=LEVEL):
    """The geometric mean of `ratios` (per-round ratios; None entries, failed rounds, are
    left out) with a t interval on the mean log ratio. One round: no interval (0..inf)."""
    _check_level(level)
    logs = _logs(ratios)
    n = len(logs)
    if n == 0:
        raise ValueError("no ratios to make an interval of")
    mean = math.fsum(logs) / n
    if n < 2:
        return Interval(math.exp(mean), 0.0, math.inf, n, level, "t", None)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (n - 1))
    half = t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n)
    return Interval(math.exp(mean), _exp(mean - half), _exp(mean + half), n, level, "t", sd)


def _exp(x):
    """e**x, or its limit where a float cannot hold it (an interval of 2 rounds at a level near 1
    can reach e**1000: its end is then inf, or 0)."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


READABLE = READABLE_SPAN  # an interval wider than this factor tells a reader nothing (records.READABLE_SPAN)


def readable(interval):
    """Whether an interval is worth printing: finite ends within a factor READABLE of each other (a
    t interval of 2 rounds at a Bonferroni-corrected level can span 1e-12 to 1e11)."""
    low, high = interval.low, interval.high
    return low > 0 and math.isfinite(high) and high / low <= READABLE


def rounds_for_readable(ratios, level=LEVEL):
    """About how many rounds in all would give a `readable` interval at `level`, with the spread of
    these per-round `ratios` (None entries left out); None with fewer than 2 or no spread."""
    logs = _logs(ratios)
    if len(logs) < 2:
        return None
    mean = math.fsum(logs) / len(logs)
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    if sd == 0:
        return None
    n = len(logs)
    while n <= MAX_ROUNDS:
        if 2 * t_quantile(0.5 + level / 2, n - 1) * sd / math.sqrt(n) <= math.log(READABLE):
            return n
        n += 1
    return None


def median_interval(ratios, level=LEVEL):
    """The median of `ratios` with its distribution-free interval: the order statistics
    x(k) .. x(n+1-k) with the largest k whose coverage, from the binomial(n, 1/2), is at least
    `level`. Fewer rounds than that needs (6 for 95%): 0..inf."""
    _logs(ratios)  # the same checks as the t interval's
    return median_of(ratios, level)


def median_of(values, level=LEVEL):
    """`median_interval` of any finite numbers (sizes, counts; None left out), not only ratios."""
    _check_level(level)
    values = sorted(float(r) for r in values if r is not None)
    n = len(values)
    if n == 0 or not all(math.isfinite(v) for v in values):
        raise ValueError("no values, or values that are not finite, to make an interval of")
    mid = (values[(n - 1) // 2] + values[n // 2]) / 2
    k = 0  # coverage of [x(k), x(n+1-k)] is 1 - 2 P(B <= k-1), B ~ binomial(n, 1/2)
    while k + 1 <= n // 2 and 1 - 2 * _half_binomial_cdf(k, n) >= level:
        k += 1
    if k == 0:
        return Interval(mid, 0.0, math.inf, n, level, "order statistics", None)
    achieved = 1 - 2 * _half_binomial_cdf(k - 1, n)
    return Interval(mid, values[k - 1], values[n - k], n, achieved, "order statistics", None)


def minmax_level(n):
    """The confidence level of min..max of n rounds as an interval for their median:
    1 - 2^(1-n) (75% for 3 rounds, 94% for 5)."""
    return 1 - 2.0 ** (1 - n) if n >= 1 else 0.0


def two_sample_interval(old, new, level=LEVEL, noise_floor=NOISE_FLOOR, higher_is_better=False):
    """The speed ratio of two runs measured apart (not interleaved): `old`, `new` are
    samples (seconds per call when not `higher_is_better`, a rate when it is). The ratio
    (> 1: `new` is faster) is exp(mean log old - mean log new) for times; its interval is
    Welch's t on the log samples, with `noise_floor` (the SD of one run's log level from
    run to run) added for each side: within-run samples cannot show the drift between runs.
    With `noise_floor=0` this is the plain Welch interval."""
    _check_level(level)
    a, b = _logs(old), _logs(new)
    if not a or not b:
        raise ValueError("each side needs at least one sample")
    ma, mb = math.fsum(a) / len(a), math.fsum(b) / len(b)
    d = (mb - ma) if higher_is_better else (ma - mb)
    va = math.fsum((x - ma) ** 2 for x in a) / (len(a) - 1) if len(a) > 1 else math.nan
    vb = math.fsum((x - mb) ** 2 for x in b) / (len(b) - 1) if len(b) > 1 else math.nan
    n = min(len(a), len(b))
    if math.isnan(va) or math.isnan(vb):
        if noise_floor <= 0:
            return Interval(math.exp(d), 0.0, math.inf, n, level, "welch t", None)
        va = 0.0 if math.isnan(va) else va
        vb = 0.0 if math.isnan(vb) else vb
    sa, sb = va / len(a), vb / len(b)
    floor = 2 * noise_floor ** 2  # one run's drift on each side, known rather than estimated
    se = math.sqrt(sa + sb + floor)
    if se == 0:
        return Interval(math.exp(d), math.exp(d), math.exp(d), n, level, "welch t", 0.0)
    # Welch-Satterthwaite degrees of freedom; the floor's part counts as known (infinite dof)
    estimated = (sa ** 2 / (len(a) - 1) if len(a) > 1 else 0.0) + (sb ** 2 / (len(b) - 1) if len(b) > 1 else 0.0)
    dof = (sa + sb + floor) ** 2 / estimated if estimated > 0 else math.inf
    q = t_quantile(0.5 + level / 2, max(dof, 1.0))
    return Interval(math.exp(d), math.exp(d - q * se), math.exp(d + q * se), n, level,
                    "welch t" + (" + noise floor" if floor > 0 else ""), None)


@dataclass(frozen=True)
class Verdict:
    """`word`: 'faster', 'slower', 'same' or 'inconclusive'; `text` says it for people, with
    the threshold and, when inconclusive, how many rounds would settle it (`rounds_needed`,
    None when not even a guess can be made)."""
    word: str
    text: str
    threshold: float
    rounds_needed: Optional[int] = None

    def fields(self):
        out = {"verdict": self.word, "verdict_text": self.text, "threshold": self.threshold}
        if self.word == "inconclusive":
            out["rounds_needed"] = self.rounds_needed
        return out


def verdict(interval, threshold=THRESHOLD, words=("faster", "slower"), what="rounds", settle=None,
            stated_level=None):
    """Judge a ratio's `interval` (> 1 means the first of `words`) against `threshold`
    (0.05: +-5%): faster/slower only when the interval excludes 1 and the estimate is past
    the threshold; 'same within +-m' only when the whole interval lies within +-m; otherwise
    inconclusive. `settle` replaces the advice on how to settle an inconclusive one.
    `stated_level`: the level the text states, when the interval is one of a family that holds
    it together (`Interval.ci_text`); how many rounds would settle it is reckoned at the
    interval's own level, at which more rounds would be judged."""
    if not 0 <= threshold < 1:
        raise ValueError("threshold must be a fraction in [0, 1), got %r" % threshold)
    up, down = words
    est, lo, hi = interval.estimate, interval.low, interval.high
    bound = 1 + threshold
    said = interval.describe(what=what, level=stated_level)
    if lo > 1 and est > bound:
        return Verdict(up, "%s: %s" % (up, said), threshold)
    if hi < 1 and est < 1 / bound:
        return Verdict(down, "%s: %s" % (down, said), threshold)
    if lo >= 1 / bound and hi <= bound:
        return Verdict("same", "same within +-%g%%: %s" % (100 * threshold, said), threshold)
    need = rounds_needed(interval, threshold)
    more = "; " + settle if settle else ("; about %d %s would settle it" % (need, what) if need is not None
            else "; more %s would settle it" % what if interval.n < 2 or interval.sd_log is None
            else "; the change sits at the threshold: more %s will not settle it soon" % what)
    return Verdict("inconclusive", "inconclusive: %s%s" % (said, more), threshold, need)


def winner(results):
    """The candidate to keep from one lever's results (records with `verdict`, `ratio`, `error`:
    tuning.schedule.summarize's): of those judged faster than the baseline (each a change that
    pays, beyond the noise), the one with the highest estimate, the best guess of which is
    fastest; None when none is. (Not the highest lower end: under the sequential plan a
    candidate's lower end depends as much on the look where it stopped as on its speed.) The
    search keeps it, and tune --'s recipe names it."""
    faster = [r for r in results if r.metrics.get("verdict") == "faster" and not r.metrics.get("error")]
    return max(faster, key=lambda r: r.metrics["ratio"]) if faster else None


def rounds_needed(interval, threshold=THRESHOLD, level=None):
    """How many rounds in all (with this round-to-round spread and this estimate) would make
    the interval decide: exclude 1 when the estimate is past the threshold, or fit inside
    +-threshold when it is within. None when it cannot be estimated (fewer than 2 rounds) or
    would take more than MAX_ROUNDS."""
    if interval.sd_log is None or interval.n < 2:
        return None
    level = interval.level if level is None else level
    d = abs(math.log(interval.estimate))
    m = math.log(1 + threshold)
    target = d if d > m else m - d
    if interval.sd_log == 0:
        return interval.n
    if target <= 0:
        return None
    # t's quantile is above the normal's, so no n below the normal's answer can do: start there
    z = t_quantile(0.5 + level / 2, math.inf) * interval.sd_log / target
    n = max(interval.n, 2, math.ceil(min(z * z, MAX_ROUNDS + 1.0)))
    while n <= MAX_ROUNDS:
        if t_quantile(0.5 + level / 2, n - 1) * interval.sd_log / math.sqrt(n) < target:
            return n
        n += 1
    return None


def paired_ratios(baseline, other):
    """Per-round speed ratios of `other` against `baseline` (seconds per call, same rounds,
    e.g. two Measurements' samples from one interleaved run): baseline_i / other_i, so > 1
    means `other` is faster."""
    baseline, other = list(baseline), list(other)
    if len(baseline) != len(other):
        raise ValueError("paired samples need the same number of rounds (%d and %d)" % (len(baseline), len(other)))
    return [b / o for b, o in zip(baseline, other) if b and o]


def speedup_fields(baseline, samples, key="speedup", threshold=THRESHOLD, level=LEVEL):
    """Record fields for the speed-up of `samples` over `baseline` (seconds per call, paired
    repeat by repeat from one interleaved run): the interval's fields under `key` and the
    verdict's. The estimate is the geometric mean of the per-repeat ratios."""
    interval = ratio_interval(paired_ratios(baseline, samples), level)
    return dict(interval.fields(key), **verdict(interval, threshold, what="repeats").fields())


def level_for(stable):
    """The confidence level to use: LEVEL on a stable machine, UNSTABLE_LEVEL otherwise."""
    return LEVEL if stable else UNSTABLE_LEVEL

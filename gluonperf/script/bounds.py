"""What a lever could gain at best on a user's script, from its runs so far, so that a lever that
cannot pay is named with its bound and not run (it could only be judged "not faster" after
minutes of runs).

- `data`: DataLoader workers move the script's own wait for its batches (the time spent inside
  the loader's `next()` in a run's timed steps) off the training thread, and nothing else: at
  best the step loses all of it, t / (t - wait). The bound is taken on the runs of the best
  settings kept so far (the levers before it change the step: after hybridize it is shorter
  and its wait a larger share), one ratio a run, and its upper end is that of their 95% t
  interval, so that it covers the spread between runs: a lever whose true best case is the
  smallest speed-up worth a change is skipped on one side of the interval, 2.5% of the time for
  a spread that is normal in the log, 3.2% of 3,996 simulated trials with a skewed spread (the
  wait's share lognormal, SD a quarter of itself; tests/test_lever_bounds.py holds it under 5%).
  Fewer than MIN_RUNS runs of the best: no bound, the lever runs.

bfloat16 has no bound here any more: the one it had was a point from 5 profiled steps of the
script as it is, with no interval across runs, and its chance of skipping a change that pays was
never measured; the sequential plan's futility ends a dtype lever that cannot pay in its first
rounds.
"""
import math

from ..measure import stats

MIN_RUNS = 3  # runs of the best so far that a data bound needs (a t interval of 2 runs is too wide to bound)


def data_bound(rates):
    """The Interval of t / (t - wait for data) over runs (`rates`: their `rate` records: `seconds`
    timed, `data_s` of it waiting for data), or None with fewer than MIN_RUNS usable runs."""
    ratios = [r["seconds"] / (r["seconds"] - r["data_s"]) for r in rates or ()
              if r.get("seconds") and r.get("data_s") is not None and 0 <= r["data_s"] < r["seconds"]]
    if len(ratios) < MIN_RUNS:
        return None
    return stats.ratio_interval(ratios)


def cannot_pay(bound, threshold=stats.THRESHOLD):
    """True when a bound (a number, or an Interval's upper end) stays below 1 + threshold."""
    if bound is None:
        return False
    high = bound.high if isinstance(bound, stats.Interval) else bound
    return math.isfinite(high) and high < 1 + threshold

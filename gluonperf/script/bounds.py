"""What a lever could gain at best on a user's script, from its runs so far, so that a lever that
cannot pay is named with its bound and not run (it could only be judged "not faster" after
minutes of runs).

`data_bound`: DataLoader workers can at most take the script's own wait for its batches off the
training thread, t / (t - wait), one ratio per run of the best settings kept so far; the bound
is the upper end of their 95% t interval (`cannot_pay` holds it against 1 + threshold), and
with fewer than MIN_RUNS runs there is none: the lever runs. bfloat16 has no bound: the
sequential plan's futility ends a dtype lever that cannot pay in its first rounds. Why, and how
often a lever that pays is skipped: docs/faster_script.md, tests/test_lever_bounds.py.
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

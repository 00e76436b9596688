"""What the benchmark suites say about a ratio: its 95% interval, n and, against a reference, a verdict.

Every suite measures per-round ratios (a run against the reference measured next to it, in
the same round); this turns them into the record fields every reader of gluonperf's records
knows (gluonperf/measure/stats.py): `Interval.fields(key)` (key, key_ci_low, key_ci_high, key_n,
key_level: the geometric mean of the rounds with its t interval) and `Verdict.fields()`
(verdict, verdict_text, threshold, rounds_needed), prefixed for a second reference
(e.g. vs_pytorch_verdict). docs/suites.md says how to read them.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gluonperf.measure import stats  # noqa: E402

INTERVAL_SUFFIXES = ("", "_ci_low", "_ci_high", "_n", "_level")
VERDICT_FIELDS = ("verdict", "verdict_text", "threshold", "rounds_needed")


def interval_of(ratios):
    """The stats.Interval of per-round `ratios` (None: a failed round, left out), or None
    when no round gave one."""
    ok = [r for r in ratios or () if r]
    return stats.ratio_interval(ok) if ok else None


def ratio_fields(ratios, key="ratio", name=None, reference=None, prefix="", threshold=stats.THRESHOLD,
                 words=("faster", "slower"), what="rounds"):
    """`key` and its interval fields from per-round `ratios` (all None when no round gave
    one); with `reference`, also the verdict of `name` against it (> 1: the first of `words`;
    ("slower", "faster") for a ratio of times; `what` the ratios are: rounds, repeats), its fields
    named `prefix` + verdict, verdict_text, threshold, rounds_needed; for the reference
    itself (`name` == `reference`) the verdict is 'baseline', as schedule.summarize marks it.
    Old min..max fields of `key` are never produced: callers drop them (see `replace`)."""
    iv = interval_of(ratios)
    out = iv.fields(key) if iv else {key + s: None for s in INTERVAL_SUFFIXES}
    if reference is not None and name == reference:
        out[prefix + "verdict"] = "baseline"
    elif reference is not None and iv is not None:
        v = stats.verdict(iv, threshold, words, what=what)
        out.update({prefix + k: v for k, v in v.fields().items()})
        out[prefix + "verdict_text"] = "%s vs %s: %s" % (name, reference, v.text)
    return out


def replace(metrics, key, fields):
    """Put `fields` into `metrics` in place of `key`'s old min..max (key_min, key_max) and
    of an earlier verdict under the same prefix."""
    for old in (key + "_min", key + "_max"):
        metrics.pop(old, None)
    metrics.update(fields)
    return metrics


def against_limit(interval, limit):
    """A target 'at most `limit`' judged on an interval: 'met' when the whole interval is at or
    below it, 'missed' when the whole interval is above it, else 'inconclusive'."""
    if interval is None:
        return None
    return "met" if interval.high <= limit else "missed" if interval.low > limit else "inconclusive"


def columns(key):
    """The table columns of `key` with its interval: key, key_ci_low, key_ci_high, key_n."""
    return [key, key + "_ci_low", key + "_ci_high", key + "_n"]


def verdict_lines(results, prefix=""):
    """The verdict texts of `results` under `prefix` (one line each), for after a table."""
    return [r.metrics[prefix + "verdict_text"] for r in results if r.metrics.get(prefix + "verdict_text")]

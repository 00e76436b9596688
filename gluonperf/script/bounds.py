"""What a lever could gain at best on a user's script, from what tune --'s probe measured in it.

A lever whose best case cannot reach the smallest speed-up worth a change (1 + threshold) is
named with its bound and not run: it could only be judged "not faster" after minutes of runs.
Each bound is an upper end, never an estimate of the gain:

- `data`: DataLoader workers move the script's own wait for its batches (the time spent inside
  the loader's `next()` in the probe's timed steps) off the training thread, and nothing else:
  at best the step loses all of it, t / (t - wait). The probe's timed steps are cut into runs
  of consecutive steps; the bound is the upper end of the 95% interval of that ratio over them.
- `dtype`: bfloat16 AMP runs the operators MXNet's AMP lists for bfloat16 (convolutions, dense
  layers, and the operators that take either type: activations, pooling, batch norm, ...) and
  their backward in bfloat16, and nothing else; at best they take no time at all: wall /
  (wall - their time), over the probe's steps under MXNet's profiler. A hybridized graph's bulk
  segment counts whole when it holds one of them.
"""
import math

from ..measure import stats


def data_bound(rate):
    """The Interval of t / (t - wait for data) over the probe's runs of timed steps (`rate`: the probe's
    `rate` record), or None when the probe did not measure it."""
    rounds = [(t, w) for t, w in (rate or {}).get("data_rounds") or () if t > 0 and 0 <= w < t]
    if len(rounds) < 2:
        return None
    return stats.ratio_interval([t / (t - w) for t, w in rounds])


def bf16_operators():
    """The operator names bfloat16 AMP may run in bfloat16 (MXNet's AMP lists)."""
    from mxnet.contrib.amp.lists import symbol_bf16
    return set(symbol_bf16.BF16_FUNCS) | set(symbol_bf16.BF16_FP32_FUNCS)


def bf16_bound(operators, names=None):
    """wall / (wall - the time of the operators bfloat16 could speed up) over the probe's profiled steps
    (`operators`: the probe's `operators` record), or None when the probe did not measure them."""
    if not operators or not operators.get("ops") or not operators.get("seconds"):
        return None
    names = bf16_operators() if names is None else names

    def speeds_up(op):
        parts = [p.strip() for p in op.split(",")]  # a bulk segment: its operators, comma-separated
        return any(p.replace("_backward_", "", 1) in names for p in parts)
    wall = operators["seconds"]
    sped = sum(t for op, t in operators["ops"].items() if speeds_up(op))
    return math.inf if sped >= wall else wall / (wall - sped)


def cannot_pay(bound, threshold=stats.THRESHOLD):
    """True when a bound (a number, or an Interval's upper end) stays below 1 + threshold."""
    if bound is None:
        return False
    high = bound.high if isinstance(bound, stats.Interval) else bound
    return math.isfinite(high) and high < 1 + threshold

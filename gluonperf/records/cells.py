"""One value or one column of records as a person reads it: its unit and its figures.

Units: fields ending in `_s` are seconds, `_bytes` bytes, `_per_s` a rate, `share` a
fraction. A table's column says its unit once, in its header (`column_unit`,
`column_header`: `images/s`, `median (us)`, `rss_peak (MiB)`), and its cells are plain
numbers (`format_cell`: 22,410, 660.3, 12.3); a ratio keeps its 'x' (3.43x) and a share its '%'
(12.5%). A value read alone carries its unit (`format_value`: 22,410/s, 660.3 us, 12.3 MiB;
`format_estimate` with its interval).
"""
import math
import statistics
from dataclasses import dataclass


SECONDS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9))


def figures(value, n=4):
    """`value` as a person reads it: `n` significant figures, thousands separated from 10,000
    up, no exponent between 1e-4 and 1e12: 22,410, 6432, 439.2, 1.514, 0.01235 (n=3: 439)."""
    rounded = float("%.*g" % (n, value))
    if rounded != 0 and not 1e-4 <= abs(rounded) < 1e12:
        return "%.*g" % (n, value)
    if abs(rounded) >= 10000:
        return "{:,.0f}".format(value)
    if abs(rounded) >= 1000:
        return "%.0f" % value
    return "%.*g" % (n, value)


def level_text(level):
    """An interval's level as a reader reads it: '95%', '99.5%'; a level spent over looks or
    candidates (0.990155) is rounded down to a tenth of a percent ('99%'), which still holds: an
    interval at 99.0155% covers at least 99% of the time."""
    return "%g%%" % (math.floor(1000 * level + 1e-6) / 10)


def duration_text(seconds):
    """'45 s', '4 min 12 s', '1 h 3 min'."""
    seconds = int(round(seconds))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %d s" % (seconds // 60, seconds % 60)
    return "%d h %d min" % (seconds // 3600, seconds % 3600 // 60)


def is_share(key):
    """A fraction shown as a percentage."""
    return key == "share" or key.endswith("_share")


def _mib(value):
    """Bytes in MiB: 12.3, 1024.0, 20,480 (thousands separated from 10,000 up)."""
    mib = value / 2 ** 20
    return "%.1f" % mib if abs(mib) < 9999.95 else "{:,.0f}".format(mib)


def _seconds_unit(value):
    """(unit, scale) of a time: the largest unit it is at least one of (ns below)."""
    return next((u, s) for u, s in SECONDS if abs(value) >= s or u == "ns")


def format_value(key, value):
    """One value of `key` as text with its unit, read alone (--wide, the HTML report, a cell
    whose unit changes from row to row): '22,410/s', '660.3 us', '12.3 MiB', '12.5%'."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, (int, float)):
        if is_share(key):
            return "%.1f%%" % (100 * value)
        if key.endswith("_per_s"):
            return figures(value) + "/s"
        if key.endswith("_s"):
            unit, scale = _seconds_unit(value)
            return "%s %s" % (figures(value / scale), unit)
        if "bytes" in key:
            return _mib(value) + " MiB"
        if isinstance(value, float):
            return figures(value)
    return str(value)


def is_ratio(key):
    """A field holding a ratio (> 1: that many times): shown as '3.43x'."""
    return key in ("speedup", "ratio", "gain") or key.startswith(("vs_", "ratio_")) or "_vs_" in key \
        or "_over_" in key


def fixed(value):
    """A ratio as gluonperf writes it: 1.12, 0.95, 1.1e+03."""
    return "%.2f" % value if 0.1 <= abs(value) < 100 else "%.3g" % value


@dataclass(frozen=True)
class Unit:
    """How the numbers of one table column read, its unit said once in the header: `label`
    is the header's unit ('us', 'MiB'; none for a rate, whose name says it: images/s),
    `scale` divides the numbers, `suffix` follows each of them ('x' for a ratio, '%' for a
    share: a percentage reads as one with its sign, and costs the column no width)."""
    kind: str = ""  # 'share', 'rate', 'seconds', 'bytes', 'ratio' or '' (a plain number)
    label: str = ""
    scale: float = 1.0
    suffix: str = ""

    def number(self, value, n=4):
        """`value` in this unit, without it: '22,410', '660.3', '12.3', '3.43' (n: significant
        figures of a rate, a time or a plain float; an int is written as it is)."""
        if self.kind == "ratio":
            return fixed(value)
        if self.kind == "share":
            return "%.1f" % (100 * value)
        if self.kind == "bytes":
            return _mib(value)
        if not self.kind and isinstance(value, int):
            return str(value)
        return figures(value / self.scale, n)

    @property
    def alone(self):
        """What follows a number read alone, outside a column that names its unit: '/s', ' us'."""
        return {"rate": "/s", "seconds": " " + self.label, "bytes": " " + self.label}.get(self.kind, self.suffix)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _kind(key):
    """What `key`'s numbers are, as format_value reads them (a ratio besides)."""
    if is_share(key):
        return "share"
    if key.endswith("_per_s"):
        return "rate"
    if key.endswith("_s"):
        return "seconds"
    if "bytes" in key:
        return "bytes"
    if is_ratio(key):
        return "ratio"
    return ""


def column_unit(key, values=(), n=4):
    """The one unit of a column of `key` holding `values`. Times: the unit of s, ms, us, ns
    that writes every value in the fewest characters, the unit of their median on a tie
    (660.3 and 188.8 us; 0.6603 and 12.3 ms rather than 660.3 and 12,300 us)."""
    kind = _kind(key)
    if kind == "share":  # the % stays with the number, as a change's '+12.3%' does: 'share' is no wider
        return Unit(kind, suffix="%")
    if kind == "bytes":
        return Unit(kind, "MiB")
    if kind == "ratio":
        return Unit(kind, suffix="x")
    if kind != "seconds":
        return Unit(kind)
    magnitudes = [abs(v) for v in values if is_number(v) and math.isfinite(v) and v != 0]
    if not magnitudes:
        return Unit(kind, "s")
    home = SECONDS.index(_seconds_unit(statistics.median(magnitudes)))

    def cost(i):
        return max(len(figures(v / SECONDS[i][1], n)) for v in magnitudes), abs(i - home)
    label, scale = SECONDS[min(range(len(SECONDS)), key=cost)]
    return Unit(kind, label, scale)


def header_name(key):
    """`key` as a header names it, its unit left out (the header gives it once):
    images_per_s -> images/s, median_s -> median, rss_peak_bytes -> rss_peak."""
    kind = _kind(key)
    for cut, tail in (("rate", "_per_s"), ("seconds", "_s"), ("bytes", "_bytes")):
        if kind == cut and key.endswith(tail) and len(key) > len(tail):
            return key[:-len(tail)] + ("/s" if kind == "rate" else "")
    return key


def column_header(key, unit, level=None):
    """A column's header with its unit once: 'images/s', 'median (us)', 'rss_peak (MiB)',
    'speedup (95% CI)', 'step (ms, 95% CI)'; a share's and a ratio's cells keep their '%' and
    'x', their header its name ('share')."""
    inside = ", ".join(x for x in (unit.label, level) if x)
    name = header_name(key) if unit.kind else key
    return "%s (%s)" % (name, inside) if inside else name


# A ratio's interval whose ends lie further apart than this factor tells a reader nothing (a t interval
# of 2 rounds at a corrected level can span 1e-12 to 1e11): its cell says so instead of printing it.
READABLE_SPAN = 10.0


def too_wide(key, low, high):
    """Whether the interval (low, high) of ratio `key` is too wide to be worth printing."""
    return is_ratio(key) and is_number(low) and is_number(high) and not (
        low > 0 and math.isfinite(high) and high / low <= READABLE_SPAN)


def format_cell(key, value, unit, low=None, high=None, n=4):
    """A cell of a column whose header says its `unit`: the plain number ('22,410', '660.3';
    a ratio keeps its 'x': '3.43x', a share its '%': '12.5%'), an interval after it:
    '439 (425-454)', or for a ratio whose interval is too wide to read '0.72x (too few rounds)';
    None is '-', a text or a flag as format_value writes it."""
    if not is_number(value):
        return format_value(key, value)
    if not math.isfinite(value):
        return str(value)
    return _with_interval(key, unit.number(value, n) + unit.suffix, unit, low, high, n)


def _with_interval(key, head, unit, low, high, n):
    """`head` (the estimate as written) followed by its interval, or by '(too few rounds)' when
    the interval is too wide to read; `head` alone without one."""
    if low is None or high is None:
        return head
    if too_wide(key, low, high):
        return "%s (too few rounds)" % head
    return "%s (%s)" % (head, _bounds(unit, low, high, n))


def _bounds(unit, low, high, n):
    hi = unit.number(high, n) if math.isfinite(high) else "inf"
    lo = unit.number(low, n) if math.isfinite(low) else "-inf"
    return "%s%s%s" % (lo, " to " if lo.startswith("-") or hi.startswith("-") else "-", hi)


# An estimate beside its interval is written in three figures: the interval says how many count.
ESTIMATE_FIGURES = 3


def format_bounds(key, low, high, like=None):
    """An interval of `key` as text, in the unit of `like` (its estimate; default `low`) and
    without it: '2.51-4.69', '425-454', '4.4-4.71' (ms); an unbounded end is 'inf'."""
    if low is None or high is None:
        return "-"
    unit = column_unit(key, [like if like is not None else low], ESTIMATE_FIGURES)
    return _bounds(unit, low, high, ESTIMATE_FIGURES)


def format_estimate(key, value, low=None, high=None):
    """An estimate and its interval in one cell read alone, its unit in it (the HTML report,
    compare's ratio): '3.43x (2.51-4.69)', '439/s (425-454)', '4.52 ms (4.4-4.71)',
    '70.0% (65.0-75.0)'; the estimate alone without an interval ('1.00x'). In a table's
    column the unit goes to the header instead (format_cell)."""
    if not is_number(value):
        return format_value(key, value)
    if not math.isfinite(value):
        return str(value)
    unit = column_unit(key, [value], ESTIMATE_FIGURES)
    return _with_interval(key, unit.number(value, ESTIMATE_FIGURES) + unit.alone, unit, low, high, ESTIMATE_FIGURES)


def interval_pairs(columns):
    """{estimate: (low, high)} of the intervals among `columns`: X with X_ci_low and X_ci_high,
    or a time A_s with A_low_s and A_high_s."""
    pairs = {}
    for c in columns:
        for low, high in [(c + "_ci_low", c + "_ci_high")] + (
                [(c[:-2] + "_low_s", c[:-2] + "_high_s")] if c.endswith("_s") else []):
            if low in columns and high in columns:
                pairs[c] = (low, high)
    return pairs

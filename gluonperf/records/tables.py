"""One result record type, and the writers: a table for people, JSON lines and CSV for machines.

Units: fields ending in `_s` are seconds, `_bytes` bytes, `_per_s` a rate, `share` a
fraction; the files keep the raw numbers. The table says a column's unit once, in its header
(`images/s`, `median (us)`, `rss_peak (MiB)`), and its cells are plain numbers (22,410,
660.3, 12.3); a ratio keeps its 'x' (3.43x) and a share its '%' (12.5%). --wide prints the
records' own column names, so there each cell carries its unit (22,410/s, 660.3 us, 12.3 MiB).
"""
import csv
import io
import json
import math
import shutil
import statistics
import textwrap
from dataclasses import dataclass, field
from typing import Any, Dict

from .runtime.outputs import write_output


@dataclass(frozen=True)
class Result:
    """One row of a report: which experiment, which variant, and its flat metrics."""
    bench: str
    name: str
    metrics: Dict[str, Any] = field(default_factory=dict)

    def row(self):
        return {"bench": self.bench, "name": self.name, **self.metrics}


def result(bench, name, measurement=None, **metrics):
    """Build a Result; a Measurement's statistics come first, then the extra metrics."""
    fields = dict(measurement.summary()) if measurement is not None else {}
    fields.update(metrics)
    return Result(bench, name, fields)


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


def _columns(rows, columns):
    if columns:
        return list(columns)
    seen = []
    for row in rows:
        for key in row:
            if key not in seen:
                seen.append(key)
    return seen


# --- the terminal table ----------------------------------------------------------------
#
# A table fits the terminal it is read in (COLUMNS / shutil.get_terminal_size, 100 columns
# under a pipe): an estimate and its interval share one cell ("3.43x (2.51-4.69)"), a `note`
# column becomes numbered notes under the table, over-long names are cut in the middle, a
# prose column at the right end wraps, and the columns a person reads last go first (the
# order a command gives is the order of importance: the first column and its verdict stay).
# A column says its unit once, in its header (`images/s`, `median (us)`, `rss_peak (MiB)`),
# its cells plain numbers (column_unit, format_cell); a ratio's keep their 'x', a share's '%'.
# `wide=True` (--wide) prints every column under its recorded name, each cell with its unit
# (format_value); --json and --csv keep everything, raw.

DEFAULT_WIDTH = 100
NAME_CAP = 40        # a name longer than this is cut in the middle when the table is too wide
NAME_SHORT = 24      # ... to this before a figure is left out
NAME_FLOOR = 12      # ... and down to this when leaving columns out was not enough
PROSE_FLOOR = 30     # a prose column at the right end wraps down to this width
# What a person reads last: the spread beside a median, counts and checks; dropped first.
SECONDARY = ("iqr_s", "noisy", "max_abs_diff", "max_abs_err", "minor_faults", "max_recv", "calls",
             "hybrid_forward_calls", "overlap_lost_in_noise", "confirm_runs", "rounds", "n", "runnable",
             "threads", "better")
NOTE_COLUMNS = ("note", "notes", "error")  # rare per-row text: numbered notes under the table
PROSE_COLUMNS = ("finding", "reason", "advice")
KEPT = ("verdict", "status", "partial") + NOTE_COLUMNS  # besides the first column: dropped last


def terminal_width():
    """The columns of the terminal the table goes to: COLUMNS, the terminal's, or 100."""
    return shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns


def cut_middle(text, width):
    """`text` in at most `width` characters, cut in the middle with '...' (its start and end
    kept: '14 ops: BatchNorm, Activation...Convolution')."""
    if len(text) <= width:
        return text
    if width <= 3:
        return text[:width]
    keep = width - 3
    head, tail = text[:(keep + 1) // 2].rstrip(), text[len(text) - keep // 2:].lstrip()
    return head + "..." + tail


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


def _is_number(value):
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
    magnitudes = [abs(v) for v in values if _is_number(v) and math.isfinite(v) and v != 0]
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
    return is_ratio(key) and _is_number(low) and _is_number(high) and not (
        low > 0 and math.isfinite(high) and high / low <= READABLE_SPAN)


def format_cell(key, value, unit, low=None, high=None, n=4):
    """A cell of a column whose header says its `unit`: the plain number ('22,410', '660.3';
    a ratio keeps its 'x': '3.43x', a share its '%': '12.5%'), an interval after it:
    '439 (425-454)', or for a ratio whose interval is too wide to read '0.72x (too few rounds)';
    None is '-', a text or a flag as format_value writes it."""
    if not _is_number(value):
        return format_value(key, value)
    if not math.isfinite(value):
        return str(value)
    head = unit.number(value, n) + unit.suffix
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
    if not _is_number(value):
        return format_value(key, value)
    if not math.isfinite(value):
        return str(value)
    unit = column_unit(key, [value], ESTIMATE_FIGURES)
    head = unit.number(value, ESTIMATE_FIGURES) + unit.alone
    if low is None or high is None:
        return head
    if too_wide(key, low, high):
        return "%s (too few rounds)" % head
    return "%s (%s)" % (head, _bounds(unit, low, high, ESTIMATE_FIGURES))


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


def _level(key, rows):
    """The interval's level as a header says it: '95% CI', '99% CI', 'CI' (levels differ)."""
    levels = {row.get(key + "_level") for row in rows} - {None}
    if not levels:
        return "95% CI"
    if len(levels) == 1:
        return "%g%% CI" % (100 * levels.pop())
    return "CI"


class _Column:
    def __init__(self, key, header, cells, text=False, interval=False):
        self.key, self.header, self.cells, self.text, self.interval = key, header, cells, text, interval

    @property
    def width(self):
        return max([len(self.header)] + [len(c) for c in self.cells])

    def prose(self):
        return self.key in PROSE_COLUMNS or self.text and any(" " in c and len(c) > NAME_CAP for c in self.cells)


def _shown_columns(rows, cols):
    """The columns as the default table shows them, and the notes of a `note` column."""
    pairs = interval_pairs(cols)
    hidden = {k for low, high in pairs.values() for k in (low, high)}
    hidden |= {c + "_n" for c in pairs if c + "_n" in cols}
    out, notes = [], []
    for c in cols:
        if c in hidden:
            continue
        if c in pairs:
            low, high = pairs[c]
            unit = column_unit(c, [row.get(c) for row in rows], ESTIMATE_FIGURES)
            cells = [format_cell(c, row.get(c), unit, row.get(low), row.get(high), ESTIMATE_FIGURES)
                     for row in rows]
            out.append(_Column(c, column_header(c, unit, _level(c, rows)), cells, interval=True))
        elif c in NOTE_COLUMNS:
            cells = []
            for row in rows:
                text = row.get(c)
                if text in (None, ""):
                    cells.append("-")
                    continue
                text = str(text)
                if text not in notes:
                    notes.append(text)
                cells.append("[%d]" % (notes.index(text) + 1))
            out.append(_Column(c, c, cells))
        else:
            values = [row.get(c) for row in rows]
            unit = column_unit(c, values)
            header = column_header(c, unit) if any(_is_number(v) for v in values) else c
            out.append(_Column(c, header, [format_cell(c, v, unit) for v in values],
                               text=any(isinstance(v, str) for v in values)))
    return out, notes


def _secondary(key):
    return key in SECONDARY or key.endswith("_n") or key.endswith("_iqr_s")


def _drop_order(columns):
    """The columns to leave out, first to last: what is read last (right to left), then the
    figures from the right, then the estimates with their intervals and the names, the verdict
    last; never the first column."""
    rest = columns[1:]
    kept = [c for c in rest if c.key in KEPT]
    key = [c for c in reversed(rest) if (c.interval or c.key == "name") and c not in kept]
    secondary = [c for c in reversed(rest) if _secondary(c.key) and c not in kept + key]
    others = [c for c in reversed(rest) if c not in secondary + kept + key]
    return secondary + others + key + kept


def _total(columns):
    return sum(c.width for c in columns) + 2 * (len(columns) - 1)


def _cut(columns, width, floor, wrapped=None):
    """Cut the name columns (but `wrapped`, a prose column that wraps), widest first, down to
    `floor` at the least, until they fit."""
    for c in sorted((c for c in columns if c.text and c is not wrapped), key=lambda c: -c.width):
        over = _total(columns) - width
        if over <= 0:
            return
        target = max(floor, len(c.header), c.width - over)
        if target < c.width:
            c.cells = [cut_middle(v, target) for v in c.cells]


def _fit(columns, width):
    """Make `columns` fit `width`: cut the names to NAME_CAP, leave out what is read last,
    cut the names to NAME_SHORT, leave out the rest from the right, cut the names to
    NAME_FLOOR; a prose column at the end wraps. Returns (the columns shown, those left out)."""
    dropped = []
    last = columns[-1]
    wrap = len(columns) > 1 and last.prose()

    def over():
        return _fixed_total(columns, wrap) > width

    def cut(floor):
        _cut(columns, width + (last.width - min(last.width, PROSE_FLOOR) if wrap else 0), floor,
             last if wrap else None)

    order = [c for c in _drop_order(columns) if not (wrap and c is last)]
    if over():  # a name longer than NAME_CAP is cut to it, whatever room a prose column leaves
        for c in columns:
            if c.text and c is not (last if wrap else None) and c.width > max(NAME_CAP, len(c.header)):
                c.cells = [cut_middle(v, max(NAME_CAP, len(c.header))) for v in c.cells]
    for floor, drop in ((NAME_CAP, [c for c in order if _secondary(c.key)]), (NAME_SHORT, order), (NAME_FLOOR, [])):
        if not over():
            break
        cut(floor)
        for c in list(drop):
            if not over():
                break
            if c in columns:
                columns = [k for k in columns if k is not c]
                dropped.append(c.key)
    return columns, dropped


def _fixed_total(columns, wrap):
    """The width of `columns`, a wrapped prose column at the end counted at its floor."""
    if not wrap:
        return _total(columns)
    return _total(columns[:-1]) + 2 + min(columns[-1].width, PROSE_FLOOR)


def _lines(columns, width):
    """The header, the rule and the rows of `columns`; a prose column at the end wraps."""
    widths = [c.width for c in columns]
    last = columns[-1] if columns else None
    if last is not None and last.prose() and _total(columns) > width and len(columns) > 1:
        room = max(PROSE_FLOOR, width - _total(columns[:-1]) - 2)
        widths[-1] = min(widths[-1], room)
    indent = sum(widths[:-1]) + 2 * (len(widths) - 1)
    out = ["  ".join(c.header.ljust(w) for c, w in zip(columns, widths)).rstrip(),
           "  ".join("-" * w for w in widths)]
    for i in range(len(columns[0].cells) if columns else 0):
        line = "  ".join(c.cells[i].ljust(w) for c, w in zip(columns[:-1], widths[:-1]))
        text = columns[-1].cells[i]
        pieces = textwrap.wrap(text, widths[-1], break_long_words=True, break_on_hyphens=False) \
            if len(text) > widths[-1] else [text]
        first = (line + "  " if len(columns) > 1 else "") + (pieces[0] if pieces else "")
        out.append(first.rstrip())
        out += [(" " * indent + p).rstrip() for p in pieces[1:]]
    return out


def format_table(results, columns=None, title=None, width=None, wide=False, left_out=None):
    """A plain-text table of `results`; `columns` picks and orders the fields, most important
    first. It fits `width` (default: the terminal's, 100 under a pipe), each column's unit in
    its header; `wide`: every column under its recorded name, each cell with its unit, as
    wide as it takes. The line naming the columns left out goes under the
    table, or to `left_out(line)` (a command's stderr, keeping its stdout the table's rows)."""
    rows = [r.row() for r in results]
    cols = _columns(rows, columns)
    out = [title] if title else []
    if wide:
        shown = [_Column(c, c, [format_value(c, row.get(c)) for row in rows]) for c in cols]
        return "\n".join(out + _lines(shown, float("inf")))
    width = width or terminal_width()
    shown, notes = _shown_columns(rows, cols)
    shown, dropped = _fit(shown, width)
    out += _lines(shown, width)
    if notes and any(c.key in NOTE_COLUMNS for c in shown):
        for number, text in enumerate(notes, 1):
            mark = "[%d] " % number
            out += textwrap.wrap(text, max(width, 40), initial_indent=mark, subsequent_indent=" " * len(mark))
    if dropped:
        line = "not shown: %s (--wide shows every column)" % ", ".join(c for c in cols if c in dropped)
        if left_out is None:
            out += textwrap.wrap("(%s)" % line, max(width, 40))
        else:
            left_out(line)
    return "\n".join(out)


def _atomic_write(path, text):
    """Write `text` to `path` as every output is written (`runtime.outputs.write_output`):
    atomically onto a regular file or a new path, through a symlink onto its target,
    straight through to a pipe, a device or /dev/stdout."""
    write_output(path, text.encode("utf-8"))


def save_figure(fig, path, dpi=100):
    """Save a pyplot figure as PNG to `path` (`runtime.outputs.write_output`), and close it
    (pyplot keeps every open figure alive)."""
    import matplotlib.pyplot as plt
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    write_output(path, buf.getvalue())


def _json_default(value):
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


# The version of the record format each JSON line carries (`schema`), as asv and pyperf mark
# theirs: raised when a field changes meaning or goes, so that a later gluonperf can read an
# older file or say why not. Files without it are schema 0 (read as they are).
SCHEMA = 1


class SchemaError(ValueError):
    """A record file of a schema this gluonperf cannot read (written by a newer one)."""


def to_jsonl(results, env=None):
    lines = []
    for r in results:
        row = r.row()
        row["schema"] = SCHEMA
        if env is not None:
            row["env"] = env
        lines.append(json.dumps(row, default=_json_default))
    return "".join(line + "\n" for line in lines)


def write_jsonl(results, path, env=None):
    """One JSON object per line, each with the environment it was measured in."""
    _atomic_write(path, to_jsonl(results, env))


def read_jsonl(path):
    """Read records written by `write_jsonl` back as (Result, env) pairs: any schema up to
    SCHEMA (older files, without one, too); a newer one raises SchemaError."""
    out = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            row = json.loads(line)
            schema = row.pop("schema", 0)
            if not isinstance(schema, int) or schema > SCHEMA:
                raise SchemaError("%s line %d is of record schema %r, which this gluonperf (schema %d) cannot "
                                  "read; upgrade gluonperf to read it" % (path, number, schema, SCHEMA))
            env = row.pop("env", None)
            bench, name = row.pop("bench"), row.pop("name")
            out.append((Result(bench, name, row), env))
    return out


def write_csv(results, path):
    rows = [r.row() for r in results]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_columns(rows, None))
    writer.writeheader()
    writer.writerows(rows)
    _atomic_write(path, buf.getvalue())

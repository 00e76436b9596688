"""The terminal table of a list of records (`format_table`).

A table fits the terminal it is read in (COLUMNS / shutil.get_terminal_size, 100 columns
under a pipe): an estimate and its interval share one cell ("3.43x (2.51-4.69)"), a `note`
column becomes numbered notes under the table, over-long names are cut in the middle, a
prose column at the right end wraps, and the columns a person reads last go first (the
order a command gives is the order of importance: the first column and its verdict stay).
A column says its unit once, in its header (`images/s`, `median (us)`, `rss_peak (MiB)`),
its cells plain numbers (records.cells: column_unit, format_cell); a ratio's keep their 'x',
a share's '%'. `wide=True` (--wide) prints every column under its recorded name, each cell
with its unit (format_value); --json and --csv keep everything, raw.
"""
import shutil
import textwrap

from .cells import (ESTIMATE_FIGURES, column_header, column_unit, format_cell, format_value, header_name,
                    interval_pairs, is_number, level_text)
from .results import row_columns

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


def _level(key, rows):
    """The interval's level as a header says it: '95% CI', '99% CI', 'CI' (levels differ)."""
    levels = {row.get(key + "_level") for row in rows} - {None}
    if not levels:
        return "95% CI"
    if len(levels) == 1:
        return "%s CI" % level_text(levels.pop())
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
            # a column of text cells (a percentile withheld: 'n<662') reads without its unit's suffix; an
            # empty one keeps its key
            header = (column_header(c, unit) if any(is_number(v) for v in values)
                      else header_name(c) if any(isinstance(v, str) for v in values) else c)
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
    cols = row_columns(rows, columns)
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

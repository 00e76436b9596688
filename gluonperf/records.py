"""One result record type, and the writers: a table for people, JSON lines and CSV for machines.

Units: fields ending in `_s` are seconds, `_bytes` bytes, `_per_s` a rate; the
table shows them in readable units, the files keep the raw numbers.
"""
import csv
import io
import json
import math
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


def _format_seconds(value):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if abs(value) >= scale or unit == "ns":
            return "%.4g %s" % (value / scale, unit)


def format_value(key, value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    if isinstance(value, (int, float)):
        if key == "share" or key.endswith("_share"):  # a fraction, shown as a percentage
            return "%.1f%%" % (100 * value)
        if key.endswith("_per_s"):
            return "%.4g/s" % value
        if key.endswith("_s"):
            return _format_seconds(value)
        if "bytes" in key:
            return "%.1f MiB" % (value / 2 ** 20)
        if isinstance(value, float):
            return "%.4g" % value
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


def format_table(results, columns=None, title=None):
    """A plain-text table of `results`; `columns` picks and orders the fields."""
    rows = [r.row() for r in results]
    cols = _columns(rows, columns)
    cells = [[format_value(c, row.get(c)) for c in cols] for row in rows]
    widths = [max([len(c)] + [len(line[i]) for line in cells]) for i, c in enumerate(cols)]
    out = []
    if title:
        out.append(title)
    out.append("  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    for line in cells:
        out.append("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip())
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

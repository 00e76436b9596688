"""Records in files: JSON lines (`write_jsonl`, `read_jsonl`, each line with its record
schema and the environment it was measured in), CSV (`write_csv`) and a figure as PNG
(`save_figure`), each written as every output is (`runtime.outputs.write_output`).
"""
import csv
import io
import json

from ..runtime.outputs import write_output
from .results import Result, row_columns


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
    writer = csv.DictWriter(buf, fieldnames=row_columns(rows, None))
    writer.writeheader()
    writer.writerows(rows)
    _atomic_write(path, buf.getvalue())

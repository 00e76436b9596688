"""The one record type: a Result (`result` builds one), and the columns of a list of them."""
from dataclasses import dataclass, field
from typing import Any, Dict


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


def row_columns(rows, columns):
    """`columns` when given, else every key of `rows` (dicts) in the order they first appear."""
    if columns:
        return list(columns)
    seen = []
    for row in rows:
        for key in row:
            if key not in seen:
                seen.append(key)
    return seen

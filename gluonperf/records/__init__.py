"""One result record type, and the writers: a table for people, JSON lines and CSV for machines.

- `results`: the record (`Result`, `result`);
- `cells`: one value or one column as a person reads it, its unit and figures;
- `tables`: the terminal table (`format_table`), fitted to the terminal;
- `files`: JSON lines, CSV and PNG figures, written as every output is.

A field's name gives its unit (`_s` seconds, `_bytes` bytes, `_per_s` a rate, `share` a
fraction); the files keep raw numbers, the table a unit per column: docs/records.md.

The names are imported from here (`from gluonperf.records import result, format_table`). The
package imports only runtime (its output writer): it sits below everything but runtime.
"""
from .results import Result, result, row_columns  # noqa: F401
from .cells import (ESTIMATE_FIGURES, READABLE_SPAN, SECONDS, Unit, column_header, column_unit,  # noqa: F401
                    duration_text, figures, fixed, format_bounds, format_cell, format_estimate, format_value,
                    header_name, interval_pairs, is_number, is_ratio, is_share, level_text, too_wide)
from .tables import (DEFAULT_WIDTH, KEPT, NAME_CAP, NAME_FLOOR, NAME_SHORT, NOTE_COLUMNS, PROSE_COLUMNS,  # noqa: F401
                     PROSE_FLOOR, SECONDARY, cut_middle, format_table, terminal_width)
from .files import SCHEMA, SchemaError, read_jsonl, save_figure, to_jsonl, write_csv, write_jsonl  # noqa: F401

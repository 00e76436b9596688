"""The terminal tables fit the terminal (records.format_table): every command's table, from
records with wide values and long names, at 80 and 100 columns; --wide keeps every column.
Fast: no MXNet training (the commands' modules are imported for their columns only)."""
import importlib
import re

import pytest

from gluonperf.cli import common as cli
from gluonperf.records import (column_header, column_unit, cut_middle, figures, format_bounds, format_cell, format_estimate,
                               format_table, format_value, header_name, interval_pairs, result)
from gluonperf.render import kinds

# Every module whose tables the commands print, with the columns each gives format_table.
MODULES = ["gluonperf.bench.%s" % m for m in ("allreduce", "asynchronous", "engines", "footprint", "hybridize",
                                              "input", "memory", "optimizers", "overlap", "parallel", "scratch",
                                              "time_to_accuracy")] + \
          ["gluonperf.train", "gluonperf.predict", "gluonperf.profile", "gluonperf.scaling.judging",
           "gluonperf.script.tables"]
# The tables whose columns are written out where they are printed (compare.py, tune.py).
INLINE = {
    "compare": ["name", "model", "task", "batch_size", "ctx", "metric", "better", "old", "new", "change", "ratio",
                "95% CI", "n", "status"],
    "compare (fitted)": ["name", "metric", "old", "new", "change", "ratio (95% CI)", "status", "model", "task",
                         "batch_size", "ctx", "better", "n"],
    "tune": ["batch_size", "lever", "rank", "name", "images_per_s", "ratio", "ratio_ci_low", "ratio_ci_high",
             "rounds", "verdict", "error"],
    "profile operators (--split-bulk off)": ["op", "phase", "calls_per_step", "time_s", "share"],
}
OP = ("_FusedOp(BatchNorm, Activation, Convolution, BatchNorm, Activation, Convolution, elemwise_add, "
      "BatchNorm, Activation, Convolution)")  # 128 characters, as a bulk segment of a hybridized model
assert len(OP) >= 120


def tables():
    out = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for attr, columns in vars(module).items():
            if attr.endswith("COLUMNS") and isinstance(columns, list):
                out["%s.%s" % (name, attr)] = columns
    out.update(INLINE)
    return out


TABLES = tables()


def value(column, row):
    """A wide but realistic value of `column` in row number `row`."""
    k = row + 1
    if column in ("name", "tree", "part", "kernel", "setup", "loader", "operator", "op", "scheme", "contexts"):
        return {0: "baseline", 1: "resnet50_v1b(pretrained=False,classes=1000) on /data/imagenet/train.rec, static",
                2: OP, 3: "  stage3.0.body.conv2 (Conv2D)"}[row % 4]
    if column in ("verdict", "status"):
        return ["baseline", "faster", "inconclusive", "slower"][row % 4]
    if column in ("note", "finding", "error"):
        return None if row == 0 else ("timed as the step: forward, loss, backward; no optimizer update, "
                                      "the Block's inputs copied once before the rounds (%d)" % (row % 2))
    if column in ("noisy", "fits", "reached", "comm_bound", "efficient", "within_25pct", "ceiling", "model_fits",
                  "partial", "runnable"):
        return row % 2 == 1
    if column.endswith("_ci_low"):
        return None if row == 0 else 0.8 * value(column[:-len("_ci_low")], row)
    if column.endswith("_ci_high"):
        return None if row == 0 else 1.3 * value(column[:-len("_ci_high")], row)
    if column.endswith("_low_s"):
        return 0.9 * value(column[:-len("_low_s")] + "_s", row)
    if column.endswith("_high_s"):
        return 1.2 * value(column[:-len("_high_s")] + "_s", row)
    if column.endswith("_n") or column in ("n", "rounds", "calls", "hybrid_forward_calls", "repeats"):
        return 12 * k
    if column.endswith("_per_s"):
        return 1234.5678 * k ** 3
    if column.endswith("_s"):
        return 0.012345678 * k
    if "bytes" in column:
        return 123456789 * k
    if column == "share" or column.endswith("_share"):
        return 0.123456 * k
    if column in ("95% CI",):
        return "1.04-1.21"
    if column in ("change",):
        return "+12.3%"
    return 3.4567891 * k


def records(columns, rows=4):
    return [result("bench", str(value("name", i)), **{c: value(c, i) for c in columns if c != "name"})
            for i in range(rows)]


def rule(text):
    """The dashed rule under the table's header."""
    return next(line for line in text.splitlines() if re.fullmatch(r"-+(  -+)*", line))


@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_commands_table_fits_the_terminal(table, width):
    columns = TABLES[table]
    text = format_table(records(columns), columns, title="a title", width=width)
    assert len(rule(text)) <= width, text
    assert all(len(line) <= width for line in text.splitlines()[1:]), text  # the title is prose: it wraps
    lines = text.splitlines()
    assert lines[1].split()[0] == columns[0], text  # the first column stays
    assert len(lines) >= 2 + 4, text  # every row


@pytest.mark.parametrize("table", sorted(TABLES))
def test_wide_keeps_every_column(table):
    columns = TABLES[table]
    text = format_table(records(columns), columns, title="a title", width=80, wide=True)
    header = text.splitlines()[1]
    assert re.split(r"\s{2,}", header.strip()) == columns
    assert OP in text or not any(c in columns for c in ("name", "op", "operator", "tree", "part", "kernel"))


def test_terminal_width_comes_from_COLUMNS_and_is_100_under_a_pipe(monkeypatch):
    columns = TABLES["gluonperf.bench.hybridize.COLUMNS"]
    monkeypatch.setenv("COLUMNS", "120")
    assert 100 < len(rule(format_table(records(columns), columns))) <= 120
    monkeypatch.delenv("COLUMNS")
    assert len(rule(format_table(records(columns), columns))) <= 100  # pytest's stdout is not a terminal


def test_an_interval_is_one_cell_with_its_estimate():
    assert format_estimate("speedup", 3.4321, 2.51, 4.69) == "3.43x (2.51-4.69)"
    assert format_estimate("images_per_s", 439.2, 425.1, 454.3) == "439/s (425-454)"
    assert format_estimate("step_s", 0.004521, 0.0044, 0.00471) == "4.52 ms (4.4-4.71)"
    assert format_estimate("share", 0.7, 0.65, 0.75) == "70.0% (65.0-75.0)"
    assert format_estimate("speedup", 1.0) == "1.00x" and format_estimate("speedup", None) == "-"
    assert format_bounds("ratio", 1.04, float("inf")) == "1.04-inf"
    # in a table's column the unit is in the header, the cell the number and its interval
    assert format_cell("images_per_s", 439.2, column_unit("images_per_s"), 425.1, 454.3, n=3) == "439 (425-454)"
    assert format_cell("step_s", 0.004521, column_unit("step_s", [0.004521], n=3), 0.0044, 0.00471, n=3) \
        == "4.52 (4.4-4.71)"
    columns = ["name", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_n", "verdict"]
    rows = [result("b", "static", speedup=3.4321, speedup_ci_low=2.51, speedup_ci_high=4.69, speedup_n=12,
                   verdict="faster")]
    text = format_table(rows, columns, width=100)
    assert text.splitlines()[0].split("  ")[:2] == ["name  ", "speedup (95% CI)"] or "speedup (95% CI)" in text
    assert "3.43x (2.51-4.69)" in text and "speedup_ci_low" not in text and "not shown" not in text
    assert interval_pairs(["measured_step_s", "measured_step_low_s", "measured_step_high_s"]) == {
        "measured_step_s": ("measured_step_low_s", "measured_step_high_s")}


def test_the_report_writes_an_intervals_ends_as_the_terminal():
    """One function for the bounds' text: the HTML report's interval column and the table's cell."""
    m = {"speedup": 3.4321, "speedup_ci_low": 2.51, "speedup_ci_high": 4.69, "speedup_n": 12}
    cell = kinds.interval_column("speedup")[1](result("b", "x", **m))
    assert cell == "2.51-4.69 (95%, n=12)" and format_estimate("speedup", 3.4321, 2.51, 4.69).endswith("(2.51-4.69)")
    assert kinds.with_interval(m, "speedup").startswith("3.43x (95% CI 2.51-4.69, 12 rounds)")


def test_a_long_operator_name_is_cut_in_the_middle():
    cut = cut_middle(OP, 40)
    assert len(cut) <= 40 and cut.startswith("_FusedOp(BatchNorm") and cut.endswith("Convolution)") and "..." in cut
    columns = ["op", "phase", "calls_per_step", "time_s", "share", "gflop_per_s", "of_ceiling"]
    rows = [result("profile", "x", op=OP, phase="forward", calls_per_step=1, time_s=0.0123, share=0.4,
                    gflop_per_s=98.6, of_ceiling=0.29),
            result("profile", "y", op="Convolution", phase="forward", calls_per_step=2, time_s=0.002, share=0.1,
                   gflop_per_s=105.0, of_ceiling=0.31)]
    text = format_table(rows, columns, width=100)
    assert len(rule(text)) <= 100 and "not shown" not in text  # the name gave way, not the figures
    cell = text.splitlines()[2].split("  ")[0]
    assert len(cell) <= 40 and cell.startswith("_FusedOp(Batch") and "..." in cell and cell.endswith("olution)")
    assert OP in format_table(rows, columns, width=80, wide=True)


def test_a_note_column_becomes_numbered_notes_under_the_table():
    long_note = "timed as the step: forward, loss, backward; no optimizer update " * 2
    rows = [result("profile", "(model)", parameters=129068, note=long_note.strip()),
            result("profile", "0 (Conv2D)", parameters=200, note=None),
            result("profile", "1 (Dense)", parameters=100, note="no FLOPs counted"),
            result("profile", "2 (Dense)", parameters=100, note="no FLOPs counted")]
    text = format_table(rows, ["name", "parameters", "note"], width=80)
    lines = text.splitlines()
    assert [l.split()[-1] for l in lines[2:6]] == ["[1]", "-", "[2]", "[2]"]
    assert lines[6].startswith("[1] timed as the step") and any(l == "[2] no FLOPs counted" for l in lines)
    assert all(len(l) <= 80 for l in lines)
    assert long_note.strip() in format_table(rows, ["name", "parameters", "note"], wide=True)


def test_a_prose_column_at_the_end_wraps_under_itself():
    finding = ("training (as gluonperf.train runs it): 5327 images/s x 0.01361 GFLOP per image = 72.47 GFLOP/s, "
               "21.3% of the ceiling (341 GFLOP/s: at most 2.506e+04 images/s)")
    rows = [result("profile", "achieved", finding=finding), result("profile", "loss 1", finding="Convolution")]
    text = format_table(rows, ["name", "finding"], width=80)
    lines = text.splitlines()
    assert len(lines[1]) <= 80 and lines[2].startswith("achieved  training") and lines[3].startswith(" " * 10)
    assert " ".join(" ".join(lines[2:-1]).split()[1:]) == finding and lines[-1].split() == ["loss", "1", "Convolution"]


def test_dropped_columns_are_named_with_the_flag_that_shows_them():
    columns = TABLES["gluonperf.bench.hybridize.COLUMNS"]
    text = format_table(records(columns), columns, width=80)
    under = " ".join(text.split("(not shown: ")[1].split())
    assert under.startswith("iqr_s, noisy,") and under.endswith("(--wide shows every column))")
    said = []  # a command's stderr (cli.print_table): one line, the table's text without it
    assert format_table(records(columns), columns, width=80, left_out=said.append) == text.split("\n(not shown")[0]
    assert said == ["not shown: " + under[:-1]]
    assert "--wide" not in format_table(records(columns), columns, width=80, wide=True)
    shown = re.split(r"\s{2,}", text.splitlines()[0].strip())
    assert shown[0] == "name" and "verdict" in shown and "speedup (95% CI)" in shown


def test_every_command_has_the_wide_flag():
    assert cli.common_parser().parse_args(["--wide"]).wide
    from gluonperf import compare
    assert compare.build_parser().parse_args(["a", "b", "--wide"]).wide


def header_cells(text):
    """{header: [cells]} of a table (columns two spaces apart or more)."""
    lines = text.splitlines()
    at = lines.index(rule(text))
    heads = re.split(r"\s{2,}", lines[at - 1].strip())
    rows = [re.split(r"\s{2,}", l.strip()) for l in lines[at + 1:] if l.strip() and not l.startswith(("(", "[1]"))]
    assert all(len(r) == len(heads) for r in rows), text
    return {h: [r[i] for r in rows] for i, h in enumerate(heads)}


def test_numbers_read_in_four_figures_with_thousands_separated_from_ten_thousand():
    assert [figures(v) for v in (22410.3, 6432.4, 439.2, 439.0, 1.5137, 0.012345, 0)] == \
        ["22,410", "6432", "439.2", "439", "1.514", "0.01235", "0"]
    assert figures(9999.7) == "10,000" and figures(999.96) == "1000" and figures(1234567.8) == "1,234,568"
    assert figures(439.2, 3) == "439" and figures(999.6, 3) == "1000"  # no '1e+03' when rounding up
    assert format_value("rss_peak_bytes", 2 ** 30) == "1024.0 MiB" and format_value("x_bytes", 2 ** 34) == "16,384 MiB"


def test_units_are_in_the_header_once_and_the_cells_plain_numbers():
    columns = ["name", "median_s", "iqr_s", "speedup", "speedup_ci_low", "speedup_ci_high", "images_per_s",
               "rss_peak_bytes", "share", "verdict"]
    rows = [result("b", "imperative", median_s=660.3e-6, iqr_s=12e-6, speedup=1.0, images_per_s=22410.3,
                   rss_peak_bytes=12.3 * 2 ** 20, share=0.125, verdict="baseline"),
            result("b", "static", median_s=188.8e-6, iqr_s=3.1e-6, speedup=3.4321, speedup_ci_low=2.51,
                   speedup_ci_high=4.69, images_per_s=439.2, rss_peak_bytes=14.1 * 2 ** 20, share=0.5,
                   verdict="faster"),
            result("b", "tiny", median_s=95e-6, iqr_s=1e-6, speedup=0.8, images_per_s=1.5137,
                   rss_peak_bytes=2 ** 20, share=0.375, verdict="slower")]
    text = format_table(rows, columns, width=100)
    assert "not shown" not in text
    table = header_cells(text)
    assert list(table) == ["name", "median (us)", "iqr (us)", "speedup (95% CI)", "images/s", "rss_peak (MiB)",
                           "share", "verdict"], text
    assert table["median (us)"] == ["660.3", "188.8", "95"] and table["iqr (us)"] == ["12", "3.1", "1"]
    assert table["speedup (95% CI)"] == ["1.00x", "3.43x (2.51-4.69)", "0.80x"]  # a ratio keeps its x
    assert table["images/s"] == ["22,410", "439.2", "1.514"]
    assert table["rss_peak (MiB)"] == ["12.3", "14.1", "1.0"]
    assert table["share"] == ["12.5%", "50.0%", "37.5%"]  # a percentage keeps its sign: the header is no wider
    assert not re.search(r"[0-9](/s| us| ms| MiB)", text.split(rule(text))[1]), text  # no other unit in a cell
    # --wide: the recorded names, each cell with its unit
    wide = header_cells(format_table(rows, columns, wide=True))
    assert list(wide) == columns
    assert wide["median_s"] == ["660.3 us", "188.8 us", "95 us"] and wide["images_per_s"][0] == "22,410/s"
    assert wide["rss_peak_bytes"][0] == "12.3 MiB" and wide["share"][0] == "12.5%"


def test_a_time_column_has_one_unit_chosen_from_its_values():
    def column(*seconds, interval=False):
        columns = ["name", "step_s"] + (["step_low_s", "step_high_s"] if interval else [])
        rows = [result("b", str(i), step_s=s, **({"step_low_s": 0.9 * s, "step_high_s": 1.2 * s} if interval else {}))
                for i, s in enumerate(seconds)]
        (header, cells), = [(h, c) for h, c in header_cells(format_table(rows, columns, width=100)).items()
                            if h != "name"]
        return header, cells
    assert column(660.3e-6, 188.8e-6) == ("step (us)", ["660.3", "188.8"])
    assert column(0.0045, 0.012, 0.9) == ("step (ms)", ["4.5", "12", "900"])
    assert column(1.5, 42.0) == ("step (s)", ["1.5", "42"])
    assert column(3e-9, 8e-9) == ("step (ns)", ["3", "8"])
    # mixed magnitudes: still one unit, the one that writes every cell shortest
    header, cells = column(660e-6, 0.5, 0.012)
    assert header == "step (ms)" and cells == ["0.66", "500", "12"]
    assert all(len(c) <= 6 for c in column(1.2e-6, 3e-3, 80e-3, 660e-6)[1])
    header, cells = column(0.004521, 0.0123, interval=True)
    assert header == "step (ms, 95% CI)" and cells == ["4.52 (4.07-5.43)", "12.3 (11.1-14.8)"]
    assert column(None, 0.002) == ("step (ms)", ["-", "2"])


def test_headers_name_the_unit_and_keep_columns_apart():
    assert [header_name(k) for k in ("images_per_s", "median_s", "rss_peak_bytes", "share", "speedup", "epoch",
                                     "bytes_per_sample")] == \
        ["images/s", "median", "rss_peak", "share", "speedup", "epoch", "bytes_per_sample"]
    for table, columns in TABLES.items():  # no two columns of a table read alike (epoch, epoch (ms))
        names = [column_header(c, column_unit(c, [0.001])) for c in columns]
        assert len(set(names)) == len(names), (table, names)
    assert column_header("epoch_s", column_unit("epoch_s", [0.5])) == "epoch (ms)"
    rows = [result("b", "x", images_per_s=1234.5, images_per_s_ci_low=1200.0, images_per_s_ci_high=1300.0,
                   images_per_s_level=0.99, error="boom")]
    table = header_cells(format_table(rows, ["name", "images_per_s", "images_per_s_ci_low", "images_per_s_ci_high",
                                             "error"], width=100))
    assert table == {"name": ["x"], "images/s (99% CI)": ["1234 (1200-1300)"], "error": ["[1]"]}
    # a column without a number keeps its name; the report's and compare's cells keep their units
    assert list(header_cells(format_table([result("b", "x", step_s=None)], ["name", "step_s"], width=100))) == \
        ["name", "step_s"]
    assert format_value("median_s", 660.3e-6) == "660.3 us" and format_value("images_per_s", 22410.3) == "22,410/s"

"""gluonperf.bench: each subcommand is one module, and everything about it is read off that module.

--help's subcommands are the package's modules; the tables of per-subcommand facts (the
contexts it runs at once, the stand-ins, `python -m gluonperf`'s list, the report's kinds)
are derived from them; each module's COLUMNS are what the terminal prints (test_commands) and
what the report's table shows (test_report); and a subcommand runs from Python (run_with) without a process and
without printing.
"""
import argparse
import os
import re

import pytest

from gluonperf import bench, report
from gluonperf.render import kinds

API = ("NAME", "QUICK", "RECORDS", "COLUMNS", "add_parser", "measure", "show")
DRAWN = [m for m in bench.SUBCOMMANDS if hasattr(m, "section")]


def subparsers(parser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_every_subcommand_in_help_is_a_module_named_after_it():
    choices = subparsers(bench.build_parser()).choices
    assert list(choices) == [m.NAME for m in bench.SUBCOMMANDS] == bench.ORDER
    for m in bench.SUBCOMMANDS:
        module = m.__name__.rsplit(".", 1)[1]
        assert module == {"async": "asynchronous"}.get(m.NAME, m.NAME.replace("-", "_"))
        assert re.search(r"^%s +%s$" % (re.escape(m.NAME), re.escape(m.__name__)), bench.__doc__, re.M), m.NAME
        assert all(hasattr(m, name) for name in API), [name for name in API if not hasattr(m, name)]
    # nothing else in the package names a subcommand
    files = {f[:-3] for f in os.listdir(os.path.dirname(bench.__file__)) if f.endswith(".py")}
    assert files == {m.__name__.rsplit(".", 1)[1] for m in bench.SUBCOMMANDS} | {"__init__", "__main__", "shared"}


def test_the_tables_of_facts_are_read_off_the_modules(capsys):
    assert bench.AT_LEAST_CONTEXTS == {"parallel": 2, "overlap": 2, "allreduce": 2}
    assert bench.STAND_IN_COMMANDS == ("parallel", "overlap", "allreduce")
    assert bench.contexts_at_once(["allreduce", "--num-ctx", "2,3"]) == 3
    assert bench.contexts_at_once(["parallel", "--ctx", "cpu"]) == 2 == bench.contexts_at_once(["overlap"])
    assert bench.contexts_at_once(["hybridize"]) == 1 == bench.contexts_at_once([])
    from gluonperf.__main__ import main
    main([])
    line = next(l for l in capsys.readouterr().out.splitlines() if l.strip().startswith("bench "))
    assert line.split("experiments: ")[1] == ", ".join(m.NAME for m in bench.SUBCOMMANDS)
    drawn = {kind.benches: kind for kind in report.kinds()}
    for m in DRAWN:
        assert drawn[m.RECORDS].render is m.section and drawn[m.RECORDS].title == m.TITLE
    # the render layer knows no bench subcommand's kind: they are the modules'
    assert not {b for kind in kinds.KINDS for b in kind.benches} & {b for m in bench.SUBCOMMANDS for b in m.RECORDS}


def cell_names(columns):
    return [c if isinstance(c, str) else c[0] for c in columns]


def test_the_report_shows_an_interval_in_one_cell():
    columns = kinds.report_columns(["name", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_n", "verdict"],
                                   besides={"name": ["size"]})
    assert cell_names(columns) == ["name", "size", "speedup", "speedup CI", "verdict"]


def test_run_with_returns_the_records_and_prints_nothing(capsys):
    records = bench.run_with("allreduce", sizes="4K", num_ctx=[2], repeat=1, methods="book")
    assert [r.name for r in records] == ["book", "copyto"] and records[0].metrics["tensor_bytes"] == 4096
    assert bench.run_with("allreduce", sizes=[4096], num_ctx="2", repeat=1, methods="ring")[0].name == "ring"
    assert capsys.readouterr().out == ""
    with pytest.raises(TypeError, match="unexpected keyword argument 'batch'"):
        bench.run_with("hybridize", batch=8)
    with pytest.raises(TypeError, match="needs dataset="):
        bench.run_with("input")
    with pytest.raises(ValueError, match="no bench subcommand 'hybridise'"):
        bench.run_with("hybridise")

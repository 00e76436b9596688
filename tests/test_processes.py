"""--processes N: one saved run made of N fresh processes, which compare judges by its own
process-to-process spread instead of a noise floor (gluonperf.cli.processes)."""
import json
import os

from helpers import ROOT, run_leaving_nothing
from gluonperf.cli.processes import _child_argv, spread_lines
from gluonperf.measure.comparison import compare
from gluonperf.records import Result, read_jsonl


def test_a_child_runs_the_same_command_with_its_own_json():
    argv = ["hybridize", "--processes", "3", "--json", "out.json", "--csv=o.csv", "--repeat", "2", "--processes=3"]
    assert _child_argv(argv, "/tmp/p2.json") == ["hybridize", "--repeat", "2", "--json", "/tmp/p2.json"]


def test_processes_keep_every_process_and_compare_uses_their_spread(tmp_path):
    """bench hybridize --processes 2: the file holds both processes' records (process 1 and
    2, one per mode each), the terminal says the spread; compare of two such files judges
    the runs' values ('2 and 2 runs'), with no noise floor."""
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    argv = ["-m", "gluonperf.bench", "hybridize", "--repeat", "2", "--number", "20", "--processes", "2"]
    p = run_leaving_nothing(argv + ["--json", str(old)])
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    rows = [r for r, _ in read_jsonl(str(old))]
    assert sorted((r.name, r.metrics["process"]) for r in rows) == sorted(
        (mode, i) for mode in ("imperative", "hybrid", "static") for i in (1, 2))
    assert "process to process (--processes):" in p.stdout and "over 2 processes" in p.stdout
    new.write_text(old.read_text())
    compared = {r.name: r.metrics for r in compare(read_jsonl(str(old)), read_jsonl(str(new)))}
    assert all(m["evidence"].startswith("2 and 2 runs") and "noise_floor" not in m for m in compared.values())


def test_a_failing_process_is_one_line_and_nothing_is_written(tmp_path):
    """A later process that fails stops the command with that process's error line, exit 2,
    and no --json is written. The failure is made explicit: a sitecustomize on PYTHONPATH
    that ends every process started as a child of --processes (GLUONPERF_PROCESS set)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if os.environ.get('GLUONPERF_PROCESS'):\n"
        "    sys.stderr.write('python -m gluonperf.bench: error: this process was made to fail\\n')\n"
        "    sys.stderr.flush()\n"
        "    os._exit(2)\n")
    out = tmp_path / "out.json"
    p = run_leaving_nothing(["-m", "gluonperf.bench", "hybridize", "--repeat", "2", "--number", "5", "--processes", "2",
                             "--json", str(out)], PYTHONPATH=os.pathsep.join([str(site), ROOT]))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert "--processes: process 2 of 2 failed (exit 2): python -m gluonperf.bench: error: this process was made " \
           "to fail" in last, last
    assert not out.exists()


def test_spread_lines_name_each_benchmark():
    rows = [Result("b", "x", {"median_s": v, "process": i}) for i, v in enumerate((1.0, 1.1, 0.9), 1)]
    line, = spread_lines(rows)
    assert line.startswith("x: median_s over 3 processes 1 s") and "SD 10.0%" in line
    assert spread_lines([Result("b", "x", {"median_s": 1.0})]) == []
    json.dumps([r.metrics for r in rows])

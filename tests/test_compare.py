import json

import pytest

from gluonperf.compare import compare, parse_threshold, pick_metric, regressions
from gluonperf.records import Result, write_jsonl

ENV = {"mxnet": "1.9.1", "cpu_count": 2, "env": {}}


def rec(name, per_s=None, median=None, **ident):
    metrics = dict(ident)
    if per_s is not None:
        metrics["images_per_s"] = per_s
    if median is not None:
        metrics["median_s"] = median
    return Result("train_throughput", name, metrics)


def test_throughput_drop_is_a_regression_and_time_drop_an_improvement():
    old = [rec("book", per_s=100.0, model="resnet18", batch_size=64),
           Result("hybridize", "static", {"median_s": 0.010, "model": "mlp"})]
    new = [rec("book", per_s=80.0, model="resnet18", batch_size=64),
           Result("hybridize", "static", {"median_s": 0.008, "model": "mlp"})]
    out = {r.name: r.metrics for r in compare(old, new, threshold=0.10)}
    book = out["train_throughput/book"]
    assert book["metric"] == "images_per_s"
    assert book["change"] == pytest.approx(-0.20)
    assert book["worse"] == pytest.approx(0.20)
    assert book["status"] == "regression"
    static = out["hybridize/static"]
    assert static["metric"] == "median_s"
    assert static["worse"] == pytest.approx(-0.20)
    assert static["status"] == "improved"


def test_change_within_threshold_is_same_and_identifying_fields_match():
    old = [rec("step", per_s=100.0, batch_size=64), rec("step", per_s=50.0, batch_size=128)]
    new = [rec("step", per_s=95.0, batch_size=64), rec("step", per_s=60.0, batch_size=128)]
    out = compare(old, new, threshold=0.10)
    by_batch = {r.metrics["batch_size"]: r.metrics for r in out}
    assert by_batch[64]["status"] == "same"
    assert by_batch[64]["old"] == 100.0
    assert by_batch[128]["old"] == 50.0  # matched on batch_size, not just on the name
    assert by_batch[128]["status"] == "improved"
    assert not regressions(out)


def test_new_and_removed_records_are_listed():
    out = {r.name: r.metrics["status"] for r in compare([rec("a", per_s=1.0)], [rec("b", per_s=1.0)])}
    assert out == {"train_throughput/b": "new", "train_throughput/a": "removed"}


def test_pick_metric_prefers_throughput_then_time():
    a = Result("x", "y", {"median_s": 1.0, "images_per_s": 2.0, "noisy": False})
    assert pick_metric(a, a) == "images_per_s"
    assert pick_metric(a, a, "median_s") == "median_s"
    assert pick_metric(a, Result("x", "y", {"other": 1})) is None


def test_parse_threshold():
    assert parse_threshold("10%") == pytest.approx(0.10)
    assert parse_threshold("2.5") == pytest.approx(0.025)


def write(path, results, env=ENV):
    write_jsonl(results, str(path), env)
    return str(path)


def test_cli_exits_1_on_regression_past_threshold(tmp_path, run):
    old = write(tmp_path / "old.json", [rec("book", per_s=100.0, batch_size=64)])
    new = write(tmp_path / "new.json", [rec("book", per_s=80.0, batch_size=64)],
                dict(ENV, env={"OMP_NUM_THREADS": "2"}))
    p = run("gluonperf.compare", old, new, "--fail-above", "10%")
    assert p.returncode == 1, p.stderr
    assert "regression" in p.stdout and "-20.0%" in p.stdout
    assert "OMP_NUM_THREADS: unset -> 2" in p.stderr
    p = run("gluonperf.compare", old, new, "--fail-above", "25%")
    assert p.returncode == 0, p.stderr
    p = run("gluonperf.compare", old, new)  # no threshold: informational
    assert p.returncode == 0 and "worse" in p.stdout
    # a negative threshold is refused with what is wrong, not argparse's "expected one argument"
    p = run("gluonperf.compare", old, new, "--fail-above", "-5%")
    assert p.returncode == 2 and "'-5%' must be between 0% and 1000%" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_cli_says_when_a_file_comes_from_a_stopped_run(tmp_path, run):
    old = write(tmp_path / "old.json", [rec("book", per_s=100.0)])
    new = write(tmp_path / "new.json", [rec("book", per_s=100.0, partial=True)])
    p = run("gluonperf.compare", old, new)
    assert p.returncode == 0, p.stderr
    assert "new.json comes from a run that was stopped: 1 record(s)" in p.stderr and "old.json" not in p.stderr


@pytest.mark.parametrize("content, message", [
    (None, "does not exist"),
    ("not json\n", "is not JSON lines (line 1"),
    ('{"x": 1}\n', "without 'bench' and 'name'"),
    ("", "holds no results"),
])
def test_cli_one_line_errors_for_bad_files(tmp_path, run, content, message):
    good = write(tmp_path / "good.json", [rec("book", per_s=1.0)])
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    p = run("gluonperf.compare", good, str(bad))
    assert p.returncode == 2
    assert message in p.stderr and "NEW file" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_cli_incompatible_files(tmp_path, run):
    a = write(tmp_path / "a.json", [rec("book", per_s=1.0)])
    b = write(tmp_path / "b.json", [Result("other", "thing", {"images_per_s": 1.0})])
    p = run("gluonperf.compare", a, b)
    assert p.returncode == 2
    assert "no benchmark" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_cli_json_output(tmp_path, run):
    old = write(tmp_path / "old.json", [rec("book", per_s=100.0)])
    new = write(tmp_path / "new.json", [rec("book", per_s=150.0)])
    out = tmp_path / "cmp.json"
    p = run("gluonperf.compare", old, new, "--json", str(out))
    assert p.returncode == 0, p.stderr
    row = json.loads(out.read_text().splitlines()[0])
    assert row["status"] == "improved" and row["change"] == pytest.approx(0.5)


@pytest.mark.parametrize("where", ["a-file/out.json", "a-dir"])
def test_cli_refuses_an_unwritable_json_as_one_line(tmp_path, run, where):
    """The same check as every other command's --json (cli.check_output_path), before reading."""
    old = write(tmp_path / "old.json", [rec("book", per_s=100.0)])
    (tmp_path / "a-file").write_text("")
    (tmp_path / "a-dir").mkdir()
    p = run("gluonperf.compare", old, old, "--json", str(tmp_path / where))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "--json" in p.stderr, p.stderr
    assert (tmp_path / "a-file").read_text() == "" and list((tmp_path / "a-dir").iterdir()) == []


def test_cli_json_into_a_new_directory(tmp_path, run):
    old = write(tmp_path / "old.json", [rec("book", per_s=100.0)])
    out = tmp_path / "new" / "dir" / "cmp.json"
    p = run("gluonperf.compare", old, old, "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text().splitlines()[0])["status"]

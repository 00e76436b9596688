import json

import pytest

from gluonperf.cli.common import parse_threshold
from gluonperf.measure.comparison import compare, pick_metric, regressions
from gluonperf.records import Result, write_jsonl

ENV = {"mxnet": "1.9.1", "cpu_count": 2, "env": {}}


def rec(name, per_s=None, median=None, **ident):
    metrics = dict(ident)
    if per_s is not None:
        metrics["images_per_s"] = per_s
    if median is not None:
        metrics["median_s"] = median
    return Result("train_throughput", name, metrics)


def runs(name, values, key="images_per_s", bench="train_throughput", **ident):
    """Several runs of one benchmark, as a file holding several runs has them."""
    return [Result(bench, name, dict(ident, **{key: v})) for v in values]


def timed(name, samples, **ident):
    """One run of a timed benchmark with its raw samples (seconds per call)."""
    import statistics
    return Result("hybridize", name, dict(ident, median_s=statistics.median(samples), samples_s=list(samples)))


def test_a_clear_drop_over_several_runs_is_a_regression_and_a_time_drop_an_improvement():
    old = runs("book", [100, 102, 99, 101], model="resnet18", batch_size=64) + \
        runs("static", [0.010, 0.0101, 0.0099], key="median_s", bench="hybridize", model="mlp")
    new = runs("book", [80, 81, 79, 80.5], model="resnet18", batch_size=64) + \
        runs("static", [0.008, 0.0081, 0.0079], key="median_s", bench="hybridize", model="mlp")
    out = {r.name: r.metrics for r in compare(old, new, 0.10)}
    book = out["train_throughput/book"]
    assert book["metric"] == "images_per_s" and book["runs_old"] == 4 and book["evidence"].startswith("4 and 4 runs")
    assert book["change"] == pytest.approx(80.25 / 100.5 - 1)
    assert book["status"] == "regression" and book["verdict"] == "slower"
    assert book["ratio_ci_high"] < 1 and book["ratio_n"] == 4
    static = out["hybridize/static"]
    assert static["metric"] == "median_s" and static["worse"] == pytest.approx(-0.20)
    assert static["status"] == "improved" and static["ratio"] == pytest.approx(1.25, rel=0.01)


def test_a_change_within_the_threshold_is_same_and_identifying_fields_match():
    old = runs("step", [100, 100.5, 99.5, 100], batch_size=64) + runs("step", [50, 51, 49], batch_size=128)
    new = runs("step", [101, 100.5, 101.5, 101], batch_size=64) + runs("step", [80, 81, 79], batch_size=128)
    out = compare(old, new, 0.10)
    by_batch = {r.metrics["batch_size"]: r.metrics for r in out}
    # two files of steady runs 1% apart: no change called; 'same' would need more than two files
    # can show (the drift runs saved one after another share, stats.SESSION_FLOOR): --ab can
    assert by_batch[64]["status"] == "inconclusive" and "drift between saved runs" in by_batch[64]["evidence"]
    assert by_batch[64]["old"] == 100.0
    assert by_batch[128]["old"] == 50.0  # matched on batch_size, not just on the name
    assert by_batch[128]["status"] == "improved"
    assert not regressions(out)


def test_a_a_single_runs_are_not_called_a_change():
    """The README's case: bench hybridize run twice, nothing changed, the second run 14-31%
    faster by the machine's drift. One run each cannot see that drift: the noise floor widens
    the interval, and the verdict is inconclusive, never 'improved'."""
    old = [timed("hybrid", [0.00100, 0.00104, 0.00098, 0.00101, 0.00102], model="mlp")]
    new = [timed("hybrid", [0.00087, 0.00088, 0.00086, 0.00089, 0.00087], model="mlp")]  # +15%
    row = compare(old, new, 0.05)[0].metrics
    assert row["status"] == "inconclusive" and "cannot settle it" in row["verdict_text"]
    assert "noise floor" in row["evidence"] and row["ratio_n"] == 5
    # without the floor, the same samples would call it: the floor is what stops it
    assert compare(old, new, 0.05, noise_floor=0)[0].metrics["status"] == "improved"


def test_the_noise_floor_follows_how_long_one_call_takes():
    """The floor for single runs comes from the records' call time (stats.NOISE_FLOORS): the
    median per call, a step's time, or the batch over a rate; the shorter side's; the widest
    when nothing says; an explicit noise_floor wins. It is recorded with the call time."""
    from gluonperf.measure import stats
    from gluonperf.measure.comparison import call_seconds
    assert call_seconds([rec("a", median=0.02)], "median_s") == 0.02
    assert call_seconds([Result("t", "a", {"step_s": 0.3})], "step_s") == 0.3
    assert call_seconds([rec("a", per_s=200.0, batch_size=64)], "images_per_s") == pytest.approx(0.32)
    assert call_seconds([rec("a", per_s=200.0)], "images_per_s") is None
    floors = [f for _, f in stats.NOISE_FLOORS]
    assert floors == sorted(floors, reverse=True)  # longer calls never drift more than shorter ones
    assert stats.noise_floor(None) == stats.NOISE_FLOOR == max(floors)
    for upto, floor in stats.NOISE_FLOORS[:-1]:
        assert stats.noise_floor(upto) == floor and stats.noise_floor(upto * 1.01) <= floor
    short = [timed("x", [0.0001, 0.000101])]
    long_old = [timed("x", [0.5, 0.505, 0.495])]
    long_new = [timed("x", [0.3, 0.303, 0.297])]
    row = compare(long_old, long_new)[0].metrics
    assert row["call_s"] == pytest.approx(0.3) and row["noise_floor"] == stats.noise_floor(0.3)
    assert compare(short, long_new)[0].metrics["noise_floor"] == stats.noise_floor(0.0001)
    assert compare(long_old, long_new, noise_floor=0.5)[0].metrics["noise_floor"] == 0.5
    several = compare(long_old * 2, long_new * 2)[0].metrics
    assert "noise_floor" not in several  # runs' own spread: no floor


def test_a_large_change_between_two_single_runs_of_a_long_benchmark_is_called():
    """The issue's case: bench hybridize --model resnet18 --batch-size 32 --train saved once
    with one thread and once with two: 1.76x-1.90x per mode, 1-3% spread within each run.
    One run each must call it, and the other way round fail --fail-above 5% (a 43% drop)."""
    one = [0.512, 0.498, 0.505, 0.520, 0.509]
    two = [x / 1.8 for x in (0.507, 0.515, 0.499, 0.502, 0.511)]
    faster = compare([timed("static", one, model="resnet18")], [timed("static", two, model="resnet18")], 0.05)
    assert faster[0].metrics["status"] == "improved", faster[0].metrics
    slower = compare([timed("static", two, model="resnet18")], [timed("static", one, model="resnet18")], 0.05)
    assert not regressions(faster) and regressions(slower)
    assert slower[0].metrics["status"] == "regression", slower[0].metrics


def test_too_little_evidence_is_inconclusive():
    row = compare(runs("a", [100]), runs("a", [90]), 0.05)[0].metrics
    assert row["status"] == "inconclusive" and row["ratio_ci_low"] < 1 < row["ratio_ci_high"]


def test_alternating_pairs_decide_what_single_runs_cannot():
    from gluonperf.measure.comparison import key
    old, new = runs("a", [100.0]), runs("a", [106.0])
    pairs = {key(old[0]): [(100, 110), (90, 99), (120, 131), (95, 105), (105, 115)]}  # +10% in every pair
    row = compare(old, new, 0.05, pairs=pairs)[0].metrics
    assert row["status"] == "improved" and row["evidence"] == "alternating pairs" and row["ratio_n"] == 5


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


def test_cli_exits_1_only_on_a_significant_regression_past_fail_above(tmp_path, run):
    old = write(tmp_path / "old.json", runs("book", [100, 101, 99, 100], batch_size=64))
    new = write(tmp_path / "new.json", runs("book", [80, 81, 79, 80], batch_size=64),
                dict(ENV, env={"OMP_NUM_THREADS": "2"}))
    p = run("gluonperf.compare", old, new, "--fail-above", "10%")
    assert p.returncode == 1, p.stderr
    assert "regression" in p.stdout and "-20.0%" in p.stdout and "95% CI" in p.stdout
    assert "OMP_NUM_THREADS: unset -> 2" in p.stderr
    p = run("gluonperf.compare", old, new, "--fail-above", "25%")
    assert p.returncode == 0, p.stderr
    p = run("gluonperf.compare", old, new)  # no threshold: informational
    assert p.returncode == 0 and "worse" in p.stdout
    # a 10% drop between two single runs is inside the run-to-run noise: no failure
    one_old = write(tmp_path / "one_old.json", runs("book", [100], batch_size=64))
    one_new = write(tmp_path / "one_new.json", runs("book", [90], batch_size=64))
    p = run("gluonperf.compare", one_old, one_new, "--fail-above", "10%")
    assert p.returncode == 0 and "inconclusive" in p.stdout and "noise floor" in p.stderr, p.stdout + p.stderr
    # a negative threshold is refused with what is wrong, not argparse's "expected one argument"
    p = run("gluonperf.compare", old, new, "--fail-above", "-5%")
    assert p.returncode == 2 and "'-5%' must be between 0% and 1000%" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


FAKE_BENCH = """
import json, os, random, sys
path = sys.argv[sys.argv.index("--json") + 1]
random.seed(os.path.basename(path))  # noise, but the same in every run of the test: it cannot flake
rate = float(sys.argv[1]) * random.lognormvariate(0, 0.02)
with open(path, "w") as f:
    f.write(json.dumps({"bench": "fake", "name": "step", "images_per_s": rate, "env": {}}) + "\\n")
"""


def test_cli_ab_runs_two_commands_in_alternation(tmp_path, run):
    script = tmp_path / "fake_bench.py"
    script.write_text(FAKE_BENCH)
    out = tmp_path / "ab.json"
    import sys
    p = run("gluonperf.compare", "--ab", "%s %s 100" % (sys.executable, script),
            "%s %s 130" % (sys.executable, script), "--runs", "4", "--json", str(out))
    assert p.returncode == 0, p.stderr
    row = json.loads(out.read_text().splitlines()[0])
    assert row["evidence"] == "alternating pairs" and row["ratio_n"] == 4
    assert row["status"] == "improved" and row["ratio_ci_low"] < 1.3 < row["ratio_ci_high"]
    p = run("gluonperf.compare", "--ab", "%s %s 100" % (sys.executable, script), "false", "--runs", "1")
    assert p.returncode == 2 and "the NEW command failed" in p.stderr and len(p.stderr.strip().splitlines()) == 1


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
    assert row["change"] == pytest.approx(0.5) and row["ratio"] == pytest.approx(1.5)
    # every row carries its interval, n and the evidence it stands on
    assert row["ratio_ci_low"] < 1.5 < row["ratio_ci_high"] and row["ratio_n"] == 1
    assert row["status"] in ("improved", "inconclusive") and "noise floor" in row["evidence"]


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


def test_a_run_that_recorded_an_unstable_machine_gets_a_wider_interval():
    old = runs("a", [100, 101, 99, 100])
    new = runs("a", [104, 105, 103, 104])
    calm = compare(old, new)[0].metrics
    new[0] = Result(new[0].bench, new[0].name, dict(new[0].metrics, machine_warnings=["busy"]))
    shaky = compare(old, new)[0].metrics
    assert calm["ratio_level"] == 0.95 and shaky["ratio_level"] == 0.99 and "unstable" in shaky["evidence"]
    assert shaky["ratio_ci_high"] - shaky["ratio_ci_low"] > calm["ratio_ci_high"] - calm["ratio_ci_low"]


def ruled(name, samples, ruler, **ident):
    """One run of a timed benchmark with its raw samples and its yardstick's, repeat by repeat."""
    import statistics
    r = timed(name, samples, **ident)
    r.metrics.update(yardstick_s=statistics.median(ruler), yardstick_samples_s=list(ruler))
    return r


def test_two_runs_with_the_same_settings_are_held_against_their_yardstick():
    """NEW took 1.5x as long per call, but the machine ran the yardstick 1.5x slower too: the
    host was slower, the benchmark no worse. Held against the yardstick it is the same within
    the floor; without a yardstick it would be a large regression."""
    old = [(ruled("static", [0.020, 0.0202, 0.0199, 0.0201, 0.0200], [0.010, 0.0101, 0.0099, 0.0100, 0.0100]), ENV)]
    new = [(ruled("static", [0.030, 0.0303, 0.0298, 0.0301, 0.0300], [0.015, 0.0151, 0.0149, 0.0150, 0.0150]), ENV)]
    got = compare(old, new, 0.05)[0].metrics
    assert got["yardstick"] is True and "against the yardstick each run timed" in got["evidence"]
    assert "at 0.67x OLD's speed" in got["evidence"]
    assert got["ratio"] == pytest.approx(1.0, rel=0.02) and got["status"] != "regression"
    from gluonperf.measure import stats
    assert got["noise_floor"] == stats.noise_floor(0.02, yardstick=True) < stats.noise_floor(0.02)
    # the same files without their yardstick: the change is the times'
    plain = compare([(timed("static", old[0][0].metrics["samples_s"]), ENV)],
                    [(timed("static", new[0][0].metrics["samples_s"]), ENV)], 0.05)[0].metrics
    assert plain["yardstick"] is False and plain["ratio"] == pytest.approx(2 / 3, rel=0.02)
    assert plain["noise_floor"] == stats.noise_floor(0.02) and "yardstick" not in plain["evidence"]


def test_runs_whose_settings_differ_are_not_held_against_the_yardstick():
    """The yardstick runs with the run's settings (threads, MXNet's variables): when those
    changed, it would cancel the change being measured."""
    samples_old, samples_new = [0.020, 0.0202, 0.0199], [0.011, 0.0112, 0.0109]
    old = [(ruled("static", samples_old, [0.010, 0.0101, 0.0099]), dict(ENV, env={"OMP_NUM_THREADS": "1"}))]
    new = [(ruled("static", samples_new, [0.0055, 0.0056, 0.0054]), dict(ENV, env={"OMP_NUM_THREADS": "2"}))]
    got = compare(old, new, 0.05)[0].metrics
    assert got["yardstick"] is False and "not against the yardstick: the runs' settings differ" in got["evidence"]
    from gluonperf.measure import stats
    assert got["noise_floor"] == stats.noise_floor(0.011)
    assert got["ratio"] == pytest.approx(0.0200 / 0.0110, rel=0.03)


def test_the_yardstick_floor_is_narrower_than_the_plain_one_in_every_band():
    from gluonperf.measure import stats
    for call in (1e-4, 5e-3, 0.1, None):
        assert 0 < stats.noise_floor(call, yardstick=True) < stats.noise_floor(call)

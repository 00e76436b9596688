"""The benchmark suites in benchmarks/, run as a user runs them: tiny sizes, bad input, an
unwritable --json refused before the first run, and a stopped run that keeps what it measured.
(Split from test_commands.py, whose helpers they share, so that pytest-xdist's `loadfile` can
give the two files to different workers.)"""
import json
import signal
import subprocess
import time

import pytest

from conftest import ROOT
from test_commands import PY, TIMEOUT, command, header, marked_env, processes_of, records


CEILING = "ceiling (peak FLOP/s over FLOPs per image)"


def test_throughput_suite_tiny(tmp_path):
    out = tmp_path / "tt.json"
    p = command(["benchmarks/train_throughput.py", "--model", "lenet", "--batch-sizes", "16", "--rounds", "1",
                 "--steps", "2", "--json", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert {"batch_size", "name", "images_per_s", "ratio", "of_ceiling"} <= set(header(p.stdout))
    rows = {r["name"]: r for r in records(out)}
    assert set(rows) >= {"book loop", "gluonperf.train", CEILING}
    # the ceiling ran between two book-loop runs like the others; every run's share of it is its
    # ratio to the book loop over the ceiling's, round by round, and LeNet's loops are far below it
    ceiling = rows[CEILING]
    assert ceiling["of_ceiling"] == 1 and ceiling["runner"] == "benchmarks/ceiling_probe.py"
    for name in ("book loop", "gluonperf.train"):
        assert rows[name]["of_ceiling"] == pytest.approx(rows[name]["ratio"] / ceiling["ratio"])
        assert 0 < rows[name]["of_ceiling"] < 1
        assert rows[name]["images_per_s"] < ceiling["images_per_s"]


def test_throughput_suite_without_the_ceiling(tmp_path):
    out = tmp_path / "tt.json"
    p = command(["benchmarks/train_throughput.py", "--model", "mlp", "--batch-sizes", "8", "--rounds", "1",
                 "--steps", "1", "--runner", "steprate", "--no-ceiling", "--json", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "of_ceiling" not in header(p.stdout)
    assert CEILING not in {r["name"] for r in records(out)}


def test_ceiling_probe_prints_the_ceiling_as_images_per_s(tmp_path):
    """benchmarks/ceiling_probe.py as the suite runs it: one JSON line on stdout, the peak
    over the model's training FLOPs per image as gluonperf.flops counts them."""
    from gluonperf.flops import count_model_flops
    from gluonperf.step_profile import SAMPLE_SHAPE
    p = command(["benchmarks/ceiling_probe.py", "--model", "resnet18", "--size", "quick", "--repeat", "1"],
                tmp_path, OMP_NUM_THREADS="1")
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout.strip().splitlines()[-1])
    assert len(p.stdout.strip().splitlines()) == 1
    gflop = count_model_flops("resnet18", SAMPLE_SHAPE).training / 1e9
    assert row["training_gflop_per_image"] == pytest.approx(gflop, rel=1e-3)  # gluonperf.profile: 2.744
    assert row["images_per_s"] == pytest.approx(row["gflop_per_s"] / gflop, rel=1e-6)
    assert row["kernel"] in ("FullyConnected (oneDNN)", "nd.dot", "Convolution 3x3 (oneDNN)",
                             "Convolution 3x3 deep (oneDNN)")
    assert row["omp_threads"] == 1  # the user's setting, kept and recorded


@pytest.mark.parametrize("args", [["--model", "bogus"], ["--repeat", "0"], ["--size", "huge"]])
def test_ceiling_probe_bad_input_is_one_line(args, tmp_path):
    p = command(["benchmarks/ceiling_probe.py", *args], tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert args[0] in p.stderr and not p.stdout


@pytest.mark.parametrize("script,args", [
    ("train_throughput", ["--batch-sizes", "64,x"]), ("train_throughput", ["--batch-sizes", "64,0"]),
    ("train_throughput", ["--steps", "0"]), ("train_throughput", ["--rounds", "-1"]),
    ("train_throughput", ["--model", "bogus"]), ("levers", ["--steps", "0"]), ("levers", ["--batch-size", "x"]),
    ("levers", ["--only", "4,19"]),  # GOMP_SPINCOUNT=infinite: it would take the cores from the others
    ("checkpointing", ["--steps", "0"]), ("checkpointing", ["--segments", "0"]), ("hybridize_suite", ["--repeat", "0"]),
])
def test_suites_bad_input_is_one_line(script, args, tmp_path):
    p = command(["benchmarks/%s.py" % script, *args, "--json", str(tmp_path / "out.json")], tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert args[0] in p.stderr or "unknown model" in p.stderr
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("script", ["train_throughput", "levers", "checkpointing", "hybridize_suite", "model_variants"])
def test_suites_refuse_an_unwritable_json_before_running(script, tmp_path):
    """Suites run for minutes to hours: a --json that cannot be written is refused before the
    first run, not after the last (where the results would be lost)."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    p = command(["benchmarks/%s.py" % script, "--json", str(a_file / "out.json")], tmp_path, timeout=60)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = [l for l in p.stderr.strip().splitlines() if not l.startswith("note: ")]
    assert len(lines) == 1 and "is not a writable directory" in lines[0], p.stderr


def test_model_variants_suite_tiny(tmp_path):
    out = tmp_path / "mv.json"
    p = command(["benchmarks/model_variants.py", "--batch-size", "4", "--rounds", "2", "--steps", "1",
                 "--json", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    rows = records(out)
    assert len(rows) == 3 and rows[0]["name"] == "book (F.relu)" and rows[0]["ratio"] == 1
    assert all(r["images_per_s"] > 0 and r["ratio_min"] <= r["ratio"] <= r["ratio_max"] for r in rows)


def test_checkpointing_suite_stopped_during_timing_keeps_the_memory_records(tmp_path):
    """The memory runs (fresh processes) take most of the suite's time: they are in --json
    as soon as they finish, so a run stopped while it times the steps keeps them."""
    out = tmp_path / "ckpt.json"
    env, mark = marked_env()
    proc = subprocess.Popen([PY, "benchmarks/checkpointing.py", "--model", "lenet", "--batch-size", "4",
                             "--segments", "2", "--steps", "1", "--budget", "64M", "--rounds", "1000000",
                             "--json", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + TIMEOUT
        while not out.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert out.exists() and proc.poll() is None, "no memory records before the timing: %s" % (
            proc.stderr.read() if proc.poll() is not None else "still running")
        time.sleep(1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "Traceback" not in err, err
    rows = records(out)
    assert {r["bench"] for r in rows} == {"footprint", "footprint-budget"}, rows
    assert {r["name"] for r in rows if r["bench"] == "footprint"} >= {"hybrid", "static", "hybrid ckpt2"}
    assert all(r["peak_above_bytes"] > 0 for r in rows if r["bench"] == "footprint" and not r.get("error"))
    assert not processes_of(mark)

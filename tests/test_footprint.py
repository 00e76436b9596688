"""python -m gluonperf.bench footprint and gluonperf.experiments.footprint: the memory of a training step."""
import argparse

import pytest

from gluonperf import UserError
from gluonperf.cli.units import size_bytes
from gluonperf.experiments.footprint import (StepSettings, effective_configs, fit_line, footprint, largest_batch,
                                             parameter_bytes)
from helpers import needs_bfloat16
from gluonperf.records import read_jsonl

MiB = 2 ** 20


def test_footprint_end_to_end_with_checkpointing_budget_and_plot(run, tmp_path):
    out, png = tmp_path / "fp.jsonl", tmp_path / "fp.png"
    p = run("gluonperf.bench", "footprint", "--model", "lenet", "--batch-sizes", "8", "--hybridize", "static",
            "--checkpoint", "2", "--steps", "2", "--budget", "24M", "--json", str(out), "--plot", str(png), "--wide",
            timeout=180)
    assert p.returncode == 0, p.stderr
    assert "static runs as hybrid" in p.stderr
    header = p.stdout.splitlines()[1].split()
    assert header[:6] == ["name", "batch_size", "model_bytes", "peak_above_bytes", "bytes_per_sample", "needs_bytes"]
    assert "largest batch whose needs fit the budget" in p.stdout
    records = [r for r, _ in read_jsonl(str(out))]
    runs = [r for r in records if r.bench == "footprint"]
    budgets = [r for r in records if r.bench == "footprint-budget"]
    assert (runs[0].name, runs[0].metrics["batch_size"]) == ("hybrid ckpt2", 8)
    for r in runs:
        m = r.metrics
        assert "error" not in m, m
        # counted from the arrays: sgd with momentum keeps one state per trainable parameter
        assert m["param_bytes"] > 400000 and m["grad_bytes"] == m["state_bytes"] > 0
        assert m["model_bytes"] == m["param_bytes"] + m["grad_bytes"] + m["state_bytes"]
        assert m["needs_bytes"] == m["model_bytes"] + m["peak_above_bytes"]
        assert m["bytes_per_sample"] == pytest.approx(m["peak_above_bytes"] / m["batch_size"])
        assert m["images_per_s"] == pytest.approx(m["batch_size"] / m["median_s"])
        assert m["repeats"] == 2 and len(m["step_peak_above_bytes"]) == 2 and m["memory"] == "rss"
    [b] = budgets
    m = b.metrics
    assert b.name == "hybrid ckpt2" and m["budget_bytes"] == 24 * MiB and m["largest_batch"] >= 1 and m["fits"], m
    assert m["needs_bytes"] <= 24 * MiB
    confirmed = [x for x in runs if x.metrics["batch_size"] == m["largest_batch"]]
    assert len(confirmed) == 1  # the confirming run is in the table too
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def fake_worker(params, timeout=None):
    """What a worker would report, without a process: 1 KiB per sample (2 with plain
    checkpointing off), 1 s per 100 samples; batch 50 without checkpointing runs out of memory."""
    b, c = params["batch_size"], params["checkpoint"]
    if b == 50 and not c:
        raise RuntimeError("hybrid at batch 50 failed: killed by signal 9 (out of memory?)")
    above = b * (1024 if c else 2048)
    return {"model": params["model"], "batch_size": b, "hybridize": params["hybridize"], "checkpoint": c,
            "model_bytes": 4096, "peak_above_bytes": above, "needs_bytes": 4096 + above,
            "step_s": b / (80 if c else 100), "images_per_s": 80 if c else 100,
            "step_samples_s": [b / (80 if c else 100)] * 2}


def test_the_sweep_compares_with_the_plain_step_and_keeps_failures(monkeypatch):
    import mxnet as mx
    from gluonperf.experiments import footprint as fp
    monkeypatch.setattr(fp, "run_step_footprint", fake_worker)
    monkeypatch.setattr(fp, "parameter_bytes", lambda model: 1000)
    ticks = []
    rows = fp.footprint(fp.StepSettings("lenet", [mx.cpu()]), [10, 20, 50], fp.effective_configs(["hybrid"], [0, 2]),
                        budgets=[4096 + 40 * 2048], progress=lambda: ticks.append(1))
    names = [(r.bench, r.name, r.metrics.get("batch_size")) for r in rows]
    assert names == [("footprint", "hybrid", 10), ("footprint", "hybrid", 20), ("footprint", "hybrid", 40),
                     ("footprint", "hybrid", 50), ("footprint", "hybrid ckpt2", 10), ("footprint", "hybrid ckpt2", 20),
                     ("footprint", "hybrid ckpt2", 50), ("footprint", "hybrid ckpt2", 80),
                     ("footprint-budget", "hybrid", None), ("footprint-budget", "hybrid ckpt2", None)]
    assert len(ticks) == 8
    by = {(r.name, r.metrics.get("batch_size")): r.metrics for r in rows}
    assert by["hybrid ckpt2", 20]["peak_vs_plain"] == pytest.approx(0.5)
    assert by["hybrid ckpt2", 20]["time_vs_plain"] == pytest.approx(1.25)
    assert "out of memory" in by["hybrid", 50]["error"] and "peak_vs_plain" not in by["hybrid ckpt2", 50]
    budget = {r.name: r.metrics for r in rows if r.bench == "footprint-budget"}
    assert budget["hybrid"]["largest_batch"] == 40 and budget["hybrid"]["fits"]
    assert budget["hybrid ckpt2"]["largest_batch"] == 80 and budget["hybrid ckpt2"]["fits"]


def test_footprint_on_two_contexts(run):
    p = run("gluonperf.bench", "footprint", "--model", "mlp", "--batch-sizes", "16", "--hybridize", "static",
            "--steps", "1", "--ctx", "cpu0,cpu1", timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()[3:]]
    assert [row[:2] for row in rows] == [["static", "16"]]
    assert "cpu(0),cpu(1)" in p.stdout.splitlines()[0]


@needs_bfloat16
def test_bfloat16_step_in_the_workers(run, tmp_path):
    """Each fresh worker process runs the step under bfloat16 AMP (and asks for AMX itself)."""
    out = tmp_path / "fp.jsonl"
    p = run("gluonperf.bench", "footprint", "--model", "lenet", "--batch-sizes", "16", "--hybridize", "static",
            "--steps", "1", "--dtype", "bfloat16", "--json", str(out), timeout=120)
    assert p.returncode == 0, p.stderr
    rows = [r for r, _ in read_jsonl(str(out))]
    assert [(r.name, r.metrics["dtype"]) for r in rows] == [("static", "bfloat16")]
    assert rows[0].metrics["peak_above_bytes"] > 0 and "bfloat16 mixed precision" in p.stdout.splitlines()[0]


@pytest.mark.parametrize("args, words", [
    (["--budget", "100K"], "below the"),  # LeNet's parameters alone take about 0.5 MiB
    (["--budget", "lots"], "is not a size"),
    (["--hybridize", "fast"], "choose from none,hybrid,static"),
    (["--checkpoint", "99"], "at most 7 checkpoint segments"),
    (["--batch-sizes", "1", "--ctx", "cpu0,cpu1"], "smaller than the 2 contexts"),
    (["--model", "nosuchnet"], "unknown model"),
    (["--dtype", "bfloat16", "--checkpoint", "2"], "checkpointing does not work with bfloat16"),
])
def test_bad_input_is_one_line_and_writes_nothing(args, words, tmp_path, capsys):
    """In this process (cli.run, as the command does), to keep it fast."""
    from gluonperf import bench
    from gluonperf.cli import common as cli
    out = tmp_path / "fp.jsonl"
    with pytest.raises(SystemExit) as e:
        cli.run(bench.main, bench.PROG, ["footprint", "--model", "lenet", "--batch-sizes", "4", "--json", str(out),
                                         *args])
    captured = capsys.readouterr()
    lines = [l for l in captured.err.strip().splitlines() if not l.startswith(("note: ", "warning: "))]
    assert e.value.code == 2 and captured.out == "", captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err and words in lines[0], captured.err
    assert lines[0].startswith("python -m gluonperf.bench")
    assert not out.exists()


def test_bfloat16_is_refused_off_the_cpu_before_any_run():
    import mxnet as mx
    with pytest.raises(UserError, match="CPU contexts only"):
        footprint(StepSettings("lenet", [mx.cpu(0), mx.gpu(0)], dtype="bfloat16"), [4])


def test_a_budget_below_the_parameters_is_one_line_in_a_real_process(run, tmp_path):
    out = tmp_path / "fp.jsonl"
    p = run("gluonperf.bench", "footprint", "--model", "resnet18", "--budget", "20M", "--json", str(out), timeout=60)
    lines = [l for l in p.stderr.strip().splitlines() if not l.startswith(("note: ", "warning: "))]
    assert p.returncode == 2 and p.stdout == "" and not out.exists()
    assert len(lines) == 1 and "parameters alone" in lines[0], p.stderr


def test_budget_below_the_parameters_is_refused_before_any_run():
    with pytest.raises(UserError, match="parameters alone"):
        footprint(StepSettings("resnet18", [__import__("mxnet").cpu()]), [8], budgets=[10 * MiB])
    assert 40 * MiB < parameter_bytes("resnet18") < 50 * MiB  # 11.2 M floats


def test_size_parsing():
    assert size_bytes("2G") == size_bytes("2GiB") == 2 * 2 ** 30
    assert size_bytes("512m") == 512 * MiB and size_bytes("1.5K") == 1536 and size_bytes("3000") == 3000
    for bad in ("", "2X", "-1G", "0"):
        with pytest.raises(argparse.ArgumentTypeError):
            size_bytes(bad)


def point(batch, model=100, per_sample=10, extra=0):
    return {"batch_size": batch, "model_bytes": model, "peak_above_bytes": per_sample * batch + extra,
            "needs_bytes": model + per_sample * batch + extra, "images_per_s": 1.0}


def test_largest_batch_is_predicted_then_confirmed():
    calls = []

    def run(batch):
        calls.append(batch)
        return point(batch)
    found = largest_batch([point(2), point(4)], 1000, run)
    assert found["predicted_batch"] == found["largest_batch"] == 90 and found["fits"]
    assert calls == [90] and found["confirm_runs"] == 1 and found["needs_bytes"] == 1000
    assert found["over_batch"] is None


def test_the_prediction_is_refined_from_the_points_nearest_the_budget():
    # the per-sample cost falls with the batch: a line from batch 0 is cautious at first
    def run(batch):
        return point(batch, per_sample=10 if batch < 20 else 5, extra=0 if batch < 20 else 50)
    calls = []
    found = largest_batch([run(10)], 1000, lambda b: calls.append(b) or run(b))
    assert found["predicted_batch"] == 90 and calls[0] == 90
    assert found["largest_batch"] == 170 and found["fits"] and found["confirm_runs"] == 2


def test_two_close_noisy_points_do_not_make_the_slope():
    calls = []
    noisy = [point(10), point(80), point(85, extra=-45)]  # 85 came out 40 bytes low
    found = largest_batch(noisy, 1000, lambda b: calls.append(b) or point(b))
    assert calls[0] == 95  # the line from 10 to 85; from 80 to 85 it would be 180
    assert found["largest_batch"] == 90 and found["over_batch"] == 91


def test_a_run_that_does_not_fit_brackets_the_answer():
    # memory grows faster than linearly at large batches: the first prediction overshoots
    def run(batch):
        return point(batch, extra=0 if batch <= 50 else 5 * (batch - 50))
    found = largest_batch([point(2), point(4)], 1000, run)
    assert found["predicted_batch"] == 90 and found["confirm_runs"] == 3
    assert 50 <= found["largest_batch"] < found["over_batch"] <= 90 and found["fits"]
    assert run(found["largest_batch"])["needs_bytes"] <= 1000


def test_a_failed_run_counts_as_not_fitting():
    found = largest_batch([point(4)], 1000, lambda b: {"error": "killed"} if b > 60 else point(b))
    # 90 fails, then the gap is halved: 47 fits, 68 fails
    assert found["largest_batch"] == 47 and found["confirm_runs"] == 3 and found["error"] == "killed"


def test_nothing_fits_and_one_point_lines():
    found = largest_batch([point(4)], 50, lambda b: pytest.fail("no run needed"))
    assert found["largest_batch"] == 0 and not found["fits"]
    assert fit_line([point(4)]) == (100.0, 10.0)
    intercept, slope = fit_line([point(2), point(8)])
    assert intercept == pytest.approx(100) and slope == pytest.approx(10)
    assert largest_batch([{"batch_size": 4, "error": "killed"}], 50, None)["error"] == "no batch size ran"


def test_static_with_checkpointing_runs_as_hybrid():
    assert effective_configs(["hybrid", "static"], [0, 4]) == [("hybrid", 0), ("hybrid", 4), ("static", 0)]


def test_repeated_processes_give_the_median_peak_and_its_range(monkeypatch):
    import itertools
    from gluonperf.experiments import footprint as fp
    peaks = itertools.cycle([100, 300, 200])

    def worker(params, timeout=None):
        row = fake_worker(params)
        row.update(peak_above_bytes=next(peaks), step_samples_s=[1.0, 3.0])
        return row
    monkeypatch.setattr(fp, "run_step_footprint", worker)
    ticks = []
    row = fp._repeated({"model": "lenet", "batch_size": 10, "hybridize": "hybrid", "checkpoint": 0}, 3, None,
                       lambda: ticks.append(1))
    assert len(ticks) == 3 and row["processes"] == 3
    assert (row["peak_above_bytes"], row["peak_above_min_bytes"], row["peak_above_max_bytes"]) == (200, 100, 300)
    assert row["needs_bytes"] == 4096 + 200 and row["step_s"] == 2.0 and len(row["step_samples_s"]) == 6

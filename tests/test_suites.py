"""The benchmark suites in benchmarks/, run as a user runs them: tiny sizes, bad input, an
unwritable --json refused before the first run, and a stopped run that keeps what it measured.
(Split from test_commands.py, whose helpers they share, so that pytest-xdist can give the two
files, each one unit of work, to different workers.)"""
import functools
import re
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from gluonperf.runtime import wire
from helpers import ROOT, clean_env
from test_commands import PY, TIMEOUT, command, header, marked_env, processes_of, records


CEILING = "ceiling (peak FLOP/s over FLOPs per image)"
TORCH_PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")  # where train_throughput looks first


@functools.lru_cache(maxsize=None)
def no_torch():
    """Why the PyTorch yardstick cannot run here (None when it can): the tests' venv has no
    torch; the benchmarks' own venv (.venv-torch, the README's benchmarks/ paragraph) may.
    Asked once, by the first test that needs the answer, not when pytest collects this file:
    importing torch takes 3 s of CPU, which every xdist worker and the `-m alone` run spent
    at collection, running this file's tests or not."""
    if not os.path.exists(TORCH_PYTHON):
        return "no %s (python3 -m venv .venv-torch && .venv-torch/bin/pip install torch==2.13.0)" % TORCH_PYTHON
    p = subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True, text=True, timeout=120)
    return None if p.returncode == 0 else "torch does not import in %s" % TORCH_PYTHON


@pytest.fixture
def needs_torch():
    """The test skips, saying why, when the PyTorch yardstick cannot run here (no_torch)."""
    if no_torch() is not None:
        pytest.skip("no PyTorch yardstick: %s" % no_torch())


def _no_bf16():
    from gluonperf.runtime.precision import has_bf16, why_no_bf16
    return why_no_bf16(clean_env()) or (None if has_bf16() else "this CPU has no bfloat16 instructions "
                                                                 "(AMX or AVX512-BF16)")


@pytest.fixture
def suite_module(monkeypatch):
    """Import a script of benchmarks/ (and its sibling suite_stats) as the suites run it."""
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    loaded = []

    def load(name):
        import importlib
        loaded.append(name)
        return importlib.import_module(name)
    yield load
    for name in loaded + ["suite_stats"]:
        sys.modules.pop(name, None)


def test_throughput_suite_tiny(tmp_path):
    out = tmp_path / "tt.json"
    p = command(["benchmarks/train_throughput.py", "--model", "lenet", "--batch-sizes", "16", "--rounds", "1",
                 "--steps", "2", "--no-compile", "--json", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    shown = header(p.stdout)  # within 100 columns: what is read last may be left out
    assert {"batch_size", "name", "verdict"} <= set(shown), p.stdout
    assert any(re.match(r"(ratio|of_ceiling) \([0-9.]+% CI\)$", h) for h in shown), p.stdout  # an interval: one cell
    assert not [h for h in header(p.stdout) if h.startswith("ratio_")]
    rows = {r["name"]: r for r in records(out)}
    assert set(rows) >= {"book loop", "gluonperf.train", CEILING}
    # every ratio carries its interval and n; one round cannot settle anything, and the verdict says so
    ours = rows["gluonperf.train"]
    assert ours["ratio_n"] == 1 and len(ours["round_ratios"]) == 1 and ours["ratio_level"] >= 0.95
    assert ours["ratio_ci_low"] == 0 and ours["ratio_ci_high"] == float("inf")
    assert ours["verdict"] == "inconclusive" and "1 round" in ours["verdict_text"]
    assert rows["book loop"]["verdict"] == "baseline"
    assert not [k for r in rows.values() for k in r if k.endswith(("ratio_min", "ratio_max", "ceiling_min",
                                                                    "ceiling_max", "pytorch_min", "pytorch_max"))]
    assert "gluonperf.train vs book loop: inconclusive" in p.stdout
    if no_torch() is None:  # the eager yardstick ran (LeNet is in torch_loop too); --no-compile left compile out
        assert "pytorch eager" in rows and not any(n.startswith("pytorch torch.compile") for n in rows)
        assert ours["vs_pytorch_n"] == 1 and ours["vs_pytorch_verdict"] == "inconclusive"
        assert "gluonperf.train vs pytorch eager: inconclusive" in p.stdout
    else:
        assert "no PyTorch at" in p.stderr
    # gluonperf's --dtype bfloat16 runs beside float32 where the CPU has bfloat16; elsewhere one note says why not
    why = _no_bf16()
    if why:
        assert [l for l in p.stderr.splitlines() if l.startswith("note: no bfloat16 rows")] == [
            "note: no bfloat16 rows (gluonperf.train --dtype bfloat16, PyTorch's bfloat16 autocast): " + why]
        assert "gluonperf.train --dtype bfloat16" not in rows
    else:
        assert rows["gluonperf.train --dtype bfloat16"]["ratio_n"] == 1
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
    assert not [h for h in header(p.stdout) if h.startswith("of_ceiling")]
    assert CEILING not in {r["name"] for r in records(out)}


def test_ceiling_probe_prints_the_ceiling_as_images_per_s(tmp_path):
    """benchmarks/ceiling_probe.py as the suite runs it: one line on stdout (the wire's answer), the
    peak over the model's training FLOPs per image as gluonperf.measure.flops counts them."""
    from gluonperf.training.models import count_model_flops
    from gluonperf.experiments.step_time import SAMPLE_SHAPE
    p = command(["benchmarks/ceiling_probe.py", "--model", "resnet18", "--size", "quick", "--repeat", "1"],
                tmp_path, OMP_NUM_THREADS="1")
    assert p.returncode == 0, p.stderr
    row = wire.answer(p.stdout, "benchmarks/ceiling_probe.py")
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
    ("dist_sync_terms", ["--rounds", "0"]), ("dist_sync_terms", ["--repeats", "x"]),
    ("inference", ["--rounds", "0"]), ("inference", ["--models", "resnet18,vgg"]), ("inference", ["--rungs", "fp8"]),
])
def test_suites_bad_input_is_one_line(script, args, tmp_path):
    p = command(["benchmarks/%s.py" % script, *args, "--json", str(tmp_path / "out.json")], tmp_path)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert args[0] in p.stderr or "unknown model" in p.stderr
    assert not (tmp_path / "out.json").exists()


@pytest.mark.parametrize("script", ["train_throughput", "levers", "checkpointing", "hybridize_suite", "model_variants",
                                    "dist_sync_terms", "inference"])
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
    assert rows[0]["verdict"] == "baseline"
    for r in rows:  # the geometric mean of the per-round ratios, inside its 95% interval, over both rounds
        assert r["images_per_s"] > 0 and r["ratio_ci_low"] <= r["ratio"] <= r["ratio_ci_high"] and r["ratio_n"] == 2
        assert r["ratio"] == pytest.approx(math.sqrt(r["round_ratios"][0] * r["round_ratios"][1]))
        assert "ratio_min" not in r
    for r in rows[1:]:
        assert r["verdict"] in ("faster", "slower", "same", "inconclusive")
        assert r["verdict_text"].startswith(r["name"] + " vs book (F.relu): ") and "2 rounds" in r["verdict_text"]
        assert r["verdict_text"] in p.stdout


def test_checkpointing_suite_stopped_during_timing_keeps_the_memory_records(tmp_path):
    """The memory runs (fresh processes) take most of the suite's time: they are in --json
    as soon as they finish, so a run stopped while it times the steps keeps them. --budget 2M:
    above LeNet's parameters (a budget below them is refused) and below what its step needs at
    batch 4, so each configuration has its budget row without the runs that would confirm a
    larger batch (up to 3 fresh processes each with 64M)."""
    out = tmp_path / "ckpt.json"
    env, mark = marked_env()
    proc = subprocess.Popen([PY, "benchmarks/checkpointing.py", "--model", "lenet", "--batch-size", "4",
                             "--segments", "2", "--steps", "1", "--budget", "2M", "--rounds", "1000000",
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
    assert all(r["confirm_runs"] == 0 and r["fits"] is False for r in rows if r["bench"] == "footprint-budget"), rows
    assert not processes_of(mark)


def test_runs_are_set_against_each_yardstick_with_an_interval_and_a_verdict(suite_module):
    """train_throughput.against: per round, a run's ratio to the book loop over the yardstick's
    in the same round; the geometric mean with its 95% t interval over the rounds where both
    ran, n, and a verdict against the yardstick (none for the ceiling, a share)."""
    from gluonperf.records import Result
    from scipy import stats as sp
    tt = suite_module("train_throughput")
    rows = [Result("tune", "book loop", {"round_ratios": [1.0, 1.0, 1.0, 1.0]}),
            Result("tune", "gluonperf.train", {"round_ratios": [2.4, 2.42, 2.5, 2.38]}),
            Result("tune", "noisy", {"round_ratios": [1.0, 4.0, 0.5, None]}),
            Result("tune", "broken", {"round_ratios": [None, None, None, None]}),
            Result("tune", "pytorch eager", {"round_ratios": [2.0, 2.0, None, 2.0], "vs_pytorch_min": 1.0})]
    by = {r.name: r.metrics for r in tt.against(rows, "pytorch eager")}
    ours = by["gluonperf.train"]
    q = [1.2, 1.21, 1.19]  # round 3 left out: PyTorch failed in it
    logs = [math.log(x) for x in q]
    mean, sd = sum(logs) / 3, (sum((x - sum(logs) / 3) ** 2 for x in logs) / 2) ** 0.5
    half = sp.t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert ours["vs_pytorch"] == pytest.approx(math.exp(mean))
    assert (ours["vs_pytorch_ci_low"], ours["vs_pytorch_ci_high"]) == pytest.approx(
        (math.exp(mean - half), math.exp(mean + half)))
    assert ours["vs_pytorch_n"] == 3 and ours["vs_pytorch_level"] == 0.95
    assert ours["vs_pytorch_verdict"] == "faster"  # 1.2x, its interval above 1, past 5%
    assert ours["vs_pytorch_verdict_text"].startswith("gluonperf.train vs pytorch eager: faster: 1.20x (95% CI ")
    assert by["noisy"]["vs_pytorch_verdict"] == "inconclusive" and by["noisy"]["vs_pytorch_n"] == 2
    # 2 rounds this wide: too few for an interval a reader can use, and the text says so (issue 70, item 5)
    assert by["noisy"]["vs_pytorch_verdict_text"].startswith(
        "noisy vs pytorch eager: inconclusive: 1.00x (2 rounds: too few for an interval)")
    assert by["broken"]["vs_pytorch"] is None and by["broken"]["vs_pytorch_n"] is None
    assert "vs_pytorch_verdict" not in by["broken"]
    assert by["pytorch eager"]["vs_pytorch_verdict"] == "baseline"
    assert "vs_pytorch_min" not in by["pytorch eager"]  # an old field of the same key is replaced
    with pytest.raises(ValueError, match="no result named"):
        tt.against(rows, "jax")
    # the ceiling: a share of it, with its interval, never a verdict
    rows.append(Result("tune", tt.CEILING_NAME, {"round_ratios": [3.0, 2.75, 2.5, 2.6]}))
    by = {r.name: r.metrics for r in tt.against(rows, tt.CEILING_NAME, "of_ceiling", verdict=False)}
    assert by["gluonperf.train"]["of_ceiling_n"] == 4 and by["gluonperf.train"]["of_ceiling_ci_high"] <= 1.1
    assert not [k for k in by["gluonperf.train"] if k.startswith("of_ceiling_verdict")]


def test_throughput_suite_runs_pytorch_eager_and_compiled_and_bfloat16_beside_float32(suite_module):
    """The yardsticks: PyTorch eager and torch.compile for every model torch_loop has; on a
    CPU with bfloat16, gluonperf.train --dtype bfloat16 and PyTorch's autocast (eager and
    compiled) beside float32."""
    from gluonperf.training.runners import CommandRunner as Runner
    tt = suite_module("train_throughput")
    torch = Runner("benchmarks/torch_loop.py", python="/torch/python")
    for model in ("resnet18", "lenet"):
        cands = {c.name: c for c in tt.candidates(16, tt.TRAIN, model, torch)}
        assert {"pytorch eager", "pytorch torch.compile"} <= set(cands)
        assert cands["pytorch torch.compile"].flag("compile") == "" and cands["pytorch eager"].flag("compile") is None
        assert cands["pytorch torch.compile"].runner is torch
        assert not any("bfloat16" in n for n in cands)
    assert not any(n.startswith("pytorch") for n in (c.name for c in tt.candidates(16, tt.TRAIN, "mlp", torch)))
    assert not any(n.startswith("pytorch") for n in (c.name for c in tt.candidates(16, tt.TRAIN, "lenet", None)))
    both = {c.name: c for c in tt.candidates(16, tt.TRAIN, "resnet18", torch, bf16=True)}
    assert both["gluonperf.train --dtype bfloat16"].flag("dtype") == "bfloat16"
    assert both["pytorch torch.compile bfloat16 autocast"].flag("dtype") == "bfloat16"
    assert both["pytorch torch.compile bfloat16 autocast"].flag("compile") == ""
    assert both["gluonperf.train"].flag("dtype") is None  # float32 stays
    bf16 = {c.name for c in tt.candidates(16, tt.TRAIN, "resnet18", torch, dtype="bfloat16")}
    assert {"pytorch eager bfloat16 autocast", "pytorch torch.compile bfloat16 autocast"} <= bf16
    argv = tt.TRAIN.argv(both["gluonperf.train --dtype bfloat16"], 2, "x.json")
    assert argv[argv.index("--dtype") + 1] == "bfloat16"
    argv = torch.argv(both["pytorch torch.compile"], 2)
    assert "--compile" in argv and argv[0] == "/torch/python"


def test_torch_compile_runner_trains_and_says_it_compiled(tmp_path, needs_torch):
    """benchmarks/torch_loop.py --compile as the suite runs it (in .venv-torch, tiny LeNet):
    inductor compiles during warm-up (gcc builds its C++ kernels), then the timed steps run."""
    env = clean_env()
    done = subprocess.run([TORCH_PYTHON, "benchmarks/torch_loop.py", "--model", "lenet", "--batch-size", "8",
                           "--steps", "2", "--warmup", "1", "--compile"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    row = wire.answer(done.stdout, "benchmarks/torch_loop.py")  # gluonperf's wire, loaded by its path there
    assert row["compiled"] is True and row["model"] == "lenet" and row["images_per_s"] > 0
    bad = subprocess.run([TORCH_PYTHON, "benchmarks/torch_loop.py", "--compile", "--warmup", "0"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--compile needs --warmup 1" in bad.stderr and "Traceback" not in bad.stderr


def test_hybridize_suite_ratios_carry_their_interval_and_verdict(tmp_path):
    """benchmarks/hybridize_suite.py as users run it: each mode against the book's loop, repeat by repeat."""
    out = tmp_path / "hs.json"
    p = command(["benchmarks/hybridize_suite.py", "--model", "mlp", "--quick", "--repeat", "3", "--json", str(out)],
                tmp_path)
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in records(out)}
    assert set(rows) == {"book loop", "gluonperf imperative", "gluonperf hybrid", "gluonperf static"}
    assert rows["book loop"]["verdict"] == "baseline" and rows["book loop"]["ratio"] == 1
    for name in ("gluonperf imperative", "gluonperf hybrid", "gluonperf static"):
        m = rows[name]
        assert m["model"] == "mlp" and m["task"] == "forward"
        assert m["ratio_n"] == 3 and len(m["round_ratios"]) == 3
        assert m["ratio_ci_low"] <= m["ratio"] <= m["ratio_ci_high"]
        assert m["verdict"] in ("faster", "slower", "same", "inconclusive")
        assert m["verdict_text"].startswith(name + " vs book loop: ") and "3 repeats" in m["verdict_text"]
        assert ("mlp forward: " + m["verdict_text"]) in p.stdout


def test_suite_stats_fields_and_limits(suite_module):
    ss = suite_module("suite_stats")
    assert ss.ratio_fields([None, None]) == {"ratio": None, "ratio_ci_low": None, "ratio_ci_high": None,
                                             "ratio_n": None, "ratio_level": None}
    f = ss.ratio_fields([1.0, 1.01, 0.99, 1.0, 1.005, 0.995], "time_ratio", "b", "a", words=("slower", "faster"))
    assert f["verdict"] == "same" and f["verdict_text"].startswith("b vs a: same within +-5%")
    f = ss.ratio_fields([1.5, 1.52, 1.49, None], "time_ratio", "b", "a", words=("slower", "faster"))
    assert f["verdict"] == "slower" and f["time_ratio_n"] == 3
    iv = ss.interval_of([1.2, 1.25, 1.3])
    assert ss.against_limit(iv, 1.4) == "met" and ss.against_limit(iv, 1.1) == "missed"
    assert ss.against_limit(iv, 1.25) == "inconclusive" and ss.against_limit(None, 1.4) is None


def test_inference_suite_sets_each_rung_against_each_pytorch_system_round_by_round(suite_module):
    """benchmarks/inference.py's reading of a Session's runs (made up here): per round,
    PyTorch's p90 over the rung's (single-stream) and the rung's samples/s over PyTorch's
    (offline), their geometric mean with its 95% interval and a verdict; the best rung of each
    scenario marked."""
    from gluonperf.inference.instances import Layout
    from gluonperf.inference.ladder import Rung
    from gluonperf.inference.serve import Plan, Session
    inference = suite_module("inference")
    torch = inference.TorchSystem("pytorch eager", "eager", "resnet18", (3, 8, 8), "calib.npy", "cache")
    layout = Layout(1, 2)
    plan = Plan(rungs=[Rung("static"), Rung("int8"), torch], layouts=[layout], scenarios=inference.SCENARIOS,
                batch_sizes=(4,), rounds=3, base={"model": "resnet18"})
    session = Session(plan, library=None)
    p90 = {"static": [0.02, 0.021, 0.022], "int8": [0.005, 0.0052, 0.0049], "pytorch eager": [0.03, 0.03, 0.033]}
    rate = {"static": [100.0, 98.0, 101.0], "int8": [400.0, 380.0, 390.0], "pytorch eager": [50.0, 51.0, 49.0]}
    for name in p90:
        session.runs[(layout, name, "single-stream", 1)] = [{"round": r, "p90_s": v, "loadgen_valid": True}
                                                            for r, v in enumerate(p90[name])]
        session.runs[(layout, name, "offline", 4)] = [{"round": r, "samples_per_s": v, "loadgen_valid": True}
                                                      for r, v in enumerate(rate[name])]
    records = {r.name: r.metrics for r in inference.against_torch(session, ["static", "int8"], ["pytorch eager"])}
    int8 = records["resnet18 int8 1x2 b1"]
    assert int8["vs_pytorch_eager_rounds"] == pytest.approx([6.0, 0.03 / 0.0052, 0.033 / 0.0049])
    assert int8["vs_pytorch_eager_ci_low"] < int8["vs_pytorch_eager"] < int8["vs_pytorch_eager_ci_high"]
    assert int8["vs_pytorch_eager_n"] == 3 and int8["vs_pytorch_eager_verdict"] == "faster" and int8["best"]
    offline = records["resnet18 int8 1x2 b4"]
    assert offline["vs_pytorch_eager_rounds"] == pytest.approx([8.0, 380 / 51, 390 / 49]) and offline["best"]
    assert "best" not in records["resnet18 static 1x2 b4"] and "vs_pytorch_eager" not in records[
        "resnet18 pytorch eager 1x2 b4"]
    lines = inference.readings(list(inference.against_torch(session, ["static", "int8"], ["pytorch eager"])))
    assert lines[0].startswith("resnet18 single-stream: gluonperf's best, int8, p90 5 ms; against pytorch eager ")


def test_inference_suite_quick_without_pytorch(tmp_path):
    """benchmarks/inference.py --quick --no-torch: gluonperf's rungs served side by side under
    LoadGen, the records with their figures and the best rung marked."""
    out = tmp_path / "inf.json"
    p = command(["benchmarks/inference.py", "--quick", "--no-torch", "--rungs", "static,int8", "--json", str(out)],
                tmp_path)
    assert p.returncode == 0, p.stderr
    rows = records(out)
    assert {(r["precision"], r["scenario"], r["batch_size"]) for r in rows} == {
        (rung, s, b) for rung in ("static", "int8") for s, b in (("single-stream", 1), ("offline", 8))}
    assert all(r["model"] == "resnet18" and r["input_shape"] == [3, 64, 64] and r["rounds"] == 2 for r in rows)
    assert sum(1 for r in rows if r.get("best")) == 2 and "PyTorch is left out: --no-torch" in p.stderr
    assert os.path.isdir(str(out)[:-len(".json")] + "-loadgen")

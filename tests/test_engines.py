"""bench engines: one process with N contexts, N processes on Horovod, N on dist_sync, the same
model and global batch, interleaved. What is checked is how the runs are made and reported
(who runs first, which command line each engine gets, the ratio's interval), not which engine
is faster: that depends on the machine. The quick run of every subcommand is in
tests/test_commands.py."""
import json
import os
import sys

import pytest

from gluonperf.scaling import engines
from gluonperf.runtime.horovod_launcher import available
from helpers import ROOT, run_leaving_nothing

QUICK = ["--model", "mlp", "--batch-size", "8", "--steps", "1", "--epochs", "2", "--rounds", "2"]


def test_each_engine_gets_its_command_line():
    single = engines.engine_argv("single", engines.Training("mlp", ["cpu0", "cpu1"], 16, 4, 3), "s.json", 60)
    assert single[1:3] == ["-m", "gluonperf.train"]
    assert single[single.index("--ctx") + 1] == "cpu0,cpu1" and single[single.index("--batch-size") + 1] == "32"
    assert single[single.index("--limit") + 1] == "128"  # 4 steps of the global batch
    hvd = engines.engine_argv("horovod", engines.Training("mlp", ["cpu0", "cpu1"], 16, 4, 3), "h.json", 60)
    assert hvd[1:9] == ["-m", "gluonperf.launch", "-n", "2", "--timeout", "60", "--engine", "horovod"]
    assert hvd[hvd.index("--kvstore") + 1] == "horovod" and hvd[hvd.index("--batch-size") + 1] == "16"
    ps = engines.engine_argv("dist_sync", engines.Training("mlp", ["cpu0", "cpu1"], 16, 4, 3), "d.json", 60)
    assert ps[ps.index("-s") + 1] == "1" and ps[ps.index("--ctx") + 1] == "cpu0"
    assert ps[ps.index("--kvstore") + 1] == "dist_sync" and ps[ps.index("--limit") + 1] == "128"
    with pytest.raises(ValueError, match="dist_sync workers"):
        engines.engine_argv("dist_sync", engines.Training("mlp", ["gpu0", "gpu1"], 16, 4, 3), "d.json", 60)
    with pytest.raises(ValueError, match="unknown engine"):
        engines.engine_argv("nccl", engines.Training("mlp", ["cpu0", "cpu1"], 16, 4, 3), "d.json", 60)


@pytest.mark.parametrize("kwargs, says", [
    (dict(contexts=["cpu0"]), "at least 2 contexts"),
    (dict(engines=["single", "single"]), "distinct"),
    (dict(epochs=1), "epochs >= 2"),
])
def test_bad_arguments_are_refused(kwargs, says):
    args = dict(model="mlp", contexts=["cpu0", "cpu1"], per_device_batch=8)
    args.update(kwargs)
    chosen = args.pop("engines", engines.ENGINES)
    with pytest.raises(ValueError, match=says):
        engines.compare_engines(engines.Training(**args), chosen)


def _write_epochs(argv, step, epochs):
    """What a run of `argv` leaves in its --json file: `epochs` train records of 16 images a `step`."""
    with open(argv[argv.index("--json") + 1], "w") as f:
        for epoch in range(1, epochs + 1):
            f.write(json.dumps({"bench": "train", "name": "epoch %d" % epoch, "train_images_per_s": 16 / step,
                                "kvstore": "flat"}) + "\n")


def test_rounds_rotate_and_each_ratio_has_its_interval(tmp_path, monkeypatch):
    """The runs replaced by a stand-in that records the order and writes train records."""
    ran = []

    def fake_run(argv, env, timeout, what, kind=None):
        engine = "horovod" if "horovod" in argv else "dist_sync" if "dist_sync" in argv else "single"
        ran.append(engine)
        _write_epochs(argv, {"single": 0.010, "horovod": 0.020, "dist_sync": 0.040}[engine] * (1 + 0.01 * len(ran)), 3)
    monkeypatch.setattr(engines, "run_train", fake_run)
    out = engines.compare_engines(engines.Training("mlp", ["cpu0", "cpu1"], 8, epochs=3), rounds=3)
    assert ran == ["single", "horovod", "dist_sync", "horovod", "dist_sync", "single",
                   "dist_sync", "single", "horovod"]
    by = {r.name: r.metrics for r in out}
    assert by["single"]["vs_baseline"] == 1 and len(by["single"]["samples_s"]) == 3
    assert by["horovod"]["vs_baseline_ci_low"] < by["horovod"]["vs_baseline"] < by["horovod"]["vs_baseline_ci_high"]
    assert by["horovod"]["vs_baseline"] == pytest.approx(0.5, rel=0.05) and by["horovod"]["verdict"] == "slower"
    assert by["dist_sync"]["vs_baseline"] == pytest.approx(0.25, rel=0.05)
    assert by["single"]["setup"] == "1 process, 2 contexts (kvstore flat)"


def test_bench_engines_without_horovod_leaves_it_out_or_refuses_it(tmp_path, monkeypatch, capsys):
    """Horovod hidden (its package raises ImportError on import). The bench runs in this process with
    the runs replaced by a stand-in (what is checked is which engines run and what is said, not the
    runs: test_commands runs bench engines as a user does); the refusal of --engines horovod runs as
    the command, for its exit status and its one line."""
    from gluonperf import bench
    hidden = tmp_path / "hidden"
    (hidden / "horovod").mkdir(parents=True)
    (hidden / "horovod" / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    monkeypatch.syspath_prepend(str(hidden))
    for name in [m for m in sys.modules if m == "horovod" or m.startswith("horovod.")]:
        monkeypatch.delitem(sys.modules, name)
    assert not available()
    ran = []
    monkeypatch.setattr(engines, "run_train",  # a stand-in for each run: the train records of 2 epochs
                        lambda argv, *a, **k: ran.append(argv) or _write_epochs(argv, 0.020 if "dist_sync" in argv
                                                                                else 0.010, 2))
    out = tmp_path / "out.json"
    assert bench.main(["engines", *QUICK, "--json", str(out)]) == 0
    stdout, stderr = capsys.readouterr()
    assert "Horovod is not installed, so the horovod engine is left out" in stderr
    assert len(ran) == 4 and not any("horovod" in argv for argv in ran)  # 2 rounds of single and dist_sync
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["name"] for r in rows] == ["single", "dist_sync"]
    assert rows[1]["vs_baseline_n"] == 2 and rows[1]["verdict"] in ("faster", "slower", "same", "inconclusive")
    assert "dist_sync against single: " in stdout
    path = os.pathsep.join([str(hidden), ROOT])
    done = run_leaving_nothing(["-m", "gluonperf.bench", "engines", *QUICK, "--engines", "single,horovod"],
                               PYTHONPATH=path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "install-horovod" in done.stderr, done.stderr


def test_a_run_that_fails_is_one_line(tmp_path):
    done = run_leaving_nothing(["-m", "gluonperf.bench", "engines", *QUICK, "--engines", "single,dist_sync",
                                "--timeout", "0.5"])
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "python -m gluonperf.bench: error: the run of engine dist_sync (round 1) failed (exit 124): launch: timed out"), \
        done.stderr


def test_ctrl_c_says_it_stopped_keeps_the_rounds_run_and_leaves_nothing(tmp_path, private_tmp):
    """Ctrl-C (SIGINT to the command's process group, as a terminal sends it) while an engine
    runs, after the first round: exit 130, the line saying so, the finished runs in --json and
    their table (marked partial), no process and no temporary file left. The engines are those
    every install has (single, dist_sync): what is checked is the stop, not an engine. Before,
    the run that the stop killed was reported as failed ("the run of engine horovod failed
    (exit 143)") and the bench exited 2."""
    import signal
    import subprocess
    import time
    import psutil
    from helpers import marked_env, processes_of
    tmp = private_tmp
    out = tmp_path / "engines.json"
    env, mark = marked_env(TMPDIR=str(tmp))
    proc = subprocess.Popen([sys.executable, "-m", "gluonperf.bench", "engines", *QUICK[:-1], "100",
                             "--engines", "single,dist_sync", "--json", str(out)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        runs, deadline = set(), time.time() + 120
        while len(runs) < 3 and time.time() < deadline:  # round 1's two runs done, round 2's first under way
            assert proc.poll() is None, proc.communicate()
            runs.update(p.pid for p in psutil.Process(proc.pid).children())
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "SIGINT received; stopped" in err and "failed" not in err and "Traceback" not in err, err
    assert "kept the 2 results" in err and str(out) in err, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["name"] for r in rows] == ["single", "dist_sync"] and all(r["partial"] for r in rows), rows
    assert all(r["rounds"] >= 1 and r["step_s"] > 0 for r in rows)
    assert "stopped before the end" in stdout and "single" in stdout
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]
    assert not list(tmp.iterdir())

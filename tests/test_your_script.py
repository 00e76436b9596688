"""`python -m gluonperf.profile -- python train.py`: plain Gluon training scripts written for
these tests (tests/user_scripts/), which know nothing of gluonperf, profiled from outside as
a user runs it; no process is left after any of them.

The input verdict is tested on a dataset made slow on purpose (a sleep of 100 ms a batch, in
the script's own thread, against a step of 5-25 ms) and on the same samples in memory (a wait
near 1 ms), with --threshold 50% over 20 steps: the two lie far apart on any machine, and a
round slowed by the noisy host does not carry the in-memory case's interval past the
threshold (with 20% and 10 steps it once did). No absolute speed is asserted.
"""
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

import pytest

from helpers import ROOT, marked_env, processes_of, run_leaving_nothing

PY = sys.executable
SCRIPT = os.path.join("tests", "user_scripts", "train_script.py")
QUICK = ["--steps", "10", "--warmup", "2", "--operator-steps", "2", "--ceiling", "quick"]


def profile(*flags, command, **env):
    return run_leaving_nothing(["-m", "gluonperf.profile", *flags, "--", *command], **env)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def named(rows, bench, name):
    return next(r for r in rows if r["bench"] == bench and r["name"] == name)


@pytest.fixture(scope="module")
def slow_and_memory(tmp_path_factory):
    """The same script on a slow dataset and on its data in memory, each profiled with --json."""
    tmp = tmp_path_factory.mktemp("runs")
    out = {}
    for data in ("slow", "memory"):
        path = tmp / ("%s.json" % data)
        done = profile(*QUICK, "--steps", "20", "--depth", "1", "--threshold", "50%", "--json", str(path),
                       command=[PY, SCRIPT, "--data", data, "--delay", "0.1", "--hidden", "1024",
                                "--steps", "30"])
        out[data] = (done, records(path), path)
    return out


@pytest.mark.parametrize("data, verdict", [("slow", "input-bound"), ("memory", "not input-bound")])
def test_a_slow_dataset_is_input_bound_and_the_same_data_in_memory_is_not(slow_and_memory, data, verdict):
    done, rows, _ = slow_and_memory[data]
    assert done.returncode == 0, done.stderr
    # the script's own output first, unchanged, then the report
    assert done.stdout.index("training finished") < done.stdout.index("steps measured after 2 warm-up")
    assert "Traceback" not in done.stderr
    found = named(rows, "script", "input verdict")
    assert found["verdict"] == verdict, found["finding"]
    assert found["finding"].startswith(verdict) and found["finding"] in done.stdout
    step = named(rows, "script", "step")
    assert step["steps"] == 20 and step["batch_size"] == 32 and step["contexts"] == "cpu0"
    assert step["images_per_s_ci_low"] <= step["images_per_s"] <= step["images_per_s_ci_high"]
    assert len(step["samples_s"]) == 20 and step["model"] == "HybridSequential" and not step["partial"]
    wait = named(rows, "script", "waiting for data")
    assert wait["share_ci_low"] <= wait["share"] <= wait["share_ci_high"] and wait["share_n"] == 10  # rounds of 2 steps
    assert 0 < named(rows, "script", "update (Trainer.step)")["share"] < 1
    ops = [r for r in rows if r["bench"] == "script-operators"]
    fc = next(r for r in ops if r["op"] == "FullyConnected")
    assert fc["gflop_per_s"] > 0 and fc["of_ceiling"] > 0  # the model's FLOPs, against the ceiling
    assert any(r["bench"] == "blocks" and r["name"] == "0" for r in rows)  # the Block the Trainer updates
    assert named(rows, "script", "memory")["rss_peak_bytes"] > 0
    assert all("env" in r for r in rows)


def test_the_input_verdicts_num_workers_is_to_try_with_the_tune_command(slow_and_memory):
    """A change is never stated as a gain it has not measured: num_workers can make a script slower
    where the cores are busy, so the input-bound verdict gives it as to try, with tune -- that settles it."""
    done, rows, _ = slow_and_memory["slow"]
    found = named(rows, "script", "input verdict")
    assert "to try: give the DataLoader num_workers" in found["finding"]
    assert "python -m gluonperf.tune --levers data -- " in found["finding"]
    data = next(r for r in rows if r["bench"] == "advice" and r["lever"] == "data")
    assert data["measured"] is False and data["tune"].startswith("python -m gluonperf.tune --levers data -- python")
    assert data["tune"] in done.stdout and "to try (not measured here):" in done.stdout
    assert "\n- give the DataLoader num_workers" in done.stdout  # listed, never numbered
    # the script reads its loss with asscalar each step: that line is named too
    wait = next(r for r in rows if r["bench"] == "advice" and r["lever"] == "wait")
    assert wait["where"].startswith(os.path.join("tests", "user_scripts", "train_script.py:"))
    assert "asscalar()" in wait["code"] and wait["calls_per_step"] == 1
    memory = slow_and_memory["memory"][1]
    assert not any(r["bench"] == "advice" and r["lever"] == "data" for r in memory)


def test_compare_and_report_read_two_runs_of_a_script(slow_and_memory, tmp_path):
    """Before and after a change (the data moved into memory): compare judges the step faster."""
    old, new = slow_and_memory["slow"][2], slow_and_memory["memory"][2]
    done = subprocess.run([PY, "-m", "gluonperf.compare", str(old), str(new)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    line = next(l for l in done.stdout.splitlines() if l.startswith("script/step "))
    assert "improved" in line, done.stdout
    html = tmp_path / "report.html"
    done = subprocess.run([PY, "-m", "gluonperf.report", str(old), str(new), "-o", str(html)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "input verdict" in html.read_text(), done.stderr


@pytest.fixture(scope="module")
def bulk_and_split(tmp_path_factory):
    """One hybridized script on two contexts, in the module form, profiled as it runs (bulk execution
    on) and with --split-bulk: {split?: (CompletedProcess, records)}. The bulk run is also the two
    contexts' and the module form's (one run where each had its own)."""
    tmp = tmp_path_factory.mktemp("bulk")
    runs = {}
    for flags in ([], ["--split-bulk"]):
        out = tmp / ("split.json" if flags else "bulk.json")
        done = profile(*QUICK, *flags, "--depth", "0", "--json", str(out),
                       command=[PY, "-m", "tests.user_scripts.train_script", "--ctx", "cpu0,cpu1", "--hybridize",
                                "--hidden", "256", "--steps", "24"])
        runs[bool(flags)] = (done, records(out) if out.exists() else [])
    return runs


def test_two_contexts_and_the_module_form(bulk_and_split):
    done, rows = bulk_and_split[False]
    assert done.returncode == 0, done.stderr
    assert "training finished" in done.stdout
    assert named(rows, "script", "step")["contexts"] == "cpu0,cpu1"
    ops = {r["op"] for r in rows if r["bench"] == "script-operators"}
    assert {"cpu0 waiting (other contexts working)", "cpu1 waiting (other contexts working)"} & ops, ops
    assert "bulk segments" in done.stderr  # hybridized: the profiler names bulk segments


def test_waits_in_an_mxnet_data_iterator_count():
    done = profile("--steps", "10", "--warmup", "2", "--operator-steps", "0", "--depth", "0", "--ceiling", "off",
                   command=[PY, os.path.join("tests", "user_scripts", "iter_script.py")])
    assert done.returncode == 0 and "done" in done.stdout, done.stderr
    assert "input-bound: " in done.stdout and "the loader (Slow in the script's own thread)" in done.stdout


def test_a_script_that_fails_in_its_warm_up_is_one_line():
    done = profile(*QUICK, command=[PY, SCRIPT, "--fail-at", "1"])
    assert done.returncode == 1 and "RuntimeError" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "python -m gluonperf.profile: the script ended after 1 step, before the first measured one (--warmup steps "
        "come first); the script exited with status 1")


def test_a_script_that_raises_keeps_its_traceback_and_status():
    done = profile(*QUICK, command=[PY, SCRIPT, "--fail-at", "7"])
    assert done.returncode == 1
    assert "RuntimeError: the script's own failure at step 7" in done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m gluonperf.profile: the script exited with status 1; measured so far: 5 steps")
    assert "steps measured" not in done.stdout  # one line, no tables


def test_a_script_without_a_trainer_is_one_line():
    done = profile(*QUICK, command=[PY, SCRIPT, "--no-trainer", "--steps", "3"])
    assert done.returncode == 0 and "training finished" in done.stdout
    lines = [l for l in done.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "gluon.Trainer.step(batch_size)" in lines[0], done.stderr


@pytest.mark.parametrize("command, message", [
    (["no-such-program"], "error: cannot run 'no-such-program': no such program"),
    ([], "error: no command after --"),
    ([PY, "-c", "print('not training')"], "the script never imported MXNet"),
    ([PY, "-E", SCRIPT, "--steps", "2"], "python -E or -I"),
])
def test_what_cannot_be_profiled_is_one_line(command, message):
    done = profile("--ceiling", "off", command=command)
    assert message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == (2 if "error:" in message else 0)


def test_a_bad_flag_is_one_line():
    done = profile("--steps", "0", command=[PY, SCRIPT])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "--steps" in done.stderr, done.stderr


@pytest.fixture(scope="module")
def stopped_with_workers(tmp_path_factory):
    """A script of 1000 steps whose DataLoader has 2 worker processes, stopped by --stop once its
    steps are measured: (CompletedProcess, records). One run for the stop's test and the workers'
    memory (each had its own); stopped, its workers must still leave nothing (run_leaving_nothing,
    and conftest's check of the temporary directory)."""
    out = tmp_path_factory.mktemp("stop") / "workers.json"
    done = profile(*QUICK, "--stop", "--depth", "0", "--json", str(out),
                   command=[PY, SCRIPT, "--workers", "2", "--steps", "1000"])
    return done, records(out) if out.exists() else []


def test_stop_ends_the_script_after_its_measured_steps(stopped_with_workers):
    done, _ = stopped_with_workers
    assert done.returncode == 0, done.stderr
    assert "training finished" not in done.stdout and "steps measured" in done.stdout
    assert "stopped the script after its measured steps" in done.stderr


def test_a_users_own_sitecustomize_and_pythonpath_still_work(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    (mine / "helper_of_mine.py").write_text("VALUE = 42\n")
    script = tmp_path / "train.py"
    script.write_text(open(os.path.join(ROOT, SCRIPT)).read().replace(
        'print("training finished")',
        'import os, sitecustomize, helper_of_mine, mxnet.ndarray.register\n'
        'print("training finished", os.environ.get("USER_SITE_RAN"), helper_of_mine.VALUE,\n'
        '      sitecustomize.__file__)\n'
        # MXNet's operators came from gluonperf's cache of their code (gluonperf/runtime/operator_code.py)
        'print("operator code cached:", "exec" in vars(mxnet.ndarray.register))'))
    done = profile(*QUICK, "--depth", "0", command=[PY, str(script), "--steps", "16"],
                   PYTHONPATH=os.pathsep.join([str(mine), ROOT]))
    assert done.returncode == 0, done.stderr
    assert "training finished yes 42 %s" % (mine / "sitecustomize.py") in done.stdout
    assert "operator code cached: True" in done.stdout
    assert "steps measured" in done.stdout


def test_ctrl_c_stops_the_script_and_its_workers_and_keeps_a_partial_report(tmp_path, private_tmp):
    out = tmp_path / "partial.json"
    tmp = private_tmp  # a private temporary directory: the workers leave no pymp-* folder in it
    env, mark = marked_env(TMPDIR=str(tmp))
    proc = subprocess.Popen([PY, "-m", "gluonperf.profile", "--steps", "100000", "--warmup", "2", "--ceiling", "off",
                             "--json", str(out), "--", PY, SCRIPT, "--data", "slow", "--workers", "2",
                             "--steps", "1000000"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True)
    reader.start()
    try:
        deadline = time.time() + 120
        seen = []
        while not any(l.startswith("epoch done: 32 steps") for l in seen) and time.time() < deadline:
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=60)
    while not lines.empty():
        seen.append(lines.get())
    stdout = "".join(seen)
    assert proc.returncode == 130, err
    assert "KeyboardInterrupt" in err and "the script was stopped by SIGINT" in err
    assert "(partial)" in stdout and "of each step" in stdout and "for data (95% CI" in stdout  # any verdict
    step = named(records(out), "script", "step")
    assert step["partial"] and step["steps"] >= 20
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]
    assert not list(tmp.iterdir())


def test_a_loop_marked_with_the_python_api():
    done = run_leaving_nothing([os.path.join("tests", "user_scripts", "marked_loop.py")])
    assert done.returncode == 0, done.stderr
    assert "phase after the loop: done kept steps: 10" in done.stdout
    assert "the loop: 8 steps measured" in done.stdout and "multi_sgd_update" in done.stdout
    assert "waits for data" in done.stdout


def test_each_worker_of_a_dist_sync_job_is_profiled_and_rank_0_reports():
    done = profile("--steps", "5", "--warmup", "1", "--operator-steps", "0", "--depth", "0", "--ceiling", "off",
                   command=[PY, "-m", "gluonperf.launch", "-n", "2", "-s", "1", "--timeout", "120", "--", PY, SCRIPT,
                            "--steps", "8", "--kvstore", "dist_sync"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("steps measured") == 1
    assert "2 processes stepped; reported: rank 0; the others' median step: rank 1" in done.stderr


def test_mxnets_image_record_iter_is_the_loader_found(tmp_path):
    """ImageRecordIter (MXNet's C++ pipeline, an MXDataIter) on a .rec made offline: its batches
    are the waits, and it prefetches in its own threads. The .rec is made in this process by the
    library (the command that makes it, `gluonperf.dataset make --rec`, is tested in test_image_data)."""
    from gluonperf.training.image_data import make_folder, pack_rec
    folder = str(tmp_path / "imgs")
    make_folder(folder, images_per_class=16, size=40)
    pack_rec(folder, folder)
    out = tmp_path / "rec.json"
    done = profile("--steps", "10", "--warmup", "2", "--operator-steps", "0", "--depth", "0", "--ceiling", "off",
                   "--json", str(out), command=[PY, os.path.join("tests", "user_scripts", "rec_script.py"),
                                                str(tmp_path / "imgs.rec")])
    assert done.returncode == 0, done.stderr
    assert "trained 30 steps" in done.stdout
    rows = records(out)
    assert named(rows, "script", "step")["steps"] == 10
    verdict = named(rows, "script", "input verdict")
    assert verdict["loader"] == "MXDataIter" and "prefetching" in verdict["finding"], verdict["finding"]


def test_the_dataloaders_worker_processes_count_in_the_memory(stopped_with_workers):
    done, rows = stopped_with_workers
    assert done.returncode == 0, done.stderr
    memory = named(rows, "script", "memory")
    assert memory["child_processes"] == 2 and memory["children_peak_bytes"] > 0
    assert memory["rss_peak_bytes"] > 0


def test_split_bulk_gives_a_hybridized_models_operators_their_flops(bulk_and_split):
    """A hybridized graph runs in bulk segments, named by the operators they join (no FLOPs);
    --split-bulk runs the script with bulk execution off: one row per operator, with GFLOP/s."""
    runs = {}
    for split, (done, rows) in bulk_and_split.items():
        assert done.returncode == 0, done.stderr
        runs[split] = (done, [r for r in rows if r["bench"] == "script-operators"])
    done, ops = runs[False]
    assert any("," in r["op"] for r in ops) and "--split-bulk" in done.stderr
    assert not any(r.get("gflop_per_s") for r in ops)
    done, ops = runs[True]
    assert not any("," in r["op"] for r in ops)
    fc = next(r for r in ops if r["op"] == "FullyConnected")
    assert fc["gflop_per_s"] > 0 and fc["env"]["env"]["MXNET_EXEC_BULK_EXEC_TRAIN"] == "0"
    assert "bulk execution off" in done.stderr

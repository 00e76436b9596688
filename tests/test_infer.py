"""`python -m gluonperf.infer` as a user runs it: the default command at short durations, the
server scenario with what to deploy, bad input, Ctrl-C; and an instance that cannot load its
rung. Each run is a subprocess from a clean environment, with a timeout, leaving no process
and no shared-memory segment behind. Nothing here depends on how fast the machine is: the
checks are on what the records hold and how they hang together, never on a figure's size."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, marked_env, processes_of, run_leaving_nothing
from gluonperf.inference.samples import SHM_DIR

PY = sys.executable
SHORT = ["--duration", "0.05"]


def segments():
    return {f for f in os.listdir(SHM_DIR) if f.startswith("gluonperf-")}


def records(path):
    return [json.loads(line) for line in open(path)]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    """The default command (LeNet, every rung built here, every layout of the cores,
    single-stream and offline) at short durations, once for the tests below."""
    out = tmp_path_factory.mktemp("infer") / "run.json"
    before = segments()
    p = run_leaving_nothing(["-m", "gluonperf.infer", *SHORT, "--json", str(out)], timeout=400)
    return p, out, segments() - before


def test_the_default_command_serves_every_rung_layout_and_scenario(default_run):
    p, out, left = default_run
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and not left
    from gluonperf.inference.instances import core_groups, factorizations
    from gluonperf.inference.ladder import available
    rungs = [r for r, why in available().items() if why is None]
    layouts = [str(l) for l in factorizations(len(core_groups()))]
    rows = records(out)
    seen = {(r["precision"], r["layout"], r["scenario"], r["batch_size"]) for r in rows}
    assert seen == {(rung, lay, s, b) for rung in rungs for lay in layouts
                    for s, b in (("single-stream", 1), ("offline", 1), ("offline", 64))}
    assert len(rows) == len(seen)
    for r in rows:
        assert r["bench"] == "inference" and r["env"]["mxnet"] and r["rounds"] == 3
        assert r["primary_metric"] == ("p90_s" if r["scenario"] == "single-stream" else "samples_per_s")
        assert r[r["primary_metric"]] > 0 and isinstance(r["loadgen_valid"], bool)
        assert len(r["loadgen_logs"]) == 3
        for log in r["loadgen_logs"]:  # LoadGen's own folders are kept beside --json
            assert os.path.exists(os.path.join(str(out)[:-len(".json")] + "-loadgen", log, "mlperf_log_summary.txt"))
        if r["scenario"] == "single-stream":
            assert r["p50_s"] <= r["p90_s"] <= r["p99_s"] and r["p90_s"] <= r["early_stopping_p90_s"]
        if r["precision"] == "static":
            assert r["ratio"] == 1.0 and r["verdict"] == "baseline"
        else:
            assert r["ratio_n"] == 3 and r["ratio_ci_low"] <= r["ratio"] <= r["ratio_ci_high"]
            assert r["verdict"] in ("faster", "slower", "same", "inconclusive")


def test_the_default_commands_tables_and_lines(default_run):
    p, out, _ = default_run
    tables = [t for t in p.stdout.split("\n\n") if "----" in t]
    assert [t.splitlines()[0].split(",")[0] for t in tables] == ["single-stream", "offline"]
    for t in tables:  # fits a terminal (100 columns under a pipe)
        assert len(next(line for line in t.splitlines() if line.startswith("---"))) <= 100, t
    assert "p90 (" in tables[0] and "samples/s" in tables[1]
    assert re.search(r"^single-stream: the lowest p90: \w+ \d+x\d+ b1, [\d.,]+ [mu]?s", p.stdout, re.M)
    assert re.search(r"^offline: the most samples/s: \w+ \d+x\d+ b\d+, [\d.,]+/s; of the rungs against static, fp32",
                     p.stdout, re.M)
    assert re.search(r"infer: up to \d+ LoadGen runs .*: at least \d+ s", p.stderr)
    assert "note: each instance runs with OMP_NUM_THREADS" in p.stderr


def test_the_server_search_says_what_to_deploy(tmp_path):
    out = tmp_path / "server.json"
    before = segments()
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", "mlp", "--precision", "static", "--layouts", "1x1",
                             "--scenario", "server", "--latency-bound", "50ms", "--max-batch", "4", *SHORT,
                             "--json", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr
    assert segments() - before == set()
    rows = records(out)
    assert sorted(r["name"] for r in rows) == ["static 1x1 b1", "static 1x1 b4 window 5ms"]
    for r in rows:
        assert r["scenario"] == "server" and r["latency_bound_s"] == 0.05 and r["primary_metric"] == \
            "rate_at_bound_per_s"
        valid = [rate for rate, ok in zip(r["trial_rates"], r["trial_valid"]) if ok]
        assert r["trials"] == len(r["trial_rates"]) == len(r["loadgen_logs"]) >= 1
        if valid:  # the answer is the highest valid rate run, below every invalid one above it
            assert r["rate_at_bound_per_s"] == max(valid) and r["loadgen_valid"] is True
            assert r.get("rate_invalid_per_s", float("inf")) > r["rate_at_bound_per_s"]
        else:
            assert "rate_at_bound_per_s" not in r and r["loadgen_valid"] is False
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith(("deploy static 1x1", "nothing meets the bound")), p.stdout
    if last.startswith("deploy"):
        assert "python -m gluonperf.infer --model mlp --precision static --layouts 1x1 --scenario server " \
               "--latency-bound 50ms" in last


def test_multi_stream_splits_a_query_among_the_instances(tmp_path):
    out = tmp_path / "multi.json"
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", "mlp", "--precision", "static", "--layouts", "2x1",
                             "--scenario", "multi-stream", "--batch-sizes", "8", "--rounds", "1", *SHORT,
                             "--json", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr
    (r,) = records(out)
    assert (r["name"], r["scenario"], r["batch_size"], r["primary_metric"]) == ("static 2x1 b8", "multi-stream", 8,
                                                                                 "p99_s")
    assert r["queries"] >= 662 and r["p50_s"] <= r["p99_s"]  # the fewest with which early stopping can pass a p99
    assert "multi-stream, mlp on cpu(0)" in p.stdout


@pytest.mark.parametrize("argv, words", [
    (["--scenario", "single-stream,batch"], "unknown scenario batch"),
    (["--precision", "fp32,fp8"], "unknown rung fp8"),
    (["--latency-bound", "0"], "'0' must be above 0"),
    (["--latency-bound", "fast"], "is not a duration"),
    (["--scenario", "server"], "--scenario server needs --latency-bound"),
    (["--layouts", "64x1"], "needs 64 cores"),
    (["--model", "{tmp}/net-symbol.json", "--input-shape", "1,28,28"], "no {tmp}/net-0000.params beside it"),
    (["--model", "nonet"], "unknown model 'nonet'"),
])
def test_bad_input_is_one_line_and_exit_2(argv, words, tmp_path):
    (tmp_path / "net-symbol.json").write_text("{}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    p = run_leaving_nothing(["-m", "gluonperf.infer", *argv], timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and words.replace("{tmp}", str(tmp_path)) in lines[0], p.stderr
    assert p.stdout == ""


def test_ctrl_c_keeps_what_was_measured_and_leaves_nothing(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "run.json"
    env, mark = marked_env(TMPDIR=str(tmp))
    before = segments()
    proc = subprocess.Popen([PY, "-m", "gluonperf.infer", "--model", "mlp", "--duration", "0.5", "--json", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    logs = str(out)[:-len(".json")] + "-loadgen"
    try:  # once a LoadGen run has finished (the next one's summary written) and others are under way
        deadline = time.time() + 300
        while time.time() < deadline and sum(
                "mlperf_log_summary.txt" in files for _, _, files in os.walk(logs)) < 2:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "SIGINT received" in stderr and "kept the" in stderr and "Traceback" not in stderr, stderr
    rows = records(out)
    assert rows and all(r["bench"] == "inference" and 1 <= r["rounds"] <= 3 for r in rows)
    assert all(r.get("partial") is (r["rounds"] < 3) or r["rounds"] == 3 and "partial" not in r for r in rows)
    assert "stopped before the end" in stdout
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]
    assert segments() - before == set() and not list(tmp.iterdir())


def test_an_instance_that_cannot_load_its_rung_says_why(tmp_path):
    from gluonperf.inference.instances import InstanceError, Layout, Pool
    from gluonperf.inference.ladder import Rung
    from gluonperf.inference.samples import SampleLibrary
    import numpy as np
    rung = Rung("static", spec="mlp", params=str(tmp_path / "missing.params"), hybridize="static",
                input_shape=(512,))
    with SampleLibrary.create(np.zeros((4, 512), np.float32)) as library:
        pool = Pool(rung.to_text(), Layout(1, 1), library.spec(), "cpu").start()
        try:
            with pytest.raises(InstanceError, match=r"rung static, layout 1x1: instance 0: .*missing.params"):
                pool.ready(timeout=120)
        finally:
            pool.close()

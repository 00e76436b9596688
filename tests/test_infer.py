"""`python -m gluonperf.infer` as a user runs it: from training to deployment in two commands
(a LeNet trained a few steps with `train --export`, then served from its files with
`--calib-data digits`: every rung built here with its accuracy and cold start, the rung that
cannot be built in one line), the server scenario with what to deploy, multi-stream under
every layout, bad input, Ctrl-C; and an instance that cannot load its rung. Each run is a
subprocess from a clean environment, with a timeout, leaving no process and no shared-memory
segment behind. Nothing here depends on how fast the machine is: the checks are on what the
records hold and how they hang together, never on a figure's size."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, marked_env, processes_of, run_leaving_nothing
from gluonperf.inference.deploy import FLOAT32
from gluonperf.inference.samples import SHM_DIR

PY = sys.executable
SHORT = ["--duration", "0.05"]


def segments():
    return {f for f in os.listdir(SHM_DIR) if f.startswith("gluonperf-")}


def left_since(before):
    """The segments made since `before` whose maker ('gluonperf-PID-...') has ended: the other
    test worker's runs make segments of their own while this one's run, and unlink them as they end."""
    import psutil
    new = {f for f in segments() - before if not psutil.pid_exists(int(f.split("-")[1]))}
    return new & segments()  # still there after their makers were seen gone


def records(path):
    return [json.loads(line) for line in open(path)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """LeNet trained a few steps on digits and written as deployed, as a user does it:
    `train --export PREFIX` (PREFIX-symbol.json, PREFIX-0000.params)."""
    prefix = str(tmp_path_factory.mktemp("deploy") / "lenet")
    p = run_leaving_nothing(["-m", "gluonperf.train", "--model", "lenet", "--dataset", "digits", "--epochs", "1",
                             "--limit", "512", "--export", prefix], timeout=300)
    assert p.returncode == 0, p.stderr
    return prefix


@pytest.fixture(scope="module")
def served(exported, tmp_path_factory):
    """The second of the two commands: `infer --model PREFIX-symbol.json --calib-data digits`,
    every rung built here and both scenarios by default; short runs, one instance of one thread
    (the layouts: the multi-stream test), 2 rounds and one cold start a rung, so that it costs
    seconds. Once for the tests below."""
    out = tmp_path_factory.mktemp("infer") / "run.json"
    before = segments()
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", exported + "-symbol.json", "--calib-data", "digits",
                             *SHORT, "--layouts", "1x1", "--rounds", "2", "--cold-starts", "1", "--json", str(out)],
                            timeout=400)
    assert p.returncode == 0, p.stderr
    return p, records(out), out, left_since(before)


def built_here():
    """The rungs an exported model has by default on this CPU and build: every one of MXNet's available
    but fp32 (the runtimes' are asked by name)."""
    from gluonperf.inference.ladder import MXNET_RUNGS, available
    return [r for r, why in available(MXNET_RUNGS).items() if why is None and r != "fp32"]


def test_the_exported_model_is_served_on_every_rung_built_here(served):
    p, rows, out, left = served
    assert "Traceback" not in p.stderr and not left
    timed = [r for r in rows if r.get("scenario") in ("single-stream", "offline")]
    seen = {(r["precision"], r["layout"], r["scenario"], r["batch_size"]) for r in timed}
    assert seen == {(rung, "1x1", s, b) for rung in built_here()
                    for s, b in (("single-stream", 1), ("offline", 1), ("offline", 64))}
    assert len(timed) == len(seen)
    for r in timed:
        assert r["bench"] == "inference" and r["env"]["mxnet"] and r["rounds"] == 2
        assert r["model"].endswith("lenet-symbol.json") and r["input_shape"] == [1, 28, 28]
        assert r["primary_metric"] == ("p90_s" if r["scenario"] == "single-stream" else "samples_per_s")
        assert r[r["primary_metric"]] > 0 and isinstance(r["loadgen_valid"], bool)
        assert len(r["loadgen_logs"]) == 2
        for log in r["loadgen_logs"]:  # LoadGen's own folders are kept beside --json
            assert os.path.exists(os.path.join(str(out)[:-len(".json")] + "-loadgen", log, "mlperf_log_summary.txt"))
        if r["scenario"] == "single-stream":
            assert r["p50_s"] <= r["p90_s"] <= r.get("p99_s", r["p90_s"]) and r["p90_s"] <= r["early_stopping_p90_s"]
            # a p99 only from runs of 662 queries or more (LoadGen's early stopping's least for it)
            assert ("p99_s" in r) == (r["fewest_queries_per_run"] >= 662 if "fewest_queries_per_run" in r else True)
        if r["precision"] == "static":
            assert r["ratio"] == 1.0 and r["verdict"] == "baseline"
        else:
            assert r["ratio_n"] == 2 and r["ratio_ci_low"] <= r["ratio"] <= r["ratio_ci_high"]
            assert r["verdict"] in ("faster", "slower", "same", "inconclusive")


def test_every_rung_carries_its_accuracy_against_fp32_static(served):
    """Held out: the 835 digits of the test split (899) not used to calibrate INT8 (64); each rung's
    accuracy on them and its change against static's with the paired interval, in every record
    of the rung; static's outputs are the reference, so its own record has its accuracy alone."""
    _, rows, _, _ = served
    judged = [r for r in rows if not r.get("error")]
    assert {r["precision"] for r in judged} == set(built_here())
    static = {r["accuracy"] for r in judged if r["precision"] == "static"}
    assert len(static) == 1
    for r in judged:
        assert (r["calib_data"], r["calibration_n"], r["held_out_n"], r["evaluated_n"]) == ("digits", 64, 835, 835)
        assert 0 <= r["accuracy"] <= 1 and "outputs" not in r and r["build_s"] >= 0 and r["note"]
        if r["precision"] == "static":
            assert "accuracy_change" not in r and "top1_agreement" not in r
            continue
        assert r["accuracy_ref"] in static and r["accuracy_n"] == r["agreement_n"] == 835
        assert r["accuracy_change"] == pytest.approx(r["accuracy"] - r["accuracy_ref"])
        assert -1 <= r["accuracy_change_ci_low"] <= r["accuracy_change"] <= r["accuracy_change_ci_high"] <= 1
        assert r["accuracy_change_ci_low"] < r["accuracy_change_ci_high"]  # an interval, not a point
        assert "Newcombe" in r["accuracy_method"] and r["accuracy_level"] == 0.95
        assert 0 <= r["top1_agreement"] <= 1 and r["max_abs_diff"] >= 0
        if r["precision"] == "fused":  # the same function, folded: the same answers
            assert r["top1_agreement"] == 1 and r["accuracy_change"] == 0


def test_each_rung_is_deployable_only_when_its_interval_clears_99_percent_of_static(served):
    """The ladder table's `deployable`, rung by rung, is the gate worked out by hand from the
    records: float32 rungs always; a rung below fp32 when static's accuracy plus the lower end of
    its paired interval is at least 99% of static's (the default --accuracy-target)."""
    p, rows, _, _ = served
    ladder = next(t for t in p.stdout.split("\n\n") if t.startswith("precision ladder"))
    assert "deployable" in ladder.splitlines()[1] and "99% of fp32 static's" in ladder.splitlines()[0]
    for r in rows:
        if r.get("error") or r.get("scenario") != "offline":
            continue
        assert r["accuracy_target"] == 0.99
        row = next(line for line in ladder.splitlines() if line.startswith(r["precision"] + " "))
        below = r["precision"] not in FLOAT32
        keeps = not below or r["accuracy_ref"] + r["accuracy_change_ci_low"] >= 0.99 * r["accuracy_ref"]
        assert (" yes " in row, " no " in row) == (keeps, not keeps), row


def server_deploy_line(tmp_path, *argv):
    """`infer ... --scenario server` on static and INT8, unbatched, one layout: (records, last line)."""
    out = tmp_path / "gate.json"
    p = run_leaving_nothing(["-m", "gluonperf.infer", *argv, "--precision", "static,int8", "--layouts", "1x1",
                             "--scenario", "server", "--latency-bound", "50ms", "--batch-window", "0",
                             "--cold-starts", "0", *SHORT, "--json", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr
    rows = {r["precision"]: r for r in records(out) if r["scenario"] == "server"}
    return rows, deploy_line(p.stdout)


def deploy_line(stdout):
    """The deploy line (or "nothing meets the bound"): the last of the readings but for the code
    that serves it, printed under it indented."""
    return [line for line in stdout.strip().splitlines() if line.startswith(("deploy", "nothing"))][-1]


def faster(rows):
    rates = {k: r.get("rate_at_bound_per_s") or 0 for k, r in rows.items()}
    return rates["int8"] > rates["static"]


def test_without_measured_accuracy_no_rung_below_fp32_is_recommended(tmp_path):
    """Random weights, random samples: INT8 is never the deploy line's answer; when it had the
    higher rate, the line names it with the command that measures its accuracy."""
    rows, last = server_deploy_line(tmp_path, "--model", "mlp")
    assert not last.startswith("deploy int8") and "accuracy not measured" in rows["int8"]["accuracy_note"]
    if faster(rows):
        assert "int8 1x1 b1 would win at" in last and "if its accuracy holds" in last
        assert "--params TRAINED.params --calib-data LABELLED_DATA --precision static,int8" in last


def test_with_measured_accuracy_a_rung_below_fp32_that_keeps_it_is_deployable(exported, tmp_path):
    """The trained LeNet, judged on labelled digits, with a target it clears by construction
    (50% of static's accuracy: INT8 of the same net keeps far more): INT8 is deployable, so the
    line deploys the configuration with the higher rate, whichever rung it runs, unless the
    confirmation's rounds chose the other (a lower p99, or a tie named for more bits)."""
    rows, last = server_deploy_line(tmp_path, "--model", exported + "-symbol.json", "--calib-data", "digits",
                                    "--accuracy-target", "50%")
    int8 = rows["int8"]
    assert int8["accuracy_ref"] + int8["accuracy_change_ci_low"] >= 0.5 * int8["accuracy_ref"]
    searched, other = ("int8", "static") if faster(rows) else ("static", "int8")
    assert last.startswith("deploy %s 1x1 b1" % searched) or (
        last.startswith("deploy %s 1x1 b1" % other) and "confirmed in 3 interleaved rounds" in last), last
    assert "would" not in last


def test_a_rung_that_cannot_be_built_is_one_line_and_the_others_run(served):
    p, rows, _, _ = served
    (fp32,) = [r for r in rows if r["precision"] == "fp32"]
    assert fp32["name"] == "fp32" and "no Python Block" in fp32["error"] and "\n" not in fp32["error"]
    tables = p.stdout.split("\n\n")
    assert any(t.startswith("not run here") and "fp32" in t and "no Python Block" in t for t in tables)


def test_each_rung_starts_cold_in_parts(served):
    _, rows, _, _ = served
    colds = [r for r in rows if r.get("scenario") == "cold-start"]
    assert sorted(r["precision"] for r in colds) == sorted(built_here())
    for r in colds:
        assert r["name"] == r["precision"] + " cold-start" and r["primary_metric"] == "total_s"
        assert r["rounds"] == 1 and r["batch_sizes"] == [1, 64] and r["steady_calls"] == 10
        (parts,) = r["round_parts"]
        assert all(parts[k] > 0 and r[k] == parts[k] for k in parts)
        assert parts["total_s"] == pytest.approx(parts["import_s"] + parts["load_s"] + parts["first_call_s"])
        assert "accuracy" in r  # the rung's fields come along


def test_every_record_keeps_the_estimate_it_was_measured_under(served):
    _, rows, _, _ = served
    assert rows and all(r["estimated_s"] > 0 and r["estimate_after_s"] > 0 and r["budget_s"] == 600
                        and r["batch_sizes_fitted"] is True for r in rows if not r.get("error"))


def test_the_tables_and_lines(served):
    p, _, _, _ = served
    tables = [t for t in p.stdout.split("\n\n") if "----" in t]
    assert [t.splitlines()[0].split(",")[0] for t in tables] == ["single-stream", "offline", "precision ladder",
                                                                "cold start", "not run here"]
    for t in tables:  # fits a terminal (100 columns under a pipe)
        assert len(next(line for line in t.splitlines() if line.startswith("---"))) <= 100, t
    assert "p90 (" in tables[0] and "samples/s" in tables[1]
    assert "accuracy_change (95% CI)" in tables[2] and "835 held-out samples of digits" in tables[2]
    assert "total (" in tables[3] and "first_call (" in tables[3]
    assert re.search(r"^single-stream: the lowest p90: [\w-]+ 1x1 b1, [\d.,]+ [mu]?s", p.stdout, re.M)
    assert re.search(r"^offline: the most samples/s: [\w-]+ 1x1 b\d+, [\d.,]+/s; of the rungs against static, ",
                     p.stdout, re.M)
    assert re.search(r"infer: \d+ cold starts, then up to \d+ LoadGen runs .*: at least \d+ s", p.stderr)
    # the estimate, once the rungs are judged (what it says is tested in test_inference_estimate.py)
    estimate = re.search(r"^infer: about \d+ (s|min) from here \(.*\), after .*\(static: [\d.]+ [mu]?s at batch 1",
                         p.stderr, re.M)
    assert estimate and estimate.start() > p.stderr.index("infer: judging each rung"), p.stderr
    assert "infer: judging each rung on 835 held-out samples of digits" in p.stderr
    assert "note: each instance runs with OMP_NUM_THREADS" in p.stderr


def test_the_server_search_says_what_to_deploy(tmp_path):
    out = tmp_path / "server.json"
    before = segments()
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", "mlp", "--precision", "static", "--layouts", "1x1",
                             "--scenario", "server", "--latency-bound", "50ms", "--max-batch", "4",
                             "--cold-starts", "0", *SHORT,
                             "--json", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr
    assert left_since(before) == set()
    rows = records(out)
    confirms = [r for r in rows if r["scenario"] == "confirm"]
    rows = [r for r in rows if r["scenario"] == "server"]
    assert sorted(r["name"] for r in rows) == ["static 1x1 b1", "static 1x1 b4 window 5ms"]
    # the configurations confirmed are those whose brackets overlap the best's, as the records say
    from gluonperf.inference.deploy import contenders
    from gluonperf.records import Result
    expected = [c.name for c in contenders([Result("inference", r["name"], r) for r in rows])]
    rates = sorted({c["confirm_rate_per_s"] for c in confirms}, reverse=True)
    for rate in rates:  # a pass at the best's rate, and a second 15% lower only when none held every round
        assert [c["name"] for c in confirms if c["confirm_rate_per_s"] == rate] == expected
    if len(rates) == 2:
        from gluonperf.inference.serve import SERVER_TOLERANCE
        assert not any(all(c["round_valid"]) for c in confirms if c["confirm_rate_per_s"] == rates[0])
        assert rates[1] == pytest.approx(rates[0] / (1 + SERVER_TOLERANCE))
    assert len(rates) <= 2 and all(c["rounds"] == 3 and len(c["round_p99_s"]) == 3 for c in confirms)
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
        # every batch that reached the model was of a size the warm-up ran (batched: padded to 1, 2, 4)
        assert r["warmed_batch_sizes"] == [1, 2, 4] and "unwarmed_batch_sizes" not in r
        assert r["batch_sizes_served"] and set(r["batch_sizes_served"]) <= {1, 2, 4}
    last = deploy_line(p.stdout)
    assert last.startswith(("deploy static 1x1", "nothing meets the bound")), p.stdout
    if last.startswith("deploy"):  # the code that serves it follows, indented, naming the files under DIR
        code = p.stdout.strip().split(last, 1)[1]
        assert "SymbolBlock.imports('DIR/static-symbol.json'" in code and "add --keep DIR" in last
    assert ("confirmed in 3 interleaved rounds" in last or "unconfirmed" in last) == bool(confirms)
    assert ("server choice confirmed" in p.stdout) == bool(confirms)
    if last.startswith("deploy"):
        assert "python -m gluonperf.infer --model mlp --precision static --layouts 1x1 --scenario server " \
               "--latency-bound 50ms" in last


def test_multi_stream_splits_a_query_among_the_instances_of_every_layout(tmp_path):
    """Every layout of the cores by default (1x2 and 2x1 on 2); a query of 8 samples split
    between the instances of a layout."""
    from gluonperf.inference.instances import core_groups, factorizations
    out = tmp_path / "multi.json"
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", "mlp", "--precision", "static", "--scenario",
                             "multi-stream", "--batch-sizes", "8", "--rounds", "1", "--cold-starts", "0", *SHORT,
                             "--json", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr
    rows = records(out)
    assert [r["layout"] for r in rows] == [str(l) for l in factorizations(len(core_groups()))]
    for r in rows:
        assert (r["name"], r["scenario"], r["batch_size"], r["primary_metric"]) == (
            "static %s b8" % r["layout"], "multi-stream", 8, "p99_s")
        assert r["queries"] >= 662 and r["p50_s"] <= r["p99_s"]  # the fewest with which early stopping can pass a p99
        assert "accuracy" not in r and "random samples" in r["accuracy_note"]  # no labels: no accuracy
    assert "multi-stream, mlp on cpu(0)" in p.stdout


@pytest.mark.parametrize("argv, words", [
    (["--scenario", "single-stream,batch"], "unknown scenario batch"),
    (["--precision", "fp32,fp8"], "unknown rung fp8"),
    (["--latency-bound", "0"], "'0' must be above 0"),
    (["--latency-bound", "fast"], "is not a duration"),
    (["--scenario", "server"], "--scenario server needs --latency-bound"),
    (["--layouts", "64x1"], "needs 64 cores"),
    (["--model", "{tmp}/net-symbol.json", "--input-shape", "1,28,28"], "has no parameters beside it (net-0000.params"),
    (["--model", "nonet"], "unknown model 'nonet'"),
    (["--model", "mlp", "--calib-data", "digits"], "--calib-data digits holds 28x28 grey images and the model "
                                                   "takes 512"),
    (["--calib-data", "{tmp}/nowhere"], "--calib-data {tmp}/nowhere: no such file or folder"),
    (["--cold-starts", "-1"], "'-1' must be 0 or more"),
    (["--budget", "0"], "'0' must be at least 1"),
    (["--accuracy-target", "0%"], "'0%' must be above 0%"),
    (["--accuracy-target", "120%"], "'120%' must be between 0% and 100%"),
])
def test_bad_input_is_one_line_and_exit_2(argv, words, tmp_path):
    (tmp_path / "net-symbol.json").write_text("{}")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    p = run_leaving_nothing(["-m", "gluonperf.infer", *argv], timeout=120)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and words.replace("{tmp}", str(tmp_path)) in lines[0], p.stderr
    assert p.stdout == ""


def test_ctrl_c_keeps_what_was_measured_and_leaves_nothing(tmp_path, private_tmp):
    tmp = private_tmp
    out = tmp_path / "run.json"
    env, mark = marked_env(TMPDIR=str(tmp))
    before = segments()
    proc = subprocess.Popen([PY, "-m", "gluonperf.infer", "--model", "mlp", "--precision", "static",
                             "--cold-starts", "1", "--duration", "0.5", "--json", str(out), "--keep",
                             str(tmp_path / "kept")],
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
    colds = [r for r in rows if r["scenario"] == "cold-start"]  # before the LoadGen runs: done, not partial
    assert [r["precision"] for r in colds] == ["static"] and "partial" not in colds[0]
    assert not any("kept" in r for r in rows)  # --keep's folder went with the stop: no record names it
    rows = [r for r in rows if r not in colds]
    assert rows and all(r["bench"] == "inference" and 1 <= r["rounds"] <= 3 for r in rows)
    assert all(r.get("partial") is (r["rounds"] < 3) or r["rounds"] == 3 and "partial" not in r for r in rows)
    assert "stopped before the end" in stdout
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]
    assert left_since(before) == set() and not list(tmp.iterdir())
    assert sorted(os.listdir(tmp_path)) == ["run-loadgen", "run.json"]  # --keep's folder only when the run ends


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

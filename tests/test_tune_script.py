"""`python -m gluonperf.tune -- python train.py`: a newcomer's script (tests/user_scripts/
newcomer_mlp.py, plain Gluon, knowing nothing of gluonperf) tuned from outside, as a user
runs it; no process is left after any run.

What is timed is never asserted against a figure. Where a test needs a change to pay or to
cost, it is made so by construction: the model is 24 Dense layers of 16 units at batch 16,
where Python's dispatch is most of an imperative step (hybridized static it is several times
faster on any machine); the DataLoader's workers sleep in every sample, the script's own
thread does not.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers import ROOT, marked_env, processes_of, run_leaving_nothing

PY = sys.executable
SCRIPT = os.path.join("tests", "user_scripts", "newcomer_mlp.py")
QUICK = ["--warmup", "3"]


def tune(*flags, command, timeout=300, **env):
    return run_leaving_nothing(["-m", "gluonperf.tune", *QUICK, *flags, "--", *command], timeout=timeout, **env)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def advice(rows):
    """The recipe's records, without the one that says what the tune cost (lever 'run')."""
    return [r for r in rows if r["bench"] == "advice" and r["lever"] != "run"]


@pytest.mark.alone  # its verdict is a measurement: nothing may run beside it
def test_hybridize_is_found_measured_and_said_where(tmp_path):
    """Under the default plan (--rounds auto): hybridized, this script's step is several times
    faster, which the plan settles at one of its first looks; the candidates leave the rounds
    as soon as it does. --min-time 1: each run times 1 s, not as long as the script's start-up
    (the default), which made the test's runs about twice as long."""
    out = tmp_path / "tune.json"
    done = tune("--levers", "hybridize", "--min-time", "1", "--json", str(out), command=[PY, SCRIPT])
    assert done.returncode == 0, done.stderr
    assert "a Sequential of HybridBlocks, not hybridized, built at %s:" % SCRIPT in done.stderr
    rows = records(out)
    tried = {r["name"]: r for r in rows if r["bench"] == "tune" and r["lever"] == "hybridize"}
    assert set(tried) == {"as it is", "hybridize=hybrid", "hybridize=static"}
    for r in (tried["hybridize=hybrid"], tried["hybridize=static"]):
        assert r["rounds_policy"] == "sequential" and 2 <= r["rounds"] <= r["plan_rounds"] and r["stopped"]
        assert r["ratio_ci_low"] <= r["ratio"] <= r["ratio_ci_high"]
    assert tried["as it is"]["rounds"] == max(tried["hybridize=hybrid"]["rounds"], tried["hybridize=static"]["rounds"])
    recipe = advice(rows)
    assert [r["lever"] for r in recipe] == ["hybridize"], recipe
    r = recipe[0]
    assert r["verdict"] == "faster" and r["ratio_ci_low"] > 1 and r["measured"]
    assert r["where"] == "%s:%d" % (SCRIPT, 1 + open(os.path.join(ROOT, SCRIPT)).read().splitlines().index(
        "net = nn.HybridSequential() if args.hybridize else nn.Sequential()"))
    assert "HybridSequential()" in r["change"] and "hybridize(" in r["change"]
    assert "what to change (each measured on this script" in done.stdout and r["where"] in done.stdout


def test_a_wait_for_the_engine_every_step_is_named_with_its_cost(tmp_path):
    """The already-hybridized model, 512 wide, reads its loss every step: Python waits there for
    the step's work. Nothing to try for hybridize (static already) nor data (no DataLoader): the
    probe alone runs, and no change is recommended."""
    out = tmp_path / "tune.json"
    done = tune("--levers", "hybridize,data", "--min-time", "0.2", "--json", str(out),
                command=[PY, SCRIPT, "--hybridize", "--read-loss", "--wide", "512", "--layers", "4"])
    assert done.returncode == 0, done.stderr
    assert "not tried: hybridize: the model is hybridized with static_alloc and static_shape" in done.stderr
    assert "not tried: data: no gluon DataLoader" in done.stderr
    recipe = advice(records(out))
    waits = [r for r in recipe if r["lever"] == "wait"]
    line = 1 + open(os.path.join(ROOT, SCRIPT)).read().splitlines().index(
        '            print("loss %.4f" % loss.mean().asscalar())')
    assert [w["where"] for w in waits] == ["%s:%d" % (SCRIPT, line)], recipe
    w = waits[0]
    assert w["calls_per_step"] == 1 and 0 < w["blocked_s_per_step"] < w["step_s"] and w["what"] == "asnumpy"
    assert not w["measured"]  # its cost is measured, not what removing it gains
    assert "asscalar()" in w["code"] and "read the value every N steps" in w["change"]
    assert [r["lever"] for r in recipe if r["lever"] != "wait"] == ["none"]
    assert "no change pays here" in done.stdout and w["where"] in done.stdout


def test_an_already_tuned_script_gets_no_change(tmp_path):
    """--epochs 2 (64 steps): the probe, which times at least as long as the script took to start,
    stops at the script's end, not hundreds of this fast step later; what is checked here is what
    the probe found."""
    out = tmp_path / "tune.json"
    done = tune("--levers", "hybridize,data", "--json", str(out),
                command=[PY, SCRIPT, "--hybridize", "--epochs", "2"])
    assert done.returncode == 0, done.stderr
    recipe = advice(records(out))
    assert [r["lever"] for r in recipe] == ["none"], recipe
    assert recipe[0]["change"].startswith("no change pays here: hybridize not tried: the model is hybridized")
    assert "no change pays here" in done.stdout
    # what the tune cost: its wall time and its runs (the probe alone: no lever had anything to try)
    run, = [r for r in records(out) if r["bench"] == "advice" and r["lever"] == "run"]
    assert run["runs"] == 1 and run["wall_s"] > 0 and run["levers"] == [] and set(run["idle"]) == {"hybridize",
                                                                                                  "data"}
    assert "recipe (tune took " in done.stdout and " runs of the script, the probe included)" in done.stdout


def test_dataloader_workers_that_slow_the_script_are_not_recommended(tmp_path, private_tmp):
    """Not `alone`: each batch a worker makes costs 3 times the script's own last step, the workers
    taking turns (--slow-in-workers 3), so every candidate is about 3 times slower than the script as
    it is on any machine and beside any load (a fixed 32 ms a batch was not: beside the suite's other
    worker the script's own step took 22 ms and two thread-pool workers kept up with it).
    The script runs one epoch (--epochs 1: 32 batches): the probe, which times at least as long as
    the script took to start (hundreds of this fast step), reaches the script's end first and
    keeps the 28 steps it timed, so every run times 28 steps. One round: one ratio below 1 is what
    is checked (the verdict, inconclusive at 1 round, was inconclusive at 2 too: the recipe keeps no
    change). Each run is ended in Trainer.step, one batch before the epoch's last, with its workers
    busy on it: none leaves a pymp-* folder (the resource sharer's socket of a worker killed at work)
    in the temporary directory, a private one."""
    out = tmp_path / "tune.json"
    tmp = private_tmp
    done = tune("--levers", "data", "--rounds", "1", "--json", str(out),
                command=[PY, SCRIPT, "--loader", "--slow-in-workers", "3", "--epochs", "1"], TMPDIR=str(tmp))
    assert done.returncode == 0, done.stderr
    assert not list(tmp.iterdir())
    rows = records(out)
    tried = {r["name"]: r for r in rows if r["bench"] == "tune" and r["lever"] == "data"}
    assert set(tried) == {"as it is", "num_workers=1", "num_workers=2", "num_workers=2 thread_pool"} or \
        os.cpu_count() != 2
    assert all(r["ratio"] < 1 for name, r in tried.items() if name != "as it is"), tried
    # a wait for the engine may be named beside it (a timed, unmeasured hint: the fresh-clone CI's load once
    # made the script's own wait pass 5% of its step); no change is
    recipe = advice(rows)
    assert [r["lever"] for r in recipe if r["lever"] != "wait"] == ["none"], recipe
    assert not any(r["measured"] for r in recipe if r["lever"] == "wait")
    nothing = next(r for r in recipe if r["lever"] == "none")  # after a wait hint, if one was named
    assert "num_workers=1" in nothing["change"]  # what was tried, with its interval


def test_a_failing_script_stops_tune_with_its_own_error_and_status():
    done = tune(command=[PY, SCRIPT, "--fail"])
    assert done.returncode == 1
    assert "RuntimeError: the script's own failure at step 3" in done.stderr
    assert "the script failed as it is" in done.stderr and "Traceback" in done.stderr
    assert done.stdout == ""


def test_a_script_without_a_trainer_is_one_line():
    done = tune(command=[PY, SCRIPT, "--no-trainer", "--epochs", "1"])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("python -m gluonperf.tune: error: ")
    assert "never called gluon.Trainer.step" in done.stderr and "Traceback" not in done.stderr


def test_bad_input_is_one_line():
    for flags, message in ((["--levers", "nope"], "unknown lever(s) nope"), (["--warmup", "1"], "at least 2 steps"),
                           ([], "no command after --")):
        done = run_leaving_nothing(["-m", "gluonperf.tune", *flags, "--"] + ([] if not flags else [PY, SCRIPT]))
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr


def _cmdline(process):
    import psutil
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def test_ctrl_c_keeps_what_was_measured_and_leaves_nothing_running(tmp_path):
    """--epochs 2 (64 steps): the probe ends at the script's end and every run times its ~60 steps,
    not the seconds of steps that the script's start-up is (the moment of Ctrl-C is not timed)."""
    out = tmp_path / "tune.json"
    env, mark = marked_env()
    proc = subprocess.Popen([PY, "-m", "gluonperf.tune", *QUICK, "--levers", "hybridize", "--rounds", "30",
                             "--json", str(out), "--", PY, SCRIPT, "--epochs", "2"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, runs = time.time() + 120, set()
        while time.time() < deadline and len(runs) < 3 and proc.poll() is None:  # the probe and two runs began
            runs.update(p.pid for p in processes_of(mark) if p.pid != proc.pid and SCRIPT in _cmdline(p))
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "stopped before the end" in stdout and "hybridize" in stdout, stdout + stderr
    kept = records(out)
    assert kept and all(r["bench"] == "tune" for r in kept)
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]


def test_a_sequential_of_hybrid_blocks_becomes_a_hybrid_sequential_with_the_same_weights():
    import mxnet as mx
    from mxnet.gluon import nn
    from gluonperf.training.hybrid_blocks import as_hybrid_sequential, hybrid_kind, hybrid_mode, hybridize
    net = nn.Sequential()
    inner = nn.Sequential()
    inner.add(nn.Dense(8, activation="relu"))
    net.add(inner, nn.Dense(3))
    net.initialize(mx.init.Xavier())
    x = mx.nd.random.uniform(shape=(4, 5))
    before = net(x).asnumpy()
    assert hybrid_kind(net) == "sequential" and hybrid_mode(net) == "none"
    assert hybridize(net, "static").startswith("HybridSequential, ")
    assert isinstance(net, nn.HybridSequential) and isinstance(inner, nn.HybridSequential)
    assert hybrid_mode(net) == "static"
    np_after = net(x).asnumpy()
    assert abs(np_after - before).max() < 1e-6
    assert net._cached_op is not None  # it ran as one graph
    lstm = nn.Sequential()
    lstm.add(nn.Dense(2), _Imperative())
    assert hybrid_kind(lstm) == "imperative"
    try:
        as_hybrid_sequential(lstm)
        raise AssertionError("an imperative Block was turned into a HybridSequential")
    except ValueError as e:
        assert "not a Sequential of HybridBlocks" in str(e)


class _Imperative(__import__("mxnet").gluon.Block):
    def forward(self, x):
        return x * 2


def _searched(results, kept):
    """A search's outcome (tuning.search.Search) that kept `kept`, with no confirmation."""
    from gluonperf.tuning.search import Search
    return Search(results, None, kept, None, {}, {}, {})


def test_the_recipe_keeps_only_faster_and_names_what_was_tried():
    from gluonperf.records import Result
    from gluonperf.script import advice as script_advice, text as script_text

    def tried(lever, name, ratio, low, high, verdict, env=(), flags=()):
        return Result("tune", name, {"lever": lever, "ratio": ratio, "ratio_ci_low": low, "ratio_ci_high": high,
                                     "verdict": verdict, "rounds": 5, "ratio_n": 5, "ratio_level": 0.975,
                                     "env_vars": dict(env), "flags": dict(flags)})
    results = [tried("threads", "as it is", 1.0, None, None, "baseline"),
               tried("threads", "OMP_NUM_THREADS=2", 0.5, 0.4, 0.6, "slower", env={"OMP_NUM_THREADS": "2"}),
               tried("hybridize", "hybridize=static", 1.5, 1.3, 1.7, "faster", flags={"hybridize": "static"}),
               tried("hybridize", "hybridize=hybrid", 1.2, 1.1, 1.3, "faster", flags={"hybridize": "hybrid"}),
               tried("data", "num_workers=1", 1.1, 0.9, 1.3, "inconclusive",
                     flags={"hybridize": "static", "num_workers": "1"})]
    found = {"model": {"kind": "sequential", "file": "/x/train.py", "line": 7}, "loaders": []}
    out = script_advice.recipe(_searched(results, ["hybridize"]), found, [], "/x", "")
    assert [r.metrics["lever"] for r in out] == ["hybridize"]
    m = out[0].metrics
    assert m["where"] == "train.py:7" and m["ratio"] == 1.5 and m["hooks"] == {"hybridize": "static"}
    # the recipe names the candidate the search kept (sweep.winner: the highest estimate of the faster ones),
    # even where another faster one has the higher lower end
    steady = tried("hybridize", "hybridize=hybrid", 1.4, 1.35, 1.45, "faster", flags={"hybridize": "hybrid"})
    noisy = tried("hybridize", "hybridize=static", 1.45, 1.05, 2.0, "faster", flags={"hybridize": "static"})
    out = script_advice.recipe(_searched([steady, noisy], ["hybridize"]), found, [], "/x", "")
    assert out[0].metrics["hooks"] == {"hybridize": "static"} and out[0].metrics["ratio"] == 1.45
    assert "HybridSequential()" in m["change"] and "static_alloc=True" in m["change"]
    text = script_text.tried_text(results, {"dtype": "no bfloat16 here"})
    assert "OMP_NUM_THREADS=2 0.50x (97.5% CI 0.40-0.60, 5 rounds), slower" in text
    assert "dtype not tried: no bfloat16 here" in text
    assert script_text.failure_notes(results) == []
    shared = Result("tune", "num_workers=2", {"lever": "data", "error": "exit 1: MXNetError: ... data is on "
                                                                         "cpu_shared(0) while dense0_weight is on cpu(0)"})
    assert "as_in_context" in script_text.failure_notes(results + [shared])[0]
    nothing = script_advice.recipe(_searched(results[:2], []), found, [], "/x", text)
    assert [r.metrics["lever"] for r in nothing] == ["none"]
    assert nothing[0].metrics["change"] == "no change pays here: " + text


def test_an_interval_too_wide_to_read_says_how_many_rounds_would_give_one():
    """2 rounds of a noisy candidate, corrected for 3 candidates: a t interval from 1e-3 to 5e2 tells
    a reader nothing; the text says so, and about how many rounds would give an interval."""
    from gluonperf.measure import stats
    from gluonperf.script import text as script_text
    iv = stats.ratio_interval([0.6, 0.85], 1 - 0.05 / 3)
    assert not stats.readable(iv) and iv.high / iv.low > 1e5
    m = dict(iv.fields("ratio"), ratio_joint_level=0.95, round_ratios=[0.6, 0.85])
    text = script_text.interval_text(m)
    assert text.startswith("0.71x (2 rounds: too few for an interval; about ") and "would give one)" in text
    need = int(text.split("about ")[1].split()[0])
    assert stats.readable(stats.ratio_interval([0.6, 0.85] * need, 0.95))  # with that many rounds, it is
    steady = dict(stats.ratio_interval([1.3, 1.25, 1.28], 0.95).fields("ratio"), ratio_joint_level=0.95)
    assert script_text.interval_text(steady).startswith("1.28x (95% CI 1.")


def test_the_confirmed_recipe_says_its_interval_at_the_plans_level():
    """The combination's line read '99.0155% CI' (the level of one look of the plan) beside changes
    whose lines say 95% (held over the looks): it says its interval as they do."""
    from gluonperf.measure import stats
    from gluonperf.records import result
    from gluonperf.script import text as script_text
    iv = stats.ratio_interval([1.2, 1.3, 1.4, 1.35, 1.45], 0.990155083656413)
    together = result("advice", "together", lever="together", change="all of the above", where=None,
                      measured=True, verdict="faster", verdict_text="faster: " + iv.describe(),
                      ratio_joint_level=0.95, **iv.fields("ratio"))
    line, = [l for l in script_text.recipe_lines([together]) if l.startswith("together")]
    assert line == "together, confirmed in one interleaved run: faster: 1.34x (95%% CI %.2f-%.2f, 5 rounds)" % (
        iv.low, iv.high)


def test_a_min_time_given_is_the_probes_time_and_by_default_its_start_up_counts(monkeypatch):
    """--min-time SEC times SEC seconds; without it, the probe times 1 s and at least as long as the
    script took to start (the listener's "startup" window)."""
    from gluonperf.cli import tune_script
    asked = []

    def probe(command, warmup, steps, timeout, min_seconds, window):
        asked.append((min_seconds, window))
        return "runner", {"rate": {}}, None, None
    monkeypatch.setattr(tune_script.script_runner, "probe", probe)
    for flags in ([], ["--min-time", "0.3"]):
        args, command, _ = tune_script.parse_args([*flags, "--", PY, SCRIPT])
        assert tune_script.probe(args, command, "x") == ("runner", {"rate": {}})
    assert asked == [(tune_script.MIN_TIME, "startup"), (0.3, None)]

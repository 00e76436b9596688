import json
import textwrap

import pytest

from gluonperf import UserError

from gluonperf.training import levers as model_levers
from gluonperf.training.levers import levers
from gluonperf.training.runners import STEPRATE, TRAIN, CommandRunner as Runner
from gluonperf.tune import parse_args
from gluonperf.tuning import model as model_tune, search
from gluonperf.tuning.candidates import Candidate
from gluonperf.tuning.model import Space, count_runs
from gluonperf.tuning.rounds import Budget, Rounds
from gluonperf.tuning.schedule import Sweeps, winner
from gluonperf.tuning.search import paired_sweep

FAKE = textwrap.dedent("""
    import os, random, sys
    from gluonperf.runtime import wire  # tune puts this gluonperf first on the candidate's path
    if os.environ.get("FAKE_FAIL"):
        sys.exit("fake worker: told to fail")
    rate = float(os.environ.get("FAKE_RATE", "10"))
    if os.environ.get("MXNET_ENGINE_TYPE") == "ThreadedEngine":  # tune's engine lever
        rate *= float(os.environ.get("FAKE_ENGINE_GAIN", "1"))
    noise = float(os.environ.get("FAKE_NOISE", "0"))  # log-normal spread of every figure
    random.seed(os.environ.get("FAKE_SEED", "") + os.environ.get("MXNET_ENGINE_TYPE", ""))  # each setting its own
    jitter = lambda: rate * random.lognormvariate(0, noise)
    if "--serve" in sys.argv:
        with open(os.environ["FAKE_STARTS"], "a") as f:
            print("start", file=f)
        asked = []

        def run(settings):
            asked.append(settings["steps"])
            if os.environ.get("FAKE_DIE_AFTER") and len(asked) > int(os.environ["FAKE_DIE_AFTER"]):
                sys.exit("fake worker: died")
            return {"images_per_s": jitter()}
        wire.serve(run)
    else:
        print(wire.say({"images_per_s": jitter(), "argv": sys.argv[1:]}))
""")


def quiet(rounds):
    """`rounds` watching a machine nobody else uses: no round runs again for the load of other work
    (the suite's own, beside the test)."""
    from gluonperf.tuning.simulate import QuietMachine
    rounds.machine = QuietMachine
    return rounds


def test_sweep_ranks_by_ratio_and_records_failures(tmp_path):
    (tmp_path / "fake_worker.py").write_text(FAKE)
    runner = Runner("fake_worker")
    base = Candidate("base", (("FAKE_RATE", "10"), ("PYTHONPATH", str(tmp_path))), (("batch_size", "8"),))
    fast = base.with_env("fast", FAKE_RATE=25)
    broken = base.with_env("broken", FAKE_FAIL=1)
    out = search.sweep([base, fast, broken], runner, steps=1, rounds=2, lever="test")
    by = {r.name: r.metrics for r in out}
    assert [r.name for r in out][:2] == ["fast", "base"]
    assert by["fast"]["ratio"] == pytest.approx(2.5) and by["fast"]["rank"] == 1 and by["fast"]["rounds"] == 2
    assert by["base"]["ratio"] == 1.0 and by["base"]["rounds"] == 2  # once a round, beside each candidate
    # a candidate whose run fails leaves after that round: it is not run again
    assert "told to fail" in by["broken"]["error"] and by["broken"]["ratio"] is None
    assert by["broken"]["stopped"] == "error" and by["fast"]["stopped"] == "plan done"
    # round by round (None where a run failed), so suites can pair two candidates
    assert by["fast"]["round_ratios"] == [2.5, 2.5] and by["base"]["round_ratios"] == [1.0, 1.0]
    assert by["broken"]["round_ratios"] == [None]
    assert by["fast"]["command"].startswith("FAKE_RATE=25 ")
    assert by["fast"]["env_vars"]["FAKE_RATE"] == "25"


def test_paired_sweep_refuses_a_candidate_that_spins_when_idle(tmp_path):
    """GOMP_SPINCOUNT=infinite, waiting warm beside the others, ran them 8x slower (docs/levers.md):
    refused before any process starts."""
    starts = tmp_path / "starts"
    base = Candidate("base", (("FAKE_STARTS", str(starts)),), (("batch_size", "8"),))
    with pytest.raises(ValueError, match="'spins'.*spin for ever"):
        paired_sweep([base, base.with_env("spins", GOMP_SPINCOUNT="INFINITE")], Runner("fake_worker", serves=True),
                     steps=1, rounds=1)
    assert not starts.exists()


def test_paired_sweep_keeps_one_process_per_candidate(tmp_path):
    (tmp_path / "fake_worker.py").write_text(FAKE)
    runner = Runner("fake_worker", serves=True)
    starts = tmp_path / "starts"
    base = Candidate("base", (("FAKE_RATE", "10"), ("FAKE_STARTS", str(starts)), ("PYTHONPATH", str(tmp_path))),
                     (("batch_size", "8"),))
    fast = base.with_env("fast", FAKE_RATE=30)
    dies = base.with_env("dies", FAKE_DIE_AFTER=1)
    broken = base.with_env("broken", FAKE_FAIL=1)
    seen = []
    out = paired_sweep([base, fast, dies, broken], runner, steps=1, rounds=3,
                       observers=search.Observers(log=seen.append))
    by = {r.name: r.metrics for r in out}
    assert starts.read_text().count("start") == 3  # one process per candidate that starts at all
    assert by["fast"]["ratio"] == pytest.approx(3.0) and by["fast"]["rank"] == 1 and by["fast"]["rounds"] == 3
    # the baseline ran once a round, beside the candidates still in
    assert by["base"]["ratio"] == 1.0 and by["base"]["rounds"] == 3
    assert by["dies"]["rounds"] == 1 and "died" in by["dies"]["error"]
    assert by["dies"]["round_ratios"] == [1.0, None] and by["dies"]["stopped"] == "error"
    assert "told to fail" in by["broken"]["error"] and by["broken"]["rounds"] == 0
    assert len(seen) == 4 + 3 + 2  # a failed candidate is not asked again


def test_sweeps_keep_what_a_stopped_sweep_has_finished(tmp_path):
    """schedule.Sweeps: while a sweep runs, results() is the finished sweeps plus the running one
    summarized from its finished runs, marked partial and tidied; once it ends, nothing is partial."""
    (tmp_path / "fake_worker.py").write_text(FAKE)
    runner = Runner("fake_worker", serves=True)
    base = Candidate("base", (("FAKE_RATE", "10"), ("FAKE_STARTS", str(tmp_path / "starts")),
                              ("PYTHONPATH", str(tmp_path))), (("batch_size", "8"),))
    fast = base.with_env("fast", FAKE_RATE=20)
    sweeps = Sweeps(tidy=lambda rs: [r.metrics.update(suite="test") for r in rs])
    snapshots = []
    paired_sweep([base, fast], runner, steps=1, rounds=2, lever="first",
                 observers=search.Observers(sweeps=sweeps, log=lambda m: snapshots.append(sweeps.results())))
    # B f, then f B: after the 1st run only the baseline has a figure, after the 2nd both
    assert [r.name for r in snapshots[0]] == ["base"] and snapshots[0][0].metrics["rounds"] == 1
    assert {r.name for r in snapshots[1]} == {"base", "fast"}
    assert all(r.metrics["partial"] and r.metrics["suite"] == "test" for s in snapshots for r in s)
    assert snapshots[1][0].metrics["images_per_s"] in (10, 20)
    done = sweeps.results()
    assert len(done) == 2 and not any(r.metrics.get("partial") for r in done)
    assert all(r.metrics["suite"] == "test" and r.metrics["rounds"] for r in done)
    # a second sweep: the first one's results stay whole beside the running one's
    search.sweep([base, fast], Runner("fake_worker"), steps=1, rounds=1, lever="second",
                 observers=search.Observers(sweeps=sweeps, log=lambda m: snapshots.append(sweeps.results())))
    mid = snapshots[-1]
    assert [r.metrics["lever"] for r in mid[:2]] == ["first", "first"] and not mid[0].metrics.get("partial")
    assert all(r.metrics["partial"] for r in mid[2:]) and len(mid) == 4
    assert len(sweeps.results()) == 4


def test_an_on_stop_function_that_fails_is_one_line(monkeypatch):
    from gluonperf.runtime import guard
    monkeypatch.setattr(guard, "_stopping", guard.threading.Event())  # this process goes on
    release = guard.threading.Event()
    with guard.on_stop(lambda: "kept 3 results"), guard.on_stop(lambda: 1 / 0), guard.on_stop(lambda: None), \
            guard.on_stop(release.wait):  # stuck, as on a hung MXNet: the process must still exit
        lines = guard.run_on_stop(timeout=0.5)
    release.set()
    assert lines == ["kept 3 results", "could not keep the finished results: ZeroDivisionError: division by zero",
                     "could not keep the finished results: still writing after 0.5 s"]
    assert guard._stopping.is_set() and guard._on_stop == []


def test_candidate_command_line_has_env_and_flags():
    c = Candidate("c").with_env("c", OMP_NUM_THREADS=2).with_flags("c", hybridize="static", batch_size=64)
    line = STEPRATE.command_line(c, steps=5)
    assert line.startswith("OMP_NUM_THREADS=2 python -m gluonperf.workers.steprate")
    assert "--hybridize static" in line and "--batch-size 64" in line and "--steps 5" in line


def test_count_runs():
    # hybridize: none/hybrid/static, each round runs the 3 once, x 2 rounds x 2 batch sizes,
    # and the confirmation of the winning settings against the defaults, 2 runs a round
    assert count_runs(Space(("cpu0",), (8, 16), ("device",), only=("hybridize",)), STEPRATE, 2) == 12 + 8
    # contexts with two kvstores: cpu0 (baseline), cpu0,cpu1+device, cpu0,cpu1+local, and the last
    # with MXNet's own CPU workspace pool: 4 runs
    assert count_runs(Space(("cpu0", "cpu1"), (8,), ("device", "local"), only=("contexts",)), TRAIN, 1) == 4 + 2
    # rounds chosen by the verdicts: at most the plan's last round
    assert count_runs(Space(("cpu0",), (8,), ("device",), only=("engine",)), STEPRATE,
                      Rounds()) == (2 + 2) * Rounds().maximum


def stage(name, contexts=("cpu0",), runner=TRAIN):
    base = Candidate("base", (), (("ctx", contexts[0]), ("hybridize", "none")))
    make = dict(levers(base, list(contexts), [64], ["device"], cores=2, runner=runner))[name]
    return make(base)


def test_allocator_lever_tries_only_installed_allocators(monkeypatch):
    import ctypes.util
    monkeypatch.setattr(model_levers, "huge_pages_tunable", lambda: None)
    monkeypatch.setattr(ctypes.util, "find_library",
                        lambda n: {"jemalloc": None, "tcmalloc": "libtcmalloc.so.4"}.get(n))
    assert [dict(c.env).get("LD_PRELOAD") for c in stage("allocator")] == [None, "libtcmalloc.so.4"]
    monkeypatch.setattr(ctypes.util, "find_library", lambda n: None)
    assert len(stage("allocator")) == 1  # nothing installed: the stage is skipped


def test_other_levers_do_not_look_up_huge_pages(monkeypatch):
    monkeypatch.setattr(model_levers, "huge_pages_tunable", lambda: pytest.fail("read for a lever not chosen"))
    assert len(stage("optimizer")) == 2


def test_allocator_lever_tries_glibc_huge_pages_where_they_can_change_something(monkeypatch, tmp_path):
    import ctypes.util
    import platform
    monkeypatch.setattr(ctypes.util, "find_library", lambda n: None)
    mode = tmp_path / "enabled"
    monkeypatch.setattr(model_levers, "THP_MODE", str(mode))
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    for text, tried in (("always [madvise] never\n", True), ("[always] madvise never\n", False),
                        ("always madvise [never]\n", False)):
        mode.write_text(text)
        envs = [dict(c.env).get("GLIBC_TUNABLES") for c in stage("allocator")]
        assert envs == ([None, "glibc.malloc.hugetlb=1"] if tried else [None]), text
    mode.write_text("always [madvise] never\n")
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.31"))  # before the tunable
    assert len(stage("allocator")) == 1
    monkeypatch.setattr(model_levers, "THP_MODE", str(tmp_path / "absent"))  # no THP (another kernel, or not Linux)
    monkeypatch.setattr(platform, "libc_ver", lambda: ("glibc", "2.36"))
    assert len(stage("allocator")) == 1


def test_new_levers_change_one_setting_each():
    for name, var in (("bulk", "MXNET_EXEC_BULK_EXEC"), ("optimizer", "MXNET_OPTIMIZER_AGGREGATION_SIZE"),
                      ("openmp", "OMP_PROC_BIND")):
        cands = stage(name)
        assert cands[0].env == () and len(cands) >= 2
        assert any(k.startswith(var) for c in cands[1:] for k in dict(c.env)), name
        assert all(c.flags == cands[0].flags for c in cands)


def test_contexts_lever_sets_the_workspace_pool_and_tries_mxnets_own():
    cands = stage("contexts", ("cpu0", "cpu1"))
    many = [dict(c.env) for c in cands if dict(c.flags)["ctx"] == "cpu0,cpu1"]
    assert [e["MXNET_CPU_TEMP_COPY"] for e in many] == ["64", "1"]
    assert all(e["OMP_NUM_THREADS"] == "1" for e in many)


def test_baseline_is_named_for_what_it_runs(monkeypatch):
    seen = []

    def first_only(cands, *args, **kwargs):
        seen.append(cands[0].name)
        return []

    monkeypatch.setattr(search, "paired_sweep", first_only)
    monkeypatch.setattr(search, "sweep", first_only)
    for runner in (TRAIN, STEPRATE):
        best = model_tune.tune("mlp", Space(("cpu",), (8,), only=("hybridize",)), runner)[-1].metrics
        assert best["verdict"] == "defaults"  # the fake measured nothing: nothing kept, nothing to confirm
    # gluonperf.train sets its own thread default, so its baseline is not the book's environment
    assert seen == ["imperative, train's thread default", "book defaults"]


def test_tune_cli_tiny_model(tmp_path, run):
    out = tmp_path / "tune.json"
    p = run("gluonperf.tune", "--model", "mlp", "--ctx", "cpu", "--batch-sizes", "8", "--steps", "2",
            "--rounds", "2", "--levers", "engine", "--runner", "steprate", "--json", str(out), "--wide")
    assert p.returncode == 0, p.stderr
    assert "MXNET_ENGINE_TYPE=ThreadedEngine" in p.stdout and "best at batch 8" in p.stdout
    assert "python -m gluonperf.workers.steprate" in p.stdout
    rows = [json.loads(l) for l in out.read_text().splitlines()]
    cands = [r for r in rows if r["name"] != "best"]
    assert len(cands) == 2 and all(r["images_per_s"] > 0 for r in cands), cands
    assert sorted(r["rank"] for r in cands) == [1, 2]
    assert {r["lever"] for r in cands} == {"engine"}
    best = [r for r in rows if r["name"] == "best"][0]
    assert "env" in rows[0] and "env_vars" in best
    engine = [r for r in cands if r["verdict"] != "baseline"][0]
    # the candidate's ratio comes with its interval, n and verdict, in the table and the file
    assert engine["ratio_n"] == 2 and engine["ratio_ci_low"] < engine["ratio"] < engine["ratio_ci_high"]
    assert engine["verdict"] in ("faster", "slower", "same", "inconclusive") and "ratio_ci_low" in p.stdout
    # the 'best' is what was kept: a confirmed speed-up with its interval, or the defaults
    if best["kept_levers"]:
        assert best["speedup_n"] == 2 and best["speedup_ci_low"] <= best["speedup"] <= best["speedup_ci_high"]
    else:
        assert best["speedup"] == 1.0 and best["verdict"] == "defaults"


@pytest.mark.parametrize("args, message", [
    (["--levers", "magic"], "unknown lever"),
    (["--batch-sizes", "6x"], "--batch-sizes"),
    (["--ctx", "cpu0,cpu1", "--batch-sizes", "1"], "at least the number of contexts"),
    (["--kvstore", "bogus"], "--kvstore"),
    (["--model", "nonesuch"], "unknown model"),
])
def test_tune_bad_input(args, message):
    with pytest.raises(UserError, match=message):
        parse_args(["--model", "mlp"] + args)


def test_tune_cli_bad_input_is_one_line(run):
    p = run("gluonperf.tune", "--levers", "magic")
    assert p.returncode == 2 and "unknown lever" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_the_winners_warnings_know_that_train_sets_its_own_threads(monkeypatch):
    from gluonperf.runtime.threads import physical_cores
    from gluonperf.records import Result

    def baseline_wins(cands, *args, **kwargs):
        return [Result("tune", cands[0].name, {"ratio": 1.0})]

    monkeypatch.setattr(search, "paired_sweep", baseline_wins)
    monkeypatch.setattr(search, "sweep", baseline_wins)
    best = {}
    for runner in (TRAIN, STEPRATE):
        out = model_tune.tune("mlp", Space(("cpu",), (8,), only=("hybridize",)), runner)
        best[runner.module] = out[-1].metrics["warnings"]
    assert best["gluonperf.train"] == []  # no "OMP_NUM_THREADS unset" for a command that sets it
    if physical_cores() > 1:  # the steprate worker runs with the environment it is given
        assert any("OMP_NUM_THREADS unset" in w for w in best["gluonperf.workers.steprate"])


def test_dtype_lever_only_where_bfloat16_can_pay_and_its_winner_is_flagged(monkeypatch):
    from gluonperf.records import Result
    monkeypatch.setattr(model_levers, "has_bf16", lambda: False)
    assert "dtype" not in dict(levers(Candidate("b"), ["cpu0"], [64], ["device"], cores=2, runner=TRAIN))
    monkeypatch.setattr(model_levers, "has_bf16", lambda: True)
    monkeypatch.setattr(model_levers, "why_no_bf16", lambda: "DNNL_MAX_CPU_ISA=AVX2 keeps oneDNN below AVX-512")
    assert "dtype" not in dict(levers(Candidate("b"), ["cpu0"], [64], ["device"], cores=2, runner=TRAIN))
    monkeypatch.setattr(model_levers, "why_no_bf16", lambda: None)
    assert [c.flag("dtype") for c in stage("dtype")] == [None, "bfloat16"]
    assert "dtype" not in dict(levers(Candidate("b"), ["cpu0"], [64], ["device"], cores=2, runner=STEPRATE))
    assert "dtype" not in dict(levers(Candidate("b"), ["gpu0"], [64], ["device"], cores=2, runner=TRAIN))

    def challenger_wins(cands, *args, **kwargs):
        return [Result("tune", cands[-1].name, {"ratio": 1.9, "ratio_ci_low": 1.5, "verdict": "faster"})]
    monkeypatch.setattr(search, "paired_sweep", challenger_wins)
    monkeypatch.setattr(search, "sweep", challenger_wins)
    best = model_tune.tune("mlp", Space(("cpu",), (8,), only=("dtype",)), TRAIN)[-1].metrics
    assert "--dtype bfloat16" in best["command"] and any("changes the arithmetic" in w for w in best["warnings"])


def test_levers_with_nothing_to_try_here_are_named_and_alone_refused(monkeypatch):
    """`--levers dtype` on a CPU without bfloat16 ran 0 runs and printed an empty table and
    '1.00x the defaults' (an AMD EPYC Zen 3): now one line says why, before anything runs."""
    monkeypatch.setattr(model_levers, "has_bf16", lambda: False)
    with pytest.raises(UserError, match=r"^--levers dtype: nothing to try here: dtype \(needs the train runner "
                                        r"\(the default\), CPU contexts and a CPU with AMX or AVX512-BF16\)$"):
        parse_args(["--levers", "dtype", "--runner", "train"])
    with pytest.raises(UserError, match=r"nothing to try here: contexts \(needs several contexts in --ctx\); "
                                        r"dtype \(needs"):
        parse_args(["--levers", "contexts,dtype", "--ctx", "cpu0", "--runner", "train"])
    _, checked = parse_args(["--levers", "dtype,bulk", "--runner", "train"])
    assert checked.idle == ("dtype (needs %s)" % model_levers.LEVER_NEEDS["dtype"],)
    assert checked.space.only == ("dtype", "bulk")
    assert parse_args(["--levers", "bulk"])[1].idle == ()


def test_every_lever_that_can_be_empty_says_what_it_needs(monkeypatch):
    """A lever with only its baseline in the barest setting (one core, one context, the
    steprate runner, no bfloat16, no allocator library, an optimizer with one implementation) must
    have an entry in LEVER_NEEDS."""
    monkeypatch.setattr(model_levers, "has_bf16", lambda: False)
    monkeypatch.setattr(model_levers, "allocators", lambda: [])
    monkeypatch.setattr(model_levers, "huge_pages_tunable", lambda: None)
    base = Candidate("b", (), (("ctx", "cpu0"), ("hybridize", "none"), ("optimizer", "adam")))
    bare = {lever for lever, make in levers(base, ["cpu0"], [64], ["device"], cores=1, runner=STEPRATE)
            if len(make(base)) > 1}
    assert set(model_levers.LEVER_NAMES) - bare == set(model_levers.LEVER_NEEDS)


def test_levers_refuses_a_missing_preload_library_and_unknown_candidates(monkeypatch, tmp_path):
    """The dynamic loader ignores a missing LD_PRELOAD library with a warning: the candidate
    would be measured without its lever. benchmarks/levers.py refuses it up front."""
    import os
    import sys
    from helpers import ROOT
    from gluonperf import UserError
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import levers
    monkeypatch.setattr(levers, "INTEL_OMP", str(tmp_path / "libiomp5.so"))
    with pytest.raises(UserError, match="libiomp5.so, which is not there"):
        levers.main(["--only", "36"])
    for bad in ("99", "abc", "4,"):  # no candidate by that number: refused, not ignored
        with pytest.raises(UserError, match="candidate numbers from 1 to"):
            levers.main(["--only", bad])
    sys.modules.pop("levers", None)


def test_a_stopped_throughput_suite_keeps_its_runs(monkeypatch):
    """benchmarks/train_throughput.py stopped before PyTorch's first run keeps its other runs,
    without vs_pytorch (its intervals are tested in test_suites.py)."""
    import os
    import sys
    from helpers import ROOT
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    import train_throughput
    # a suite stopped before PyTorch's first run keeps its other runs, without vs_pytorch
    sweeps = Sweeps()
    cands = [Candidate("book loop", (), (("batch_size", "8"),), Runner("book")),
             Candidate("pytorch eager", (), (("batch_size", "8"),), Runner("torch"))]

    def stopped_sweep(candidates, runner, steps, rounds, observers, **kwargs):  # one book-loop run, then a signal
        from gluonperf.tuning.schedule import Table
        observers.sweeps.start(Table(candidates, rounds, "t", figures={"book loop": [50.0], "pytorch eager": []},
                                     start={}))
        raise KeyboardInterrupt
    monkeypatch.setattr(train_throughput, "candidates", lambda *a, **k: cands)
    monkeypatch.setattr(train_throughput, "sweep", stopped_sweep)
    with pytest.raises(KeyboardInterrupt):
        train_throughput.run([8], 1, 1, Runner("x"), torch=Runner("torch"), sweeps=sweeps)
    kept = sweeps.results()
    assert [r.name for r in kept] == ["book loop"] and kept[0].metrics["partial"]
    assert kept[0].metrics["batch_size"] == 8 and "vs_pytorch" not in kept[0].metrics
    sys.modules.pop("train_throughput", None)


def fake_tune(tmp_path, monkeypatch, gain, noise, rounds, seed="1", **kw):
    """tune() on the fake worker, whose engine lever's candidate runs `gain` times as fast as the
    baseline, every figure with a log-normal spread `noise`."""
    (tmp_path / "fake_worker.py").write_text(FAKE)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    for k, v in (("FAKE_ENGINE_GAIN", gain), ("FAKE_NOISE", noise), ("FAKE_SEED", seed),
                 ("FAKE_STARTS", tmp_path / "starts")):
        monkeypatch.setenv(k, str(v))
    runner = Runner("fake_worker", serves=True)
    return model_tune.tune("mlp", Space(("cpu",), (8,), only=("engine",)), runner, search.Settings(rounds, steps=1),
                           **kw)


def test_a_clear_gain_is_kept_and_confirmed_with_its_interval(tmp_path, monkeypatch):
    out = fake_tune(tmp_path, monkeypatch, gain=2.0, noise=0.05, rounds=6)
    engine = [r.metrics for r in out if r.metrics.get("lever") == "engine" and r.metrics["verdict"] != "baseline"][0]
    assert engine["verdict"] == "faster" and engine["ratio_ci_low"] > 1.5
    # verdicts are corrected for the candidates tried: one candidate here, so 95%
    assert engine["ratio_level"] == pytest.approx(0.95) or engine["ratio_level"] == pytest.approx(0.99)
    best = out[-1].metrics
    assert best["kept_levers"] == ["engine"] and best["verdict"] == "faster"
    # the speed-up is the confirmation run's, with its own interval, covering the true 2.0
    assert best["speedup_ci_low"] < 2.0 < best["speedup_ci_high"] and best["speedup_n"] == 6
    confirm = [r.metrics for r in out if r.metrics.get("lever") == "confirm"]
    assert len(confirm) == 2 and "MXNET_ENGINE_TYPE=ThreadedEngine" in best["command"]


def test_the_same_settings_twice_are_never_kept(tmp_path, monkeypatch):
    """A/A: the candidate is the baseline's equal (gain 1) with 10% noise per figure. Today's
    rule kept whichever median came out above 1 (half the time); now 10 seeds keep none."""
    kept = []
    for seed in range(10):
        out = fake_tune(tmp_path, monkeypatch, gain=1.0, noise=0.10, rounds=5, seed=str(seed))
        best = out[-1].metrics
        kept.append(bool(best["kept_levers"]))
        assert best["speedup"] == 1.0 and best["verdict"] == "defaults"
    assert not any(kept)


def test_winner_needs_the_interval_not_the_median():
    from gluonperf.records import Result
    results = [Result("tune", "base", {"verdict": "baseline", "ratio": 1.0}),
               Result("tune", "lucky", {"verdict": "inconclusive", "ratio": 1.3, "ratio_ci_low": 0.8}),
               Result("tune", "sure", {"verdict": "faster", "ratio": 1.2, "ratio_ci_low": 1.1}),
               Result("tune", "surer", {"verdict": "faster", "ratio": 1.15, "ratio_ci_low": 1.12})]
    assert winner(results).name == "sure"  # the highest estimate of those judged faster
    assert winner(results[:2]) is None


def test_summarize_corrects_the_level_for_the_candidates_tried():
    from gluonperf.tuning import schedule
    cands = [Candidate("b")] + [Candidate("c%d" % i) for i in range(4)]
    figures = {"b": [10.0] * 5, **{"c%d" % i: [11.0] * 5 for i in range(4)}}
    ratios = {"b": [1.0] * 5, **{"c%d" % i: [1.1, 1.12, 1.08, 1.1, 1.11] for i in range(4)}}
    table = schedule.Table(cands, 5, "x", figures=figures, ratios=ratios, start={})
    out = schedule.summarize(table)
    levels = [r.metrics.get("ratio_level") for r in out if r.name != "b"]
    assert levels == [pytest.approx(1 - 0.05 / 4)] * 4
    assert all(r.metrics.get("ratio_joint_level") == 0.95 for r in out if r.name != "b")
    # the verdict states the level the four hold together, as tune's title does, not each one's 98.75%
    for r in (r for r in out if r.name != "b"):
        assert r.metrics["verdict_text"].startswith("faster: 1.10x (95% CI "), r.metrics["verdict_text"]


def test_rounds_fixed_and_auto_and_the_budget():
    fixed = Rounds(fixed=3)
    wide = {"c": [1.3, 0.8, 1.1, 0.9, 1.4]}
    assert fixed.more(2, wide, 10 ** 6) and not fixed.more(3, wide, 0)
    clock = [0.0]
    auto = Rounds(maximum=8, budget=Budget(100, per_run=5, clock=lambda: clock[0]))
    assert auto.more(1, wide, 3) and auto.more(7, wide, 3) and not auto.more(8, wide, 3)
    clock[0] = 80.0  # 20 s left: a round of 3 runs of 5 s fits (with the margin), one of 4 does not
    assert auto.more(2, wide, 3) and not auto.more(2, wide, 4)
    auto.budget.ran(7.0)  # the longest run seen so far plans the rounds
    assert not auto.more(2, wide, 3) and auto.budget.left() == 20.0
    clock[0] = 100.0  # the budget stops new rounds: the intervals hold whenever they stop
    assert not auto.more(2, wide, 1) and auto.budget.left() == 0.0
    with pytest.raises(ValueError):
        Rounds(maximum=2)
    with pytest.raises(ValueError):
        Budget(0)


def test_interleave_runs_each_candidate_until_it_leaves():
    """Each round runs the baseline and every candidate still in once, in a rotating order; a
    candidate leaves when its verdict is settled, and is not run again."""
    from gluonperf.tuning import schedule
    runs = []
    speed = {"b": 10.0, "fast": 20.0, "same": 10.0}

    def measure(c):
        runs.append(c.name)
        return speed[c.name] * (1 + 0.01 * (len(runs) % 3)), None
    table = schedule.Table([Candidate("b"), Candidate("fast"), Candidate("same")], quiet(Rounds()), "x", start={})
    schedule.interleave(table, measure)
    by = {r.name: r.metrics for r in schedule.summarize(table)}
    assert by["fast"]["verdict"] == "faster" and by["fast"]["stopped"] == "faster"
    assert by["same"]["verdict"] in ("same", "inconclusive") and by["same"]["stopped"] in ("cannot pay",
                                                                                             "cannot be shown faster")
    # the baseline runs only while a candidate is in
    assert runs.count("fast") == by["fast"]["rounds"] and runs.count("b") == max(by["fast"]["rounds"],
                                                                                  by["same"]["rounds"])
    assert by["b"]["rounds"] == runs.count("b") < Rounds().maximum
    assert runs[:3] == ["b", "fast", "same"] and runs[3:6] == ["fast", "same", "b"]  # the order rotates


@pytest.mark.parametrize("value", ["0", "x", "-2"])
def test_rounds_flag_takes_a_number_or_auto(value, run):
    p = run("gluonperf.tune", "--rounds", value)
    assert p.returncode == 2 and "--rounds" in p.stderr and len(p.stderr.strip().splitlines()) <= 2


def test_optimizer_is_trained_in_every_candidate_and_its_lever_knows_it(monkeypatch):
    seen = []

    def record(cands, *args, **kwargs):
        seen.extend(c.flag("optimizer") for c in cands)
        return []
    monkeypatch.setattr(search, "sweep", record)
    monkeypatch.setattr(search, "paired_sweep", record)
    best = model_tune.tune("mlp", Space(("cpu",), (8,), only=("hybridize", "optimizer"), optimizer="adamw"), TRAIN)[-1]
    assert seen and set(seen) == {"adamw"} and "--optimizer adamw" in best.metrics["command"]
    with pytest.raises(ValueError, match="train runner"):
        model_tune.tune("mlp", Space(("cpu",), (8,), optimizer="adam"), STEPRATE)
    with pytest.raises(UserError, match="nothing to try here.*--optimizer sgd or adamw"):
        parse_args(["--model", "mlp", "--optimizer", "adam", "--levers", "optimizer"])


def test_a_candidate_slower_in_its_first_two_rounds_leaves_with_an_interval_too_wide_to_print():
    """Slower than the baseline in both of its first 2 rounds (futility): it leaves, and its interval,
    at 1% of its error rate with one degree of freedom, is too wide to print (its end past what a float
    holds is inf), never a traceback and never a verdict of 'slower' from 2 rounds."""
    from gluonperf.records import format_estimate
    from gluonperf.tuning import schedule
    figures = iter([10.0, 6.0, 5.0, 9.0] * 3)
    table = schedule.Table([Candidate("b"), Candidate("slow")], quiet(Rounds()), "x", start={})
    schedule.interleave(table, lambda c: (next(figures), None))
    m = {r.name: r.metrics for r in schedule.summarize(table)}["slow"]
    assert m["stopped"] == "slower in every round" and m["rounds"] == 2 and m["verdict"] == "inconclusive"
    assert format_estimate("ratio", m["ratio"], m["ratio_ci_low"], m["ratio_ci_high"]).endswith("(too few rounds)")


def test_a_round_with_the_machine_busy_elsewhere_runs_again(monkeypatch):
    """Under the sequential plan a round during which other processes kept more than 0.1 of a core
    busy (measured beside the runs, not from their figures) is set aside whole and run again, at
    most `reruns` times a lever, and not again once a run again was busy too; its ratios stay in the
    records and a line says so. Rounds under a second are not judged (the CPU times count in ticks), and a fixed number of rounds runs exactly."""
    from gluonperf.measure import machine
    from gluonperf.tuning import schedule
    loads = []

    class Watch:  # the machine's load in each round, as the test sets it
        def round(self):
            return loads.pop(0)
    monkeypatch.setattr(machine, "Watch", Watch)
    quiet = {"others_busy_cores": 0.0, "steal_share": 0.0, "seconds": 5.0}
    busy = {"others_busy_cores": 0.3, "steal_share": 0.0, "seconds": 5.0}
    assert machine.disturbed(busy) and not machine.disturbed(quiet)
    assert not machine.disturbed(dict(busy, seconds=0.2))
    assert machine.disturbed(dict(quiet, steal_share=0.2))

    def tune(rounds, pattern):
        loads[:] = list(pattern)
        runs = []
        speed = {"b": 10.0, "fast": 20.0}

        def measure(c):
            runs.append(c.name)
            return speed[c.name] * (0.5 if loads and loads[0] is busy else 1.0) * (1 + 0.01 * (len(runs) % 3)), None
        table = schedule.Table([Candidate("b"), Candidate("fast")], rounds, "x", start={})
        schedule.interleave(table, measure)
        return {r.name: r.metrics for r in schedule.summarize(table)}, runs

    # the 2nd round is busy: it runs again, and the ratios are those of the quiet rounds only
    by, runs = tune(Rounds(), [quiet, busy] + [quiet] * 10)
    fast = by["fast"]
    assert fast["verdict"] == "faster" and len(fast["round_ratios"]) == fast["rounds"]
    assert runs.count("fast") == fast["rounds"] + 1 and len(fast["round_load"]) == fast["rounds"]
    assert fast["rerun_rounds"] == [dict(busy, round=2, why="other processes kept 0.30 of a core busy",
                                         ratio=pytest.approx(2.0, rel=0.03))]
    assert by["b"]["rerun_rounds"][0]["ratio"] == 1.0 and max(fast["round_load"]) == 0.0
    from gluonperf.records import Result
    assert schedule.rerun_line([Result("tune", "fast", fast)]) == (
        "1 round ran again: the machine was busy elsewhere during it (other processes kept 0.30 of a core busy)")
    assert schedule.rerun_line([Result("tune", "b", by["b"]), Result("tune", "fast", fast)]).startswith("1 round")
    # at most `reruns` a lever: past them the busy rounds are kept
    by, runs = tune(Rounds(reruns=2), [busy, quiet, busy, quiet, busy] + [quiet] * 10)
    assert [x["round"] for x in by["fast"]["rerun_rounds"]] == [1, 2] and by["fast"]["round_load"][:3] == [0.0, 0.0, 0.3]
    # a machine busy for longer than a round: the round run again is kept, and no other runs again
    by, runs = tune(Rounds(), [busy] * 12)
    assert [x["round"] for x in by["fast"]["rerun_rounds"]] == [1] and set(by["fast"]["round_load"]) == {0.3}
    assert runs.count("fast") == by["fast"]["rounds"] + 1
    # a fixed number of rounds: exactly those, busy or not
    by, runs = tune(Rounds(fixed=3), [busy] * 3)
    assert "rerun_rounds" not in by["fast"] and runs.count("fast") == 3


def test_a_baseline_that_moved_between_rounds_is_warned_of_without_widening_the_intervals(monkeypatch):
    """The baseline 40% faster in one round than in another, the machine otherwise quiet: the records
    say it moved, the intervals stay at 95% (each ratio is against the baseline's run of its own round),
    and the note says why; other processes busy past 0.5 cores still make them 99%."""
    from gluonperf.measure import machine
    from gluonperf.tuning import schedule
    loads = []

    class Watch:
        def round(self):
            return loads.pop(0)
    monkeypatch.setattr(machine, "Watch", Watch)

    def tune(load):
        loads[:] = [dict(load, seconds=0.5)] * 3
        figures = {"b": iter([10.0, 14.0, 10.0]), "c": iter([20.0, 29.4, 20.5])}
        table = schedule.Table([Candidate("b"), Candidate("c")], Rounds(fixed=3), "x", start={})
        schedule.interleave(table, lambda c: (next(figures[c.name]), None))
        return table, {r.name: r for r in schedule.summarize(table)}

    table, by = tune({"others_busy_cores": 0.0, "steal_share": 0.0})
    m = by["c"].metrics
    assert table.stable() and m["ratio_joint_level"] == 0.95 and not schedule.widened(by.values())
    assert m["machine_warnings"] == ["the baseline itself moved by 40% between rounds"]
    assert "the drift cancels" in machine.warning_line(m["machine_warnings"], schedule.widened(by.values()))
    table, by = tune({"others_busy_cores": 0.7, "steal_share": 0.0})
    assert not table.stable() and by["c"].metrics["ratio_joint_level"] == 0.99 and schedule.widened(by.values())
    assert "99% instead of 95%" in machine.warning_line(by["c"].metrics["machine_warnings"], True)


def test_a_candidate_the_plan_removed_is_never_told_that_rounds_would_settle_it():
    """Issue 70, item 5: slower in its first two rounds, outrun, or failed: the plan stopped it, and its
    verdict says why, not 'about N rounds would settle it'."""
    from gluonperf.tuning import schedule
    runs = []

    def measure(c):
        runs.append(c.name)
        if c.name == "broken" and runs.count("broken") == 2:
            return None, "exit 1: boom"
        return {"b": 10.0, "slow": 9.0 + 0.4 * (runs.count("slow") % 2), "broken": 10.5}[c.name], None
    table = schedule.Table([Candidate("b"), Candidate("slow"), Candidate("broken")], quiet(Rounds()), "x", start={})
    schedule.interleave(table, measure)
    by = {r.name: r.metrics for r in schedule.summarize(table)}
    assert by["slow"]["stopped"] == "slower in every round" and by["broken"]["stopped"] == schedule.ERROR, by
    for name, why in (("slow", "slower than its baseline in each of its first 2 rounds: stopped"),
                      ("broken", "a run failed: stopped")):
        assert by[name]["verdict_text"].endswith(why) and "would settle it" not in by[name]["verdict_text"], by

"""How long `infer` says it will take (gluonperf/inference/estimate.py), its default rule (one
cheap cold start per rung, the largest batch fitted to --budget), and the bar of the time left.
Every time here is made up: a fake plan of fake rungs and per-call seconds given by hand, a
fake clock for the bar; nothing is timed and nothing depends on how fast the machine is."""
from dataclasses import dataclass
from typing import Optional

import pytest

from gluonperf.inference import estimate as est
from gluonperf.inference.instances import Layout
from gluonperf.inference.loadgen import FEWEST_QUERIES, Minimums
from gluonperf.inference.serve import SERVER_TRIALS, Plan, Session

TWO_CORES = [Layout(1, 2), Layout(2, 1)]
RUNGS = ("fp32", "static", "fused", "bf16", "int8")


@dataclass(frozen=True)
class FakeRung:
    name: str
    error: Optional[str] = None

    def to_text(self):
        return '{"name": "%s"}' % self.name


def plan(rungs=RUNGS, layouts=TWO_CORES, scenarios=("single-stream", "offline"), batch_sizes=(1, 64), **kw):
    kw.setdefault("cold_starts", 1)
    kw.setdefault("cold_steady_calls", 1)
    return Plan(rungs=[FakeRung(r) for r in rungs], layouts=list(layouts), scenarios=tuple(scenarios),
                batch_sizes=tuple(batch_sizes), cold_start=(1, max(batch_sizes)), **kw)


def times(at1, at8, rungs=RUNGS, load=1.0, threads=2):
    """Every rung at `at1` s a call at batch 1 and `at8` at batch 8, in a parent of `threads` threads."""
    return est.CallTimes({r: {1: at1, 8: at8} for r in rungs}, {r: load for r in rungs}, threads)


RESNET50 = times(0.05, 0.4)      # about what ResNet-50 takes on 2 Zen 4 cores
LENET = times(1e-4, 3e-4)


# --- call times ---------------------------------------------------------------------------

def test_a_call_is_interpolated_between_the_sizes_timed_and_proportional_beyond():
    t = est.CallTimes({"static": {1: 0.01, 8: 0.08}}, {"static": 0.5}, threads=2)
    assert t.call("static", 1) == pytest.approx(0.01)
    assert t.call("static", 4) == pytest.approx(0.04)
    assert t.call("static", 64) == pytest.approx(0.64)  # per sample no cheaper than at 8
    assert t.call("static", 8, threads=1) == pytest.approx(0.16)  # half the threads, twice the time
    assert t.load("static") == 0.5


def test_a_rung_not_timed_costs_as_much_as_the_slowest_timed():
    t = est.CallTimes({"static": {1: 0.01}, "int8": {1: 0.003}}, {"static": 2.0})
    assert t.call("torch", 1) == pytest.approx(0.01)
    assert t.load("int8") == 2.0


@pytest.mark.parametrize("calls, threads", [({}, 1), ({"static": {}}, 1), ({"static": {0: 0.1}}, 1),
                                            ({"static": {1: 0.0}}, 1), ({"static": {1: 0.1}}, 0)])
def test_bad_call_times_are_a_value_error(calls, threads):
    with pytest.raises(ValueError):
        est.CallTimes(calls, {}, threads)


# --- the estimate -----------------------------------------------------------------------------

def test_the_estimate_of_a_small_plan_is_its_steps_by_hand():
    p = plan(rungs=("static",), layouts=[Layout(1, 1)], scenarios=("single-stream",), batch_sizes=(1,),
             cold_starts=0, rounds=3, minimums=Minimums(1.0))
    t = est.CallTimes({"static": {1: 0.05}}, {"static": 1.0}, threads=1)
    guess = est.estimate(p, t, cores=1)
    start = est.IMPORT_S + 1.0
    warm = (est.BUILD_CALLS + est.WARM_CALLS) * 0.05
    run = max(1.0, FEWEST_QUERIES["single-stream"] * 0.05) + est.RUN_OVERHEAD_S
    assert guess.seconds(("warm", Layout(1, 1), "static")) == pytest.approx(start + warm)
    assert guess.seconds(("run", Layout(1, 1), "static", "single-stream", 1)) == pytest.approx(run)
    assert guess.total_s == pytest.approx(start + warm + 3 * run)
    assert guess.runs == 3 and guess.parts["cold starts"] == 0
    assert guess.total_s == pytest.approx(sum(guess.parts.values()))


def test_every_step_the_session_names_is_priced_and_sums_to_the_total():
    p = plan(scenarios=("single-stream", "multi-stream", "offline", "server"), latency_bound_s=0.05,
             batch_window_s=0.005, rounds=3)
    guess = est.estimate(p, RESNET50, cores=2)
    kinds = {step[0] for step in guess.steps}
    assert kinds == {"cold", "warm", "run", "server", "confirm"}
    summed = sum(p.cold_starts * guess.seconds(("cold", r)) for r in RUNGS)
    for layout in TWO_CORES:
        for r in RUNGS:
            summed += guess.seconds(("warm", layout, r))
            summed += sum(p.rounds * guess.seconds(("run", layout, r) + c) for c in p.configurations())
            summed += sum(SERVER_TRIALS * guess.seconds(("server", layout, r, w)) for w in p.windows())
    summed += p.planned_confirmation() * guess.seconds(("confirm",))
    assert summed == pytest.approx(guess.total_s)
    assert guess.seconds(("no such step",)) == 0.0


def test_a_run_lasts_its_minimum_duration_at_least():
    p = plan(rungs=("static",), layouts=[Layout(1, 2)], cold_starts=0, minimums=Minimums(5.0))
    guess = est.estimate(p, LENET, cores=2)
    for config in p.configurations():
        assert guess.seconds(("run", Layout(1, 2), "static") + config) >= 5.0
    mlperf = est.estimate(plan(rungs=("static",), layouts=[Layout(1, 2)], minimums=Minimums(1.0, mlperf=True)),
                          LENET, cores=2)
    assert mlperf.total_s >= 600 * mlperf.runs


def test_the_old_defaults_on_resnet50_were_past_ten_minutes_in_cold_starts_alone():
    """15 cold starts of 10 steady calls at batch 64 (the issue's 10 minutes), and the new default's one a rung."""
    old = est.estimate(plan(cold_starts=3, cold_steady_calls=10), RESNET50, cores=2)
    new = est.estimate(plan(), RESNET50, cores=2)
    assert old.parts["cold starts"] > 600
    assert new.parts["cold starts"] < old.parts["cold starts"] / 5


def test_at_the_defaults_a_slow_model_gets_a_smaller_batch_and_fits_the_budget():
    p, guess = est.fit_batch(plan(), RESNET50, cores=2, budget_s=600, spent_s=20)
    assert max(p.batch_sizes) < 64 and p.batch_sizes[0] == 1 and p.cold_start == (1, max(p.batch_sizes))
    room = est.FIT_SHARE * 600  # the estimate's error left room for
    assert 20 + guess.total_s <= room
    bigger = est.with_largest_batch(p, 2 * max(p.batch_sizes))
    assert 20 + est.estimate(bigger, RESNET50, cores=2).total_s > room  # the largest that fits
    assert est.estimate(plan(), RESNET50, cores=2).total_s > 600       # batch 64 would not


def test_at_the_defaults_a_fast_model_keeps_batch_64():
    p, guess = est.fit_batch(plan(), LENET, cores=2)
    assert p.batch_sizes == (1, 64) and guess.total_s < est.BUDGET_S


def test_when_no_batch_fits_the_smallest_is_taken_and_the_estimate_says_how_long():
    p, guess = est.fit_batch(plan(), times(5.0, 40.0), cores=2, budget_s=600)
    assert max(p.batch_sizes) == min(est.FIT_BATCHES) and guess.total_s > 600


@pytest.mark.parametrize("call", [lambda: est.fit_batch(plan(), LENET, 2, candidates=()),
                                  lambda: est.fit_batch(plan(), LENET, 2, budget_s=0),
                                  lambda: est.fit_batch(plan(), LENET, 2, share=0),
                                  lambda: est.with_largest_batch(plan(), 0),
                                  lambda: est.estimate(plan(), LENET, cores=0)])
def test_bad_arguments_are_a_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_each_shortening_flag_says_what_it_would_leave():
    p = plan(rounds=5)
    full = est.estimate(p, RESNET50, cores=2).total_s
    options = est.shorter(p, RESNET50, cores=2)
    assert {o["flag"] for o in options} == {"--layouts", "--precision", "--scenario", "--batch-sizes", "--rounds",
                                            "--cold-starts"}
    assert all(o["total_s"] < full for o in options)
    assert [o["total_s"] for o in options] == sorted(o["total_s"] for o in options)
    by = {o["flag"]: o["value"] for o in options}
    assert by["--layouts"] in ("1x2", "2x1") and by["--rounds"] == "3" and by["--batch-sizes"] == "1,8"
    assert "static" in by["--precision"].split(",") and len(by["--precision"].split(",")) == 4
    assert by["--scenario"] in ("single-stream", "offline")
    assert "--rounds" not in {o["flag"] for o in est.shorter(plan(rounds=3), RESNET50, cores=2)}


# --- the session's steps, priced ----------------------------------------------------------------

def test_the_session_reports_each_cold_start_at_its_expected_seconds(monkeypatch):
    """The cold starts run (coldstart.measure faked): the bar advances by the estimate's seconds
    of each, and a cold start runs the plan's steady calls."""
    from gluonperf.inference import coldstart
    asked = []

    def fake(rung, ctx, batch_sizes, timeout=300, steady_calls=coldstart.STEADY_CALLS):
        asked.append((rung.name, tuple(batch_sizes), steady_calls))
        return {"total_s": 1.0, "batch_sizes": list(batch_sizes), "steady_calls": steady_calls}
    monkeypatch.setattr(coldstart, "measure", fake)
    p = plan(rungs=("static", "int8"), cold_starts=2)
    guess = est.estimate(p, RESNET50, cores=2)
    done = []
    Session(p, library=None, progress=done.append, cost=guess.seconds)._cold_starts()
    assert [a[0] for a in asked] == ["static", "int8", "int8", "static"]  # rotating
    assert all(a[1:] == ((1, 64), 1) for a in asked)
    assert done == [guess.seconds(("cold", name)) for name, _, _ in asked]
    counted = []
    Session(p, library=None, progress=counted.append)._cold_starts()  # without a cost: runs counted
    assert counted == [1, 1, 1, 1]


def test_infer_defaults_to_one_cheap_cold_start_and_the_flag_keeps_its_ten_calls(tmp_path):
    from gluonperf import infer
    from gluonperf.inference.coldstart import STEADY_CALLS
    default = infer.plan_of(infer.build_parser().parse_args([]), [FakeRung("static")], {}, ("offline",), TWO_CORES,
                            str(tmp_path))
    assert (default.cold_starts, default.cold_steady_calls, default.batch_sizes) == (1, 1, (1, 64))
    asked = infer.plan_of(infer.build_parser().parse_args(["--cold-starts", "3", "--batch-sizes", "1,16"]),
                          [FakeRung("static")], {}, ("offline",), TWO_CORES, str(tmp_path))
    assert (asked.cold_starts, asked.cold_steady_calls, asked.cold_start) == (3, STEADY_CALLS, (1, 16))


def test_the_command_states_the_estimates_rule_as_the_estimate_has_it():
    from gluonperf import infer
    assert infer.FIT_BATCHES == est.FIT_BATCHES and infer.BUDGET_S == est.BUDGET_S and infer.FIT_SHARE == est.FIT_SHARE
    assert infer.DEFAULT_BATCH_SIZES[-1] == max(est.FIT_BATCHES)


def test_the_estimate_lines_name_the_batch_chosen_and_the_flags_past_the_budget(tmp_path):
    from gluonperf import infer
    args = infer.build_parser().parse_args([])
    p, guess = est.fit_batch(plan(), RESNET50, cores=2, budget_s=args.budget)
    lines = infer.estimate_lines(args, p, guess, RESNET50, 2, spent_s=30)
    assert lines[0].startswith("infer: about ") and "from here" in lines[0] and "static: 50 ms at batch 1" in lines[0]
    assert any("--batch-sizes 1,%d: the largest batch of 64,32,16,8 whose plan fits within 85%% of --budget 600 s"
               % max(p.batch_sizes) in line for line in lines)
    assert not any("past --budget" in line for line in lines)
    slow = times(5.0, 40.0)
    p, guess = est.fit_batch(plan(), slow, cores=2, budget_s=args.budget)
    last = infer.estimate_lines(args, p, guess, slow, 2, spent_s=30)[-1]
    assert last.startswith("infer: that is past --budget 600 s; shorter: --")
    for flag in ("--layouts", "--precision", "--scenario", "--cold-starts"):
        assert flag in last


# --- the bar of the time left -------------------------------------------------------------------

def test_a_bar_not_shown_says_the_time_left_from_how_the_work_so_far_compared(monkeypatch, capsys):
    """stderr is not a terminal under pytest: no bar, a line a minute. 25 of 100 expected seconds
    done in 61 real seconds: the rest at that pace, 183 s."""
    from gluonperf.cli import common
    clock = [1000.0]
    monkeypatch.setattr(common, "_now", lambda: clock[0])
    bar = common.progress_bar(100.0, "infer", seconds=True)
    clock[0] += 30
    bar.update(10)
    assert "left" not in capsys.readouterr().err  # not a minute yet
    clock[0] += 31
    bar.update(15)
    assert "infer: 1 min 1 s gone, about 3 min 3 s left" in capsys.readouterr().err
    bar.close()


# --- the parent's timing, on a tiny model (what it returns, never how fast) -------------------------

def test_call_times_times_each_built_rung_and_leaves_out_one_that_fails(tmp_path):
    import mxnet as mx
    from dataclasses import replace
    from gluonperf.inference import ladder
    source = ladder.model_source("mlp")
    rungs = ladder.prepare(source, ["fp32", "static"], mx.cpu(), str(tmp_path))
    broken = replace(rungs[1], name="int8", kind="symbol", symbol=str(tmp_path / "none-symbol.json"))
    t = est.call_times(rungs + [broken, FakeRung("bf16", error="not here")], mx.cpu(), sizes=(1, 2),
                       spec=source.model_spec(), threads=2)
    assert set(t.calls) == {"fp32", "static"} and set(t.load_s) == {"fp32", "static"} and t.threads == 2
    assert all(set(calls) == {1, 2} and all(s > 0 for s in calls.values()) for calls in t.calls.values())
    with pytest.raises(ValueError):
        est.call_times([broken], mx.cpu())

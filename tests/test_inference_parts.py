"""What the parts of `infer` compute, each alone: the server's rate search (with a fake runner),
the rounds into records and ratios, what to deploy, the layouts, the server's batching, the
shared-memory sample library, and LoadGen's log read from real short LoadGen runs.
None of it depends on how fast the machine is."""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers import ROOT, clean_env
from gluonperf.inference import deploy, loadgen, rounds
from gluonperf.inference.instances import Batcher, Layout, assign_cores, buckets, factorizations, padded, parse_layouts
from gluonperf.inference.samples import SHM_DIR, SampleLibrary
from gluonperf.inference.search import Trial, find_peak_rate


# --- the rate search -------------------------------------------------------------------

def capacity(limit, calls=None):
    """A fake server: every rate up to `limit` is valid; its p99 grows with the rate."""
    def run(rate):
        if calls is not None:
            calls.append(rate)
        return Trial(rate, rate <= limit, p99_s=0.01 * rate / limit)
    return run


@pytest.mark.parametrize("start", [10.0, 700.0, 5000.0])
def test_the_search_brackets_the_highest_valid_rate(start):
    calls = []
    peak = find_peak_rate(capacity(1000.0, calls), start, tolerance=0.1, max_trials=30)
    assert peak.best.valid and not peak.above.valid
    assert peak.best.rate <= 1000.0 < peak.above.rate <= 1.1 * peak.best.rate
    assert peak.resolved
    assert [t.rate for t in peak.trials] == calls  # every rate reported was run, in order
    assert peak.best.rate == max(t.rate for t in peak.trials if t.valid)


def test_the_search_stops_at_its_budget_and_says_so():
    peak = find_peak_rate(capacity(1000.0), 1.0, tolerance=0.01, max_trials=5)
    assert len(peak.trials) == 5 and not peak.resolved
    assert peak.above is None and peak.best.rate == 16.0  # doubling from 1: 1, 2, 4, 8, 16


def test_nothing_valid_gives_the_closest_trial():
    peak = find_peak_rate(lambda rate: Trial(rate, False, p99_s=1.0 + rate), 64.0, lowest=1.0, max_trials=30)
    assert peak.best is None and not peak.resolved
    assert min(t.rate for t in peak.trials) >= 1.0  # gave up at `lowest`
    assert peak.closest().rate == min(t.rate for t in peak.trials)  # the lowest p99


def test_the_search_stops_looking_down_when_the_p99_no_longer_falls():
    """A system whose own latency is past the bound: no lower rate helps, and each lower rate
    takes longer to run its minimum queries."""
    peak = find_peak_rate(lambda rate: Trial(rate, False, p99_s=0.5), 100.0, max_trials=30)
    assert [t.rate for t in peak.trials] == [100.0, 50.0] and peak.best is None


def test_the_search_refuses_a_bad_start():
    with pytest.raises(ValueError):
        find_peak_rate(capacity(1.0), 0.0)


# --- rounds into records ---------------------------------------------------------------

def test_ratios_pair_rounds_and_point_the_right_way():
    ref = [{"round": 0, "p90_s": 0.010}, {"round": 1, "p90_s": 0.012}, {"round": 2, "p90_s": 0.011}]
    fast = [{"round": 0, "p90_s": 0.005}, {"round": 2, "p90_s": 0.0055}]  # round 1 missing: not paired
    assert rounds.round_ratios("single-stream", ref, fast) == pytest.approx([2.0, 2.0])
    assert rounds.round_ratios("offline", [{"round": 0, "samples_per_s": 100.0}],
                               [{"round": 0, "samples_per_s": 150.0}]) == pytest.approx([1.5])
    fields = rounds.ratio_fields("single-stream", ref, fast + [{"round": 1, "p90_s": 0.0062}])
    assert fields["ratio_n"] == 3 and fields["ratio_ci_low"] < fields["ratio"] < fields["ratio_ci_high"]
    assert fields["verdict"] == "faster"


def test_a_configurations_rounds_make_one_record():
    layout = Layout(1, 2)
    run = {"loadgen_valid": True, "queries": 100, "log": "a"}
    runs = {(layout, "static", "offline", 64): [dict(run, round=r, samples_per_s=100.0 + r) for r in range(3)],
            (layout, "fp32", "offline", 64): [dict(run, round=r, samples_per_s=50.0 + r) for r in range(2)]
            + [dict(run, round=2, samples_per_s=52.0, loadgen_valid=False, loadgen_invalid_reason="too short")]}
    records = rounds.config_records(runs, {"model": "lenet", "rungs": {"fp32": {"build_s": 1.5}}})
    static, fp32 = records
    assert static.name == "static 1x2 b64" and static.metrics["verdict"] == "baseline"
    assert static.metrics["samples_per_s"] == 101.0 and static.metrics["loadgen_valid"] is True
    m = fp32.metrics
    assert m["rounds"] == 3 and m["queries"] == 300 and m["loadgen_valid"] is False
    assert m["loadgen_invalid_reason"] == "too short" and m["loadgen_invalid_rounds"] == 1
    assert m["ratio_n"] == 3 and m["ratio"] < 1 and m["build_s"] == 1.5 and m["model"] == "lenet"
    assert m["primary_metric"] == "samples_per_s" and (m["instances"], m["threads"]) == (1, 2)


def test_int8_is_also_set_against_fused_from_the_same_rounds():
    from gluonperf.render.inference import readings
    layout = Layout(1, 2)
    run = {"loadgen_valid": True, "queries": 100}
    rates = {"static": [100.0, 110.0, 90.0], "fused": [80.0, 90.0, 70.0], "int8": [240.0, 275.0, 200.0]}
    runs = {(layout, name, "offline", 64): [dict(run, round=r, samples_per_s=v) for r, v in enumerate(values)]
            for name, values in rates.items()}
    runs[(layout, "int8", "offline", 1)] = [dict(run, round=0, samples_per_s=5.0)]  # no fused at b1: no such ratio
    records = rounds.config_records(runs, {"model": "lenet"})
    by = {r.name: r.metrics for r in records}
    int8 = by["int8 1x2 b64"]
    assert int8["vs_fused_round_ratios"] == pytest.approx([3.0, 275 / 90, 200 / 70])  # round by round, not medians
    assert int8["vs_fused_ratio_n"] == 3 and int8["vs_fused_ratio_ci_low"] < int8["vs_fused_ratio"] < 3.1
    assert int8["vs_fused_verdict"] == "faster" and int8["ratio"] == pytest.approx((2.4 * 2.5 * 200 / 90) ** (1 / 3))
    assert not any(k.startswith("vs_") for k in by["fused 1x2 b64"]) and "vs_fused_ratio" not in by["int8 1x2 b1"]
    line = next(line for line in readings(records) if "against fused" in line)
    assert line.startswith("offline: int8 against fused in the same rounds (what the 8 bits give beyond oneDNN's "
                           "fusion): 1x2 b64 2.97x (95% CI ") and line.endswith("3 rounds) (faster)")


def server_records(rates):
    """Server records of configurations whose searches found `rates` (None: nothing valid)."""
    out = []
    for i, rate in enumerate(rates):
        if rate is None:
            peak = find_peak_rate(lambda r: Trial(r, False, p99_s=0.2 + i, fields={"p99_s": 0.2 + i}), 10.0,
                                  lowest=5.0)
        else:
            peak = find_peak_rate(lambda r, rate=rate: Trial(r, r <= rate, 0.01, {"p99_s": 0.01}), rate / 3,
                                  max_trials=30)
        out.append(rounds.server_record({"model": "lenet"}, "static", Layout(i + 1, 1), 0.0, 8, 0.05, peak))
    return out


def test_deploy_picks_the_highest_valid_rate_with_its_command():
    records = server_records([300.0, 900.0, None])
    advice = deploy.recommend(records, ["--model", "lenet"])
    assert advice.meets and advice.record.metrics["layout"] == "2x1"
    assert advice.record.metrics["rate_at_bound_per_s"] <= 900.0 < advice.record.metrics["rate_invalid_per_s"]
    assert advice.command.startswith("python -m gluonperf.infer --model lenet --precision static --layouts 2x1")
    assert "--latency-bound 50ms" in advice.command and advice.text().startswith("deploy static 2x1 b1")


def gated(records, precision, **fields):
    """The server records of `records`, the one at layout 2x1 turned into rung `precision` with
    the accuracy `fields`."""
    from gluonperf.records import Result
    return [Result(r.bench, r.name.replace("static", precision), dict(r.metrics, precision=precision, **fields))
            if r.metrics["layout"] == "2x1" else r for r in records]


# int8's paired interval on accuracy against static's 0.90: 99% of it is 0.891
KEEPS = dict(accuracy_ref=0.90, accuracy_change=0.0, accuracy_change_ci_low=-0.005, accuracy_change_ci_high=0.005,
             accuracy_n=5000)
MAY_LOSE = dict(KEEPS, accuracy_change_ci_low=-0.0124, accuracy_n=296)


def test_a_rung_below_fp32_is_deployable_only_when_its_interval_clears_the_target():
    assert deploy.gate({"precision": "fused"}) == (True, "float32")
    assert deploy.gate(dict(KEEPS, precision="int8"))[0] is True  # 0.895 >= 0.891
    ok, why = deploy.gate(dict(MAY_LOSE, precision="int8"))  # 0.8876 < 0.891
    assert ok is False and "0.8876" in why and "below the target 0.8910, 99% of fp32 static's 0.9000" in why
    assert deploy.gate(dict(MAY_LOSE, precision="int8", accuracy_target=0.95))[0] is True  # 0.8876 >= 0.855
    assert deploy.gate({"precision": "bf16", "accuracy_note": "random samples: accuracy not measured"}) == (
        None, "random samples: accuracy not measured")


def test_the_deploy_line_holds_back_a_faster_rung_whose_accuracy_is_not_known():
    """Static at 1x1 (about 300/s), INT8 at 2x1 (about 900/s): without its accuracy INT8 is not
    recommended but named, with the command that measures it; with an interval that clears the
    target it is deployed; with one that does not, static is, and INT8 is said not deployable."""
    base = server_records([300.0, 900.0])
    unknown = deploy.recommend(gated(base, "int8", accuracy_note="random samples: accuracy not measured"),
                               ["--model", "lenet"])
    assert unknown.record.name == "static 1x1 b1" and unknown.held.name == "int8 2x1 b1"
    text = unknown.text()
    assert text.startswith("deploy static 1x1 b1") and "int8 2x1 b1 would win at" in text
    assert "if its accuracy holds: random samples" in text and unknown.measure.startswith(
        "python -m gluonperf.infer --model lenet --params TRAINED.params --calib-data LABELLED_DATA --precision "
        "static,int8 --layouts 2x1")
    keeps = deploy.recommend(gated(base, "int8", **KEEPS))
    assert keeps.record.name == "int8 2x1 b1" and keeps.held is None and "would" not in keeps.text()
    loses = deploy.recommend(gated(base, "int8", **MAY_LOSE), ["--model", "x-symbol.json", "--calib-data", "digits"])
    assert loses.record.name == "static 1x1 b1" and "int8 2x1 b1 would win at" in loses.text()
    assert "but is not deployable: its accuracy is at least 0.8876" in loses.text() and loses.measure is None
    alone = deploy.recommend(gated(server_records([None, 900.0]), "int8", accuracy_note="not measured"))
    assert alone.record is None and alone.text().startswith("nothing deployable meets the bound")


# --- the choice confirmed ------------------------------------------------------------------

def bracketed(name, valid, invalid, precision="static", layout=(2, 1), window=0.0):
    """A server record whose search found `valid` and not `invalid` (None: every rate valid)."""
    from gluonperf.records import Result
    m = {"scenario": "server", "precision": precision, "layout": "%dx%d" % layout, "instances": layout[0],
         "threads": layout[1], "batch_window_s": window, "latency_bound_s": 0.05, "rate_at_bound_per_s": valid,
         "p99_s": 0.01, "model": "lenet"}
    if invalid is not None:
        m["rate_invalid_per_s"] = invalid
    return Result("inference", name, m)


def confirmed(name, p99_ms, valid=(True, True, True), **config):
    """A confirmation record: `name` held the bound in the rounds `valid`, with these p99s."""
    m = bracketed(name, 1000.0, 1100.0, **config).metrics
    p99s = [v / 1e3 for v in p99_ms]
    return rounds.confirm_record(Result("inference", name, m), 1000.0, [
        {"p99_s": p, "loadgen_valid": ok, "log": "x"} for p, ok in zip(p99s, valid)], 0.05)


from gluonperf.records import Result  # noqa: E402


def test_the_contenders_are_the_deployable_configurations_whose_bracket_overlaps_the_best():
    best, close, clear = bracketed("a", 1000.0, 1100.0), bracketed("b", 900.0, 1050.0), bracketed("c", 500.0, 600.0)
    open_ended = bracketed("d", 800.0, None)
    unmeasured = bracketed("e", 950.0, 1200.0, precision="int8")  # accuracy not measured: not deployable
    assert [r.name for r in deploy.contenders([clear, close, best, open_ended, unmeasured])] == ["a", "b", "d"]
    # nothing overlaps the best: its rate is one run of its search, confirmed beside the runner-up
    assert [r.name for r in deploy.contenders([clear, best])] == ["a", "c"]
    assert deploy.contenders([best, unmeasured]) == deploy.contenders([best]) == []  # one deployable: nothing to choose


def test_a_runner_up_that_misses_rounds_leaves_the_best_confirmed_as_the_only_one_that_held():
    best, runner = confirmed("static 2x1 b8 window 5ms", [10, 12, 11], window=0.005), \
        confirmed("fused 2x1 b8 window 5ms", [60, 55, 58], valid=(False, True, False))
    chosen, how, judged, _ = deploy.settle([best, runner])
    assert (chosen.name, how) == ("static 2x1 b8 window 5ms", "lower")
    assert judged == {"fused 2x1 b8 window 5ms": {"held_rounds": 1, "rounds": 3}}
    servers = [bracketed("static 2x1 b8 window 5ms", 1000.0, 1100.0), bracketed("fused 2x1 b8 window 5ms", 800, 900)]
    text = deploy.recommend(servers + [best, runner]).text()
    assert "it held the bound in every round, the only one that did (fused 2x1 b8 window 5ms held it in 1 of 3 " \
           "rounds)" in text, text


def test_the_confirmation_names_the_lower_p99_beyond_the_noise_or_the_simpler_of_a_tie():
    lower, higher = confirmed("static 2x1 b1", [10, 11, 10]), confirmed("static 1x2 b1", [20, 23, 21])
    chosen, how, judged, _ = deploy.settle([higher, lower])
    assert (chosen.name, how) == ("static 2x1 b1", "lower") and judged["static 1x2 b1"]["p99_verdict"] == "higher"
    batched = confirmed("static 2x1 b8 window 5ms", [10, 12, 9], window=0.005)
    plain = confirmed("static 2x1 b1", [11, 10, 12])
    int8 = confirmed("int8 2x1 b1", [10.5, 11, 10], precision="int8")
    chosen, how, judged, why = deploy.settle([batched, int8, plain])  # within the noise of each other
    assert (chosen.name, how, why) == ("static 2x1 b1", "tie", "no batching")  # against the float32 runner-up
    assert set(judged) == {"static 2x1 b8 window 5ms", "int8 2x1 b1"}
    slipped = confirmed("static 2x1 b1", [1, 1, 1], valid=(True, False, True))  # lowest, but missed a round
    chosen, how, _, _ = deploy.settle([slipped, higher])
    assert chosen.name == "static 1x2 b1" and how == "lower"  # the one left is lower than nothing: chosen
    assert deploy.settle([slipped]) == (None, "none", {"static 2x1 b1": {"held_rounds": 2, "rounds": 3}}, "")
    servers = [bracketed("static 2x1 b1", 1000.0, 1100.0), bracketed("static 1x2 b1", 800.0, 1050.0)]
    text = deploy.recommend(servers + [slipped, confirmed("static 1x2 b1", [60, 55, 58], valid=(False,) * 3)]).text()
    assert "unconfirmed: no configuration held the bound in every one of 3 interleaved rounds at 1000/s (static 1x2 " \
           "b1 held it in 0 of 3; static 2x1 b1 held it in 2 of 3): that rate is the edge" in text, text


def test_the_deploy_line_says_what_the_confirmation_found():
    servers = [bracketed("static 1x2 b1", 1000.0, 1100.0, layout=(1, 2)), bracketed("static 2x1 b1", 950.0, 1040.0)]
    confirms = [confirmed("static 1x2 b1", [20, 23, 21], layout=(1, 2)), confirmed("static 2x1 b1", [10, 11, 10])]
    advice = deploy.recommend(servers + confirms, ["--model", "lenet"])
    text = advice.text()
    assert advice.record.name == "static 2x1 b1"  # lower p99 at the same rate, beyond the noise: not the search's best
    assert "confirmed in 3 interleaved rounds at 1000/s: it held the bound in every round, with the lowest p99" in text
    assert "static 1x2 b1's p99 2.06x this one's" in text and "--layouts 2x1" in advice.command
    tie = deploy.recommend(servers + [confirmed("static 1x2 b1", [10, 12, 9], layout=(1, 2)),
                                      confirmed("static 2x1 b1", [11, 10, 12])])
    assert tie.record.name == "static 1x2 b1"  # as simple as the other: the search's best stands
    assert "ties with static 2x1 b1 within the noise (static 2x1 b1's p99 1.07x this one's" in tie.text()
    assert tie.text().endswith("named for the highest rate its search found (as simple as the others)")


def test_nothing_meets_the_bound_names_the_closest():
    advice = deploy.recommend(server_records([None, None]))
    assert not advice.meets and advice.record.metrics["layout"] == "1x1"  # the lower p99
    assert advice.text().startswith("nothing meets the bound")
    assert deploy.recommend([]) is None


# --- the ladder's fields, cold start ------------------------------------------------------

def test_the_ladders_order_is_known_without_mxnet():
    from gluonperf.inference import ladder
    assert rounds.LADDER == ladder.RUNGS and rounds.REFERENCE == ladder.REFERENCE


def test_cold_starts_make_one_record_of_medians():
    parts = [dict(import_s=1.0 + r, load_s=0.1, first_call_s=0.05 * (r + 1), new_shape_call_s=0.02,
                  steady_call_s=0.01, total_s=1.15 + 1.05 * r, batch_sizes=[1, 64], steady_calls=10, round=r)
             for r in range(3)]
    record = rounds.cold_start_record({"model": "lenet", "rungs": {"int8": {"accuracy": 0.9}}}, "int8", parts)
    m = record.metrics
    assert record.name == "int8 cold-start" and m["scenario"] == "cold-start" and m["primary_metric"] == "total_s"
    assert m["import_s"] == 2.0 and m["first_call_s"] == pytest.approx(0.1) and m["total_s"] == pytest.approx(2.2)
    assert m["round_values"] == [p["total_s"] for p in parts] and len(m["round_parts"]) == 3 and m["rounds"] == 3
    assert m["batch_sizes"] == [1, 64] and m["accuracy"] == 0.9 and m["precision"] == "int8"
    failed = rounds.rung_record({"model": "lenet"}, "int8", "cold start of the int8 rung failed: x",
                                scenario=rounds.COLD_START)
    assert failed.name == "int8 cold-start" and failed.metrics["scenario"] == "cold-start"


def test_the_ladder_and_cold_start_tables_come_from_the_records():
    from gluonperf.render.inference import sections
    layout = Layout(1, 1)
    run = {"loadgen_valid": True, "queries": 64}
    ladder_fields = {"static": {"accuracy": 0.91, "build_s": 0.1, "note": "hybridized"},
                     "int8": {"accuracy": 0.9, "accuracy_change": -0.01, "accuracy_change_ci_low": -0.03,
                              "accuracy_change_ci_high": 0.01, "accuracy_n": 296, "top1_agreement": 0.98,
                              "max_abs_diff": 0.2, "build_s": 2.0, "note": "calibrated"}}
    base = {"model": "lenet", "ctx": "cpu(0)", "calib_data": "digits", "rungs": ladder_fields}
    runs = {(layout, name, "offline", 8): [dict(run, round=r, samples_per_s=100.0 * (i + 1)) for r in range(2)]
            for i, name in enumerate(("int8", "static"))}
    colds = [rounds.cold_start_record(base, name, [dict(import_s=1.0, load_s=0.1, first_call_s=0.05,
                                                        new_shape_call_s=0.02, steady_call_s=0.01, total_s=1.15,
                                                        batch_sizes=[1, 8], steady_calls=10, round=0)])
             for name in ("int8", "static")]
    parts = {title.split(",")[0].split(":")[0]: rows for title, rows, _ in sections(
        rounds.config_records(runs, base) + colds + [rounds.rung_record(base, "bf16", "no bfloat16 here")])}
    assert list(parts) == ["offline", "precision ladder", "cold start", "not run here"]
    assert [r.name for r in parts["precision ladder"]] == ["static", "int8"]  # the ladder's order
    assert parts["precision ladder"][1].metrics["accuracy_change_ci_low"] == -0.03
    assert [r.name for r in parts["cold start"]] == ["int8", "static"]
    assert [r.name for r in parts["not run here"]] == ["bf16"]


def test_what_a_rung_costs_reads_from_its_fields():
    assert deploy.accuracy_text({"precision": "int8", "accuracy_change": -0.0034, "accuracy_change_ci_low": -0.0177,
                                 "accuracy_change_ci_high": 0.0102, "accuracy_n": 296}) == (
        "accuracy -0.34 points against fp32 static (95% CI -1.77 to +1.02 points) on 296 held-out samples")
    assert deploy.accuracy_text({"precision": "int8", "top1_agreement": 0.984, "agreement_n": 64,
                                 "accuracy_note": "random samples of the model's input: accuracy not measured"}) == (
        "top-1 agreement with fp32 static 98.4% on 64 samples (random samples of the model's input: accuracy not "
        "measured)")
    assert deploy.accuracy_text({"precision": "static", "accuracy": 0.9}) == "no accuracy cost (fp32)"
    assert "fp32 static not run" in deploy.accuracy_text({"precision": "int8", "accuracy": 0.9, "evaluated_n": 296})


# --- layouts and batching ----------------------------------------------------------------

def test_layouts():
    assert parse_layouts("1x2, 2x1,1x2") == [Layout(1, 2), Layout(2, 1)]
    assert factorizations(4) == [Layout(1, 4), Layout(2, 2), Layout(4, 1)]
    groups = [[0, 4], [1, 5], [2, 6], [3, 7]]  # hyper-threads of a core stay together
    assert assign_cores(Layout(2, 2), groups) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    for bad in ("2", "0x2", "ax1", ""):
        with pytest.raises(ValueError):
            parse_layouts(bad)
    with pytest.raises(ValueError, match="needs 3 cores"):
        assign_cores(Layout(3, 1), [[0], [1]])


def test_batching_closes_a_batch_when_full_and_when_its_window_ends():
    got, arrived = [], threading.Event()

    def emit(batches):
        got.extend(batches)
        arrived.set()
    full = Batcher(window_s=3600.0, max_batch=3, emit=emit)
    full.add([(i, i) for i in range(7)])
    assert got == [[(0, 0), (1, 1), (2, 2)], [(3, 3), (4, 4), (5, 5)]]  # full: at once, the window aside
    full.close()
    assert got[-1] == [(6, 6)]  # what is left goes on close
    got.clear()
    arrived.clear()
    timed = Batcher(window_s=0.01, max_batch=100, emit=emit)
    timed.add([(9, 1)])
    assert arrived.wait(60) and got == [[(9, 1)]]  # the window ended, not the batch
    timed.close()


def test_batches_are_padded_to_the_warmed_sizes():
    assert buckets(8) == [1, 2, 4, 8] and buckets(6) == [1, 2, 4, 6] and buckets(1) == [1]
    with pytest.raises(ValueError):
        buckets(0)
    three = [(10, 3), (11, 5), (12, 7)]
    assert padded(three, buckets(8)) == three + [(None, 3)]  # to 4, with the first sample; nobody waits for it
    assert padded(three, [1, 2]) == three  # nothing warmed holds it: as it is (and the instance says so)
    assert padded(three, [3, 8]) == three


@pytest.fixture(scope="module")
def static_mlp(tmp_path_factory):
    """The MLP's static rung, built once, and a library of 16 samples of its input."""
    import mxnet as mx
    from gluonperf.inference import ladder
    source = ladder.model_source("mlp")
    (rung,) = ladder.prepare(source, ["static"], mx.cpu(), str(tmp_path_factory.mktemp("rungs")))
    with SampleLibrary.create(np.random.RandomState(0).rand(16, *source.input_shape).astype(np.float32)) as lib:
        yield rung, lib


def serve_batches(rung, library, warm, sizes):
    """A one-instance Pool of `rung` warmed at `warm`, sent one batch of each of `sizes`: (the
    ids completed, the sizes the instance says it served, those it says it had not warmed)."""
    from gluonperf.inference.instances import Pool
    done, all_done = [], threading.Event()
    pool = Pool(rung.to_text(), Layout(1, 1), library.spec(), "cpu").start()
    try:
        pool.ready(120)
        pool.warm(warm, calls=1, timeout=120)
        pool.on_done = lambda ids: (done.extend(ids), len(done) == sum(sizes) and all_done.set())
        ids = iter(range(1000))
        pool.submit([[(next(ids), i) for i in range(size)] for size in sizes])
        assert all_done.wait(120)
        served, cold = pool.shapes(120)
    finally:
        pool.close()
    return done, served, cold


def test_no_batch_of_a_shape_the_warm_up_did_not_run_reaches_the_model(static_mlp):
    """The instance itself reports the batch sizes its model ran: padded to the warmed buckets,
    batches of 1 to 8 samples reach it as 1, 2, 4 and 8 only, and LoadGen is told of each real
    sample once; warmed at 1 alone, a batch of 3 reaches it as 3, and it says that size was cold."""
    rung, library = static_mlp
    done, served, cold = serve_batches(rung, library, buckets(8), list(range(1, 9)))
    assert sorted(done) == list(range(36)) and None not in done
    assert served == {1: 1, 2: 1, 4: 2, 8: 4} and cold == []
    _, served, cold = serve_batches(rung, library, [1], [1, 3])
    assert served == {1: 1, 3: 1} and cold == [3]


def test_the_contenders_run_again_interleaved_at_one_rate_and_the_record_keeps_the_rounds(static_mlp, tmp_path):
    """Two server configurations of the MLP whose brackets overlap by construction (searches
    made up here): the confirmation starts both, runs each at the best's valid rate once a round,
    in rotating order, 3 rounds, under LoadGen, and keeps every round's verdict and p99."""
    from gluonperf.inference.serve import Plan, Session
    rung, library = static_mlp
    plan = Plan(rungs=[rung], layouts=[Layout(1, 1)], scenarios=("server",), batch_sizes=(1,), rounds=1,
                minimums=loadgen.Minimums(0.05), latency_bound_s=0.5, batch_window_s=0.002, max_batch=4,
                log_dir=str(tmp_path), base={"model": "mlp"})
    session = Session(plan, library)
    session.servers = [bracketed("static 1x1 b1", 1000.0, 1100.0, layout=(1, 1)),
                       bracketed("static 1x1 b4 window 2ms", 900.0, 1200.0, layout=(1, 1), window=0.002)]
    session._confirm()
    # the first pass, at the best's rate (a second, lower, follows only when neither held every round)
    confirms = [r for r in session.records() if r.metrics["scenario"] == "confirm"][:2]
    assert [c.name for c in confirms] == ["static 1x1 b1", "static 1x1 b4 window 2ms"]
    for c in confirms:
        m = c.metrics
        assert m["confirm_rate_per_s"] == 1000.0 and m["rounds"] == 3 == len(m["round_valid"]) == len(m["round_p99_s"])
        assert m["held_rounds"] == sum(m["round_valid"]) and len(m["loadgen_logs"]) == 3
        assert set(m["batch_sizes_served"]) <= set(m["warmed_batch_sizes"]) and "unwarmed_batch_sizes" not in m
    # interleaved: round r of every contender ran before round r + 1 of any (the log folders' times)
    stamps = {c.name: [os.path.getmtime(os.path.join(str(tmp_path), log)) for log in c.metrics["loadgen_logs"]]
              for c in confirms}
    a, b = stamps.values()
    assert max(a[0], b[0]) <= min(a[1], b[1]) and max(a[1], b[1]) <= min(a[2], b[2])


def passes_run(held_at, monkeypatch):
    """A Session's confirmation of two made-up contenders whose passes hold the bound as
    `held_at(rate)` says (no LoadGen): the rates its passes ran at, and its records."""
    from gluonperf.inference import serve
    plan = serve.Plan(rungs=[], layouts=[Layout(1, 1)], scenarios=("server",), batch_sizes=(1,), rounds=1,
                      latency_bound_s=0.05, base={"model": "mlp"})
    session = serve.Session(plan, library=None)
    session.servers = [bracketed("static 1x1 b1", 1000.0, 1100.0, layout=(1, 1)),
                       bracketed("fused 1x1 b1", 950.0, 1050.0, precision="fused", layout=(1, 1))]
    rates = []

    def at(contenders, pools, rate, number):
        rates.append(rate)
        return [rounds.confirm_record(c, rate, [{"p99_s": 0.01 * (1 + i), "loadgen_valid": held_at(rate)}] * 3, 0.05)
                for i, c in enumerate(contenders)]
    monkeypatch.setattr(session, "_confirm_at", at)
    monkeypatch.setattr(session, "_confirm_pools", lambda contenders: {})
    session._confirm()
    return rates, session.records()


def test_a_choice_no_contender_held_is_confirmed_again_the_searchs_tolerance_lower(monkeypatch):
    """At the best's rate (the edge of its bracket) no contender held the bound in every round:
    they run again once, SERVER_TOLERANCE below it, and the deploy line names that rate and says
    to plan for it; when the first pass holds, no second runs."""
    from gluonperf.inference import serve
    lower = 1000.0 / (1 + serve.SERVER_TOLERANCE)
    rates, records = passes_run(lambda rate: rate < 1000.0, monkeypatch)
    assert rates == [1000.0, pytest.approx(lower)]
    advice = deploy.recommend(records)
    assert advice.record.name == "static 1x1 b1" and advice.record.metrics["confirm_rate_per_s"] == pytest.approx(lower)
    text = advice.text()
    assert "at 1000/s no configuration held the bound in every one of 3 interleaved rounds (fused 1x1 b1 held it " \
           "in 0 of 3; static 1x1 b1 held it in 0 of 3), so they ran again at 869.6/s, the search's tolerance (15%) " \
        "below it" in text, text
    assert "confirmed in 3 interleaved rounds at 869.6/s" in text and "plan for 869.6/s, not the best search's 1000/s" in text
    from gluonperf.render.inference import confirmation
    title, rows, columns = confirmation(records)
    assert "1000/s then 869.6/s" in title and len(rows) == 4 and "confirm_rate_per_s" in columns
    assert [r.metrics.get("p99_verdict") for r in rows][2] == "chosen (lower)"
    rates, records = passes_run(lambda rate: True, monkeypatch)
    assert rates == [1000.0] and "plan for" not in deploy.recommend(records).text()
    rates, records = passes_run(lambda rate: False, monkeypatch)  # neither pass held: unconfirmed, said once each
    text = deploy.recommend(records).text()
    assert rates == [1000.0, pytest.approx(lower)] and "unconfirmed: no configuration held the bound in every one " \
        "of 3 interleaved rounds at 869.6/s" in text and text.count("so they ran again at 869.6/s") == 1


# --- the sample library ----------------------------------------------------------------

READ_IN_ANOTHER_PROCESS = """
import json, sys
from gluonperf.inference.samples import SampleLibrary
with SampleLibrary.attach(json.loads(sys.argv[1])) as lib:
    print(json.dumps(lib.take([3, 0, 3]).tolist()))
"""


def test_the_library_serves_the_same_samples_by_index_and_leaves_nothing():
    samples = np.arange(5 * 2 * 3, dtype=np.float32).reshape(5, 2, 3)
    with SampleLibrary.create(samples) as library:
        path = os.path.join(SHM_DIR, library.name)
        assert os.path.exists(path)
        np.testing.assert_array_equal(library.take([4, 1]), samples[[4, 1]])
        import json
        spec = json.dumps(library.spec())
        for _ in range(2):  # a process that maps it and exits leaves it in place (no resource tracker)
            p = subprocess.run([sys.executable, "-c", READ_IN_ANOTHER_PROCESS, spec], cwd=ROOT, env=clean_env(),
                               capture_output=True, text=True, timeout=60)
            assert p.returncode == 0 and p.stderr == "", p.stderr
            assert np.array_equal(np.array(json.loads(p.stdout)), samples[[3, 0, 3]])
        with pytest.raises(ValueError):
            library.take([5])
    assert not os.path.exists(path)  # unlinked
    with pytest.raises(FileNotFoundError):
        SampleLibrary.attach(json.loads(spec))


# --- LoadGen's logs, from real short runs --------------------------------------------------

def instant(samples):
    """A system under test that answers every sample at once, from another thread."""
    threading.Thread(target=loadgen.complete, args=([i for i, _ in samples],)).start()


@pytest.fixture(scope="module")
def loadgen_runs(tmp_path_factory):
    """Four short LoadGen runs of an instant system: (folder, figures) by name."""
    root = tmp_path_factory.mktemp("loadgen")
    short = loadgen.Minimums(duration_s=0.05)
    loads = {"single": loadgen.Load("single-stream", expected_latency_s=1e-4),
             "server": loadgen.Load("server", server_rate=2000.0, latency_bound_s=1.0),
             "unreachable": loadgen.Load("server", server_rate=2000.0, latency_bound_s=1e-9),
             "offline": loadgen.Load("offline", expected_rate=1.0, offline_samples=1)}
    out = {}
    for name, load in loads.items():
        values = loadgen.run(instant, load, short, 16, str(root / name))
        out[name] = (root / name, loadgen.figures(values, load.scenario))
    return out


def test_a_single_stream_run_reads_as_loadgen_wrote_it(loadgen_runs):
    folder, f = loadgen_runs["single"]
    summary = (folder / "mlperf_log_summary.txt").read_text()
    assert "Result is : VALID" in summary and f["loadgen_valid"] is True
    assert f["queries"] >= loadgen.FEWEST_QUERIES["single-stream"]
    shown = [f[k] for k in ("p50_s", "p90_s", "p95_s", "p97_s", "p99_s", "p999_s") if k in f]
    assert 0 < shown[0] and shown == sorted(shown) and len(shown) >= 2
    for key, needed in loadgen.QUERIES_FOR.items():  # each percentile shown exactly when the run had its queries
        assert (key in f) == (f["queries"] >= needed) and (key in f.get("percentiles_withheld", {})) != (key in f)
    assert f["p90_s"] <= f["early_stopping_p90_s"] and f["early_stopping_level"] == 0.99
    ns = int(summary.split("90.0th percentile latency (ns) :")[1].split()[0])
    assert f["p90_s"] == pytest.approx(ns * 1e-9)  # the summary's figure, read from the detail log


def test_a_server_run_is_valid_within_its_bound_and_invalid_past_it(loadgen_runs):
    ok, late = loadgen_runs["server"][1], loadgen_runs["unreachable"][1]
    assert ok["loadgen_valid"] is True and ok["loadgen_perf_constraints_met"] is True
    assert ok["queries"] >= loadgen.FEWEST_QUERIES["server"] and ok["p99_s"] < 1.0
    assert late["loadgen_valid"] is False and late["loadgen_perf_constraints_met"] is False
    assert late["loadgen_invalid_reason"]


def test_an_offline_run_too_short_says_why(loadgen_runs):
    f = loadgen_runs["offline"][1]
    assert f["loadgen_valid"] is False and f["loadgen_min_duration_met"] is False
    assert "expected QPS" in f["loadgen_invalid_reason"] and f["samples_per_s"] > 0
    assert "p90_s" not in f  # one query: no latency percentiles


def test_early_stopping_text_and_mlperf_minimums():
    text = " * Early stopping 90.0th percentile estimate: 2459866  * Early stopping 99th percentile estimate: 7760066"
    assert loadgen.early_stopping(text) == {90.0: pytest.approx(2459866e-9), 99.0: pytest.approx(7760066e-9)}
    s = loadgen.test_settings(loadgen.Load("multi-stream", samples_per_query=8), loadgen.Minimums(mlperf=True))
    assert s.min_duration_ms == 600000 and s.min_query_count == 662 and s.multi_stream_samples_per_query == 8
    with pytest.raises(ValueError):
        loadgen.Load("server")  # no rate, no bound


def test_the_queries_a_percentile_needs_are_loadgens():
    """LoadGen's own messages: 64 queries for a p90, 662 for a p99 ('Need to process at least');
    the binomial rule behind them, checked here by counting: with n queries and the true p99,
    the chance that at most one lands above it falls below 1% first at n = 662."""
    assert loadgen.fewest_queries(0.90) == 64 == loadgen.QUERIES_FOR["p90_s"]
    assert loadgen.fewest_queries(0.99) == 662 == loadgen.QUERIES_FOR["p99_s"]
    from scipy.stats import binom
    assert binom.cdf(1, 662, 0.01) < 0.01 <= binom.cdf(1, 661, 0.01)
    with pytest.raises(ValueError):
        loadgen.fewest_queries(1.0)


def run_values(queries, scenario="SingleStream"):
    """LoadGen's detail-log values of a VALID run of `queries` queries, its percentiles 1..6 ms."""
    values = {"result_validity": "VALID", "result_query_count": queries, "errors": [], "warnings": []}
    for i, (p, _) in enumerate(loadgen.PERCENTILES):
        values["result_%s_percentile%s_latency_ns" % (p, "_per_query" if scenario == "MultiStream" else "")] = \
            (i + 1) * 10 ** 6
    return values


def test_a_percentile_is_shown_only_from_the_queries_it_needs():
    few, enough = loadgen.figures(run_values(100), "single-stream"), loadgen.figures(run_values(700), "single-stream")
    assert few["p90_s"] == 0.002 and "p99_s" not in few and few["percentiles_withheld"]["p99_s"] == 662
    assert enough["p99_s"] == 0.005 and "p99_s" not in enough["percentiles_withheld"]
    server = loadgen.figures(run_values(500), "server")  # LoadGen's VALID verdict on the bound is the server's test
    assert server["p99_s"] == 0.005 and "percentiles_withheld" not in server
    merged = rounds.merge_rounds([dict(enough, round=0), dict(few, round=1)])
    assert "p99_s" not in merged and merged["p90_s"] == 0.002  # one round short: shown from none
    assert merged["percentiles_withheld"]["p99_s"] == 662 and merged["fewest_queries_per_run"] == 100


def test_a_withheld_percentile_says_so_in_its_cell_and_under_the_table():
    from gluonperf.records.tables import format_table
    from gluonperf.render.inference import readings, sections
    layout = Layout(1, 1)
    runs = {(layout, name, "single-stream", 1): [dict(loadgen.figures(run_values(100), "single-stream"), round=r,
                                                       samples_per_s=50.0) for r in range(2)]
            for name in ("static", "int8")}
    records = rounds.config_records(runs, {"model": "lenet"})
    (heading, rows, columns), = sections(records)
    table = format_table(rows, columns, heading)
    assert "p99 " in table.splitlines()[1] and table.count("n<662") == 2
    line = next(line for line in readings(records) if "not shown" in line)
    assert line.startswith("p99 not shown (n<662) for 2 configurations: a run had 100 queries") and \
        "--duration 14s" in line  # 662 queries at 50 a second
    assert all("p99_s" not in r.metrics for r in records)  # the records hold no p99 they cannot back


def test_compare_matches_inference_records_by_scenario_on_their_figure():
    from gluonperf.measure.comparison import compare
    from gluonperf.records import Result

    def record(scenario, figure, values):
        return Result("inference", "static 1x2 b1", {"scenario": scenario, "primary_metric": figure,
                                                      figure: sorted(values)[1], "round_values": values,
                                                      "samples_per_s": 100.0, "batch_size": 1})
    old = [record("single-stream", "p90_s", [0.010, 0.011, 0.012]),
           record("offline", "samples_per_s", [100.0, 101.0, 99.0])]
    new = [record("single-stream", "p90_s", [0.020, 0.021, 0.022]),
           record("offline", "samples_per_s", [100.0, 101.0, 99.0])]
    by = {r.metrics["scenario"]: r.metrics for r in compare(old, new)}
    assert by["single-stream"]["metric"] == "p90_s" and by["single-stream"]["ratio"] < 1  # slower: p90 doubled
    assert by["offline"]["metric"] == "samples_per_s" and by["offline"]["ratio"] == pytest.approx(1.0)
    assert "3 and 3 repeats" in by["single-stream"]["evidence"]  # the rounds are its evidence


def test_the_report_draws_inference_records_and_says_what_to_deploy():
    from gluonperf import report
    from gluonperf.render.inference import readings, section
    layout = Layout(2, 1)
    run = {"loadgen_valid": True, "queries": 64}
    runs = {(layout, "static", "single-stream", 1): [dict(run, round=r, p90_s=0.002, p50_s=0.001, p99_s=0.003)
                                                     for r in range(3)],
            (layout, "fp32", "single-stream", 1): [dict(run, round=r, p90_s=0.004 + r * 1e-4, p50_s=0.002,
                                                        p99_s=0.005) for r in range(3)]}
    records = rounds.config_records(runs, {"model": "lenet"}) + server_records([500.0])
    assert ("inference",) in {k.benches for k in report.kinds()}
    block = section(records)
    assert [len(t.records) for t in block.tables] == [2, 1] and block.figure.startswith("<svg")
    assert "deploy static 1x1 b1" in block.reading
    lines = readings(records)
    assert lines[0].startswith("single-stream: the lowest p90: static 2x1 b1, 2 ms; of the rungs against static, "
                               "fp32 2x1 b1 0.49x") and lines[-1].startswith("deploy static 1x1 b1")

"""Do gluonperf's verdicts hold on this machine? A/A, a known effect, tune, and the noise floor.

    python benchmarks/verdicts.py --json verdicts.jsonl

Four checks of gluonperf.measure.stats as the commands use it (docs/verdicts.md reads the results):

- aa: the same work against itself, interleaved (as bench hybridize measures): of 40
  decisions at most 4 may say faster or slower.
- known: an arm that does 22 steps where the baseline does 20, counted as 20: its true speed
  ratio is 20/22 = 0.909 whatever the machine's speed. Of 40 decisions at most 1 may say
  faster, the 95% interval must cover 0.909 in at least 35, and none may say "same".
- tune: tune's paired sweep with two candidates that are the same settings, 20 times: it may
  keep the second in at most 2 (the old rule, a median above 1, kept one about half the time).
- tune-script: 20 separate tunes of the tabular MLP script (`tune -- python
  benchmarks/scripts/tabular_mlp.py`, `--rounds auto`: each candidate stopped once its verdict
  is settled), each with an A/A lever offered by this benchmark (an environment variable nothing
  reads) beside hybridize: the A/A candidate may be called faster or slower in at most 2, and
  hybridize must be kept in all 20 (the honesty of early stopping, measured).
- simulate: tune --'s recipe by simulation, the real search on a simulated runner (no process,
  `check_simulate`): 1,000 tunes a setting at four noises, when nothing pays (a recipe naming a
  change in at most 5%) and with a change of 1.3x or 1.15x on the first lever (power) and the
  fourth; the runs and the simulated time a tune took at 5 s a run.
- floor: `bench hybridize` at four time scales (the MLP's forward calls of about 0.1 ms up to
  ResNet-18's training steps of about 0.2 s), run again and again in fresh processes, the
  scales in rotation: per scale and mode, the run-to-run spread of one configuration (the SD
  of the log of a run's median, and of its level held against the yardstick timed in its
  repeats), which `compare` adds to the interval when each side is one run (stats.NOISE_FLOORS,
  stats.YARDSTICK_FLOORS), and the A/A verdicts of `compare` on consecutive runs: at most 5%
  may call a change.
- single: `compare` on two saved runs, each made of 4 fresh processes as `--processes 4`
  makes it, of a benchmark of 10 ms or more whose NEW side does a known multiple of OLD's
  work per call, each run timing the yardstick beside it (LeNet training steps: 2 against 3, a true 1.5x; 4 against 7, 1.75x, a 43%
  drop of throughput), in alternation: 1.5x must be called slower in at least 9 of 10 pairs,
  1.75x must fail `compare --fail-above 5%` (exit 1) in every pair, and the pairs of equal
  work (consecutive saved runs of one side) may call a change in at most 5%.
"""
import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from gluonperf.cli import common as cli  # noqa: E402
from gluonperf.measure import stats
from gluonperf.records import Result, read_jsonl  # noqa: E402

PROG = "benchmarks/verdicts.py"
PARTS = ("aa", "known", "tune", "tune-script", "simulate", "floor", "single")
TRUE_RATIO = 20 / 22


def _work(ctx, batch):
    """A hybridized MLP forward on a fixed batch: one step of real, equal work."""
    import mxnet as mx
    from gluonperf.training.models import get_model, input_shape
    net = get_model("mlp", 10, [ctx])
    net.initialize(mx.init.Normal(0.01), ctx=ctx)
    net.hybridize(static_alloc=True, static_shape=True)
    x = mx.nd.random.uniform(shape=(batch,) + input_shape("mlp"), ctx=ctx)
    return net, x


def _steps(net, x, n):
    def run():
        for _ in range(n):
            net(x)
    return run


def decisions(steps_b, count, repeat, number, threshold, progress=None):
    """`count` decisions, each one interleaved run of 20 steps (A) against `steps_b` steps (B),
    judged as the speed of B over A per repeat (B counted as 20 steps)."""
    import mxnet as mx
    from gluonperf.measure.harness import measure_interleaved
    net, x = _work(mx.cpu(), 32)
    fns = {"A": _steps(net, x, 20), "B": _steps(net, x, steps_b)}
    out = []
    for _ in range(count):
        ms = measure_interleaved(fns, warmup=1, repeat=repeat, number=number)
        interval = stats.ratio_interval(stats.paired_ratios(ms["A"].samples, ms["B"].samples))
        out.append((interval, stats.verdict(interval, threshold, what="repeats")))
        if progress:
            progress()
    return out


def check_aa(count, repeat, number, threshold, progress=None):
    got = decisions(20, count, repeat, number, threshold, progress)
    called = sum(v.word in ("faster", "slower") for _, v in got)
    same = sum(v.word == "same" for _, v in got)
    covered = sum(i.low <= 1 <= i.high for i, _ in got)
    limit = math.floor(0.1 * count)  # the line: 4 of 40
    return Result("verdicts", "aa", {
        "decisions": count, "repeats": repeat, "called_a_change": called, "same": same,
        "inconclusive": count - called - same, "interval_covers_1": covered, "limit": limit,
        "passed": called <= limit, "ratios": [i.estimate for i, _ in got]})


def check_known(count, repeat, number, threshold, progress=None):
    got = decisions(22, count, repeat, number, threshold, progress)
    wrong = sum(v.word == "faster" for _, v in got)
    same = sum(v.word == "same" for _, v in got)
    slower = sum(v.word == "slower" for _, v in got)
    covered = sum(i.low <= TRUE_RATIO <= i.high for i, _ in got)
    need = math.ceil(35 / 40 * count)
    return Result("verdicts", "known", {
        "decisions": count, "repeats": repeat, "true_ratio": TRUE_RATIO, "slower": slower,
        "wrong_sign": wrong, "same": same, "inconclusive": count - wrong - same - slower,
        "covered": covered, "coverage_needed": need,
        "passed": wrong <= max(1, count // 40) and covered >= need and same == 0,
        "ratios": [i.estimate for i, _ in got]})


def check_tune(count, steps, threshold, budget, progress=None):
    from gluonperf.training.runners import STEPRATE
    from gluonperf.tuning.candidates import Candidate
    from gluonperf.tuning.rounds import Rounds
    from gluonperf.tuning.schedule import winner
    from gluonperf.tuning.search import paired_sweep
    kept = []
    base = Candidate("defaults", (("OMP_NUM_THREADS", "1"),),
                           (("model", "mlp"), ("batch_size", "32"), ("ctx", "cpu0"), ("hybridize", "static")))
    twin = Candidate("the same settings", base.env, base.flags)
    rounds = []
    for _ in range(count):
        results = paired_sweep([base, twin], STEPRATE, steps, Rounds(budget=budget), "aa",
                                     threshold=threshold)
        kept.append(winner(results) is not None)
        rounds.append(max(r.metrics["rounds"] for r in results if r.name == twin.name))
        if progress:
            progress()
    return Result("verdicts", "tune", {"runs": count, "kept": sum(kept), "limit": math.floor(count / 10),
                                       "rounds": rounds, "passed": sum(kept) <= math.floor(count / 10)})


MLP_SCRIPT = os.path.join("benchmarks", "scripts", "tabular_mlp.py")
UNREAD = "GLUONPERF_A_A_NOBODY_READS"  # the A/A candidate's environment variable: nothing reads it


def check_tune_script(count, threshold, progress=None):
    """`count` separate tunes of the tabular MLP script (benchmarks/scripts/tabular_mlp.py), each
    as `tune -- python tabular_mlp.py --levers hybridize` runs it (its probe, `--rounds auto`)
    with one more lever, offered here and not on the command line, tried first: an environment
    variable nothing reads (an A/A candidate). The A/A candidate may be called faster or slower at
    most count/10 times; hybridize (static, on an imperative Sequential: a known gain) must be
    kept every time."""
    from gluonperf.runtime.threads import physical_cores
    from gluonperf.script.runner import probe
    from gluonperf.tuning.candidates import Candidate
    from gluonperf.tuning.rounds import Rounds
    from gluonperf.tuning.search import Settings, coordinate
    command = [sys.executable, MLP_SCRIPT]
    aa = ("a/a", lambda b: [b, b.with_env("%s=1" % UNREAD, **{UNREAD: "1"})], lambda b: None)
    tunes = []
    for _ in range(count):
        began = time.monotonic()
        runner, found, _, error = probe(command, 5, 20, 600, cwd=ROOT, min_seconds=1.0, window="startup")
        if error:
            raise RuntimeError("the probe of %s failed: %s" % (MLP_SCRIPT, error))
        stages, _ = runner.levers(physical_cores(), ["hybridize"], threshold=threshold, bounds=False)
        found = coordinate(runner, Candidate(runner.baseline), [aa] + stages,
                           Settings(Rounds(), runner.steps, timeout=600, threshold=threshold))
        results, kept = found.results, found.kept
        by = {(r.metrics["lever"], r.name): r.metrics for r in results}
        twin = by[("a/a", "%s=1" % UNREAD)]
        tunes.append({"a_a_verdict": twin.get("verdict"), "a_a_ratio": twin.get("ratio"),
                      "a_a_ci": [twin.get("ratio_ci_low"), twin.get("ratio_ci_high")], "a_a_rounds": twin["rounds"],
                      "a_a_stopped": twin.get("stopped"), "a_a_round_ratios": twin.get("round_ratios"),
                      "a_a_rerun_rounds": twin.get("rerun_rounds"), "kept": kept,
                      # each round's ratio and the other processes' load beside it: what a miss came from
                      "hybridize": {name: {k: m.get(k) for k in ("verdict", "ratio", "ratio_ci_low", "ratio_ci_high",
                                                                 "ratio_level", "rounds", "stopped", "round_ratios",
                                                                 "round_load", "round_steal", "rerun_rounds",
                                                                 "machine_warnings")}
                                    for (lever, name), m in by.items() if lever == "hybridize"},
                      "runs": 1 + sum(r.metrics["rounds"] for r in results), "seconds": time.monotonic() - began})
        if progress:
            progress()
    called = sum(t["a_a_verdict"] in ("faster", "slower") for t in tunes)
    kept = sum("hybridize" in t["kept"] for t in tunes)
    limit = math.floor(count / 10)
    return Result("verdicts", "tune-script", {
        "runs": count, "a_a_called": called, "limit": limit, "hybridize_kept": kept, "tunes": tunes,
        "passed": called <= limit and kept == count})


# the simulation's settings: run-to-run noise (the SD of a run's log figure) and its tails
NOISES = ((0.03, "normal"), (0.10, "normal"), (0.25, "normal"), (0.10, "t3"))
# the least share of tunes that must name a change that pays, or name it or say how many more rounds
# would settle it (issue 70, item 2): 1.3x in 90%, 1.15x in 70%
POWER = {1.3: 0.90, 1.15: 0.70}


def check_simulate(tunes, budget=300.0, run_seconds=5.0, progress=None):
    """tune --'s recipe by simulation (gluonperf/tuning/simulate.py): the real search over the levers
    tune -- builds for a newcomer's script at 2 cores, `tunes` tunes a setting, runs of `run_seconds`
    under the default `budget`. When nothing pays, the recipe may name a change in at most 5% (the
    binomial interval's upper end under 6.5%) at every noise; a change of 1.3x (1.15x) on the first
    lever (hybridize) must be named, or said to need more rounds, in 90% (70%) of tunes. The same on
    the fourth lever (dtype) is measured, not held: the budget reaches it after three others.
    Returns (the summary Result, one Result a setting)."""
    from gluonperf.script.levers import newcomer_stages
    from gluonperf.tuning.simulate import simulate
    stages, settings = newcomer_stages(), []
    for sd, tails in NOISES:
        settings.append(({}, sd, tails))
        for gain in POWER:
            settings += [({"hybridize=static": gain}, sd, tails), ({"amp=bfloat16": gain}, sd, tails)]
    records, failed = [], []
    for gains, sd, tails in settings:
        r = simulate(stages, gains, sd, tails, tunes=tunes, budget=budget, run_seconds=run_seconds)
        m = r.metrics
        if not gains:
            m["limit"], m["passed"] = 0.065, m["named_ci_high"] < 0.065
        elif "hybridize=static" in gains:
            m["limit"] = POWER[gains["hybridize=static"]]
            m["passed"] = m["named"] >= m["limit"] or m["named"] + m["told"] >= m["limit"]
        if m.get("passed") is False or m["seconds_max"] > budget:
            failed.append(r.name)
        records.append(r)
        if progress:
            progress()
    return Result("verdicts", "simulate", {"runs": len(settings) * tunes, "tunes": tunes, "budget_s": budget,
                                           "run_s": run_seconds, "failed": failed, "passed": not failed}), records


# bench hybridize at four time scales: (label, arguments)
FLOOR_CONFIGS = (
    ("mlp-b1-forward", ["--repeat", "5", "--number", "300"]),
    ("mlp-b64-train", ["--model", "mlp", "--batch-size", "64", "--train", "--repeat", "5", "--number", "20"]),
    ("lenet-b32-train", ["--model", "lenet", "--batch-size", "32", "--train", "--repeat", "5", "--number", "10"]),
    ("resnet18-b8-train", ["--model", "resnet18", "--batch-size", "8", "--train", "--repeat", "5", "--number", "3"]),
)


def _fresh_run(argv, path):
    """`python <argv> --json path` in a fresh process; its records."""
    p = subprocess.run([sys.executable, *argv, "--json", path], cwd=ROOT, capture_output=True, text=True,
                       timeout=900)
    if p.returncode != 0:
        raise RuntimeError("%s failed: %s" % (" ".join(argv), p.stderr.strip().splitlines()[-1:]))
    return read_jsonl(path)


def _aa_calls(files, threshold):
    """compare's statuses on each pair of consecutive runs (their default noise floor)."""
    from gluonperf.measure.comparison import compare
    out = []
    for a, b in zip(files, files[1:]):
        out += [r.metrics for r in compare(a, b, threshold=threshold) if "status" in r.metrics]
    return out


def check_floor(runs, threshold, progress=None, configs=FLOOR_CONFIGS):
    """`runs` fresh-process runs of bench hybridize per configuration, the configurations in
    rotation: per configuration and mode the SD of log(median) from run to run and the median
    call time, and compare's verdicts on each pair of consecutive runs at its default floor."""
    files = {label: [] for label, _ in configs}
    with tempfile.TemporaryDirectory(prefix="gluonperf-floor-") as tmp:
        for i in range(runs):
            for label, args in configs:
                path = os.path.join(tmp, "%s-%d.json" % (label, i))
                files[label].append(_fresh_run(["-m", "gluonperf.bench", "hybridize", *args], path))
                if progress:
                    progress()
    scales, decisions = [], []
    for label, runs_of in files.items():
        per_mode, ruled = {}, {}
        for run in runs_of:
            for r, _ in run:
                per_mode.setdefault(r.name, []).append(r.metrics["median_s"])
                # the run's level against its yardstick: the mean log of each repeat's time over the
                # yardstick's in that repeat (what compare's Welch interval centres on)
                ratios = [t / y for t, y in zip(r.metrics.get("samples_s") or [], r.metrics.get("yardstick_samples_s") or [])]
                if ratios:
                    ruled.setdefault(r.name, []).append(statistics.fmean(math.log(x) for x in ratios))
        for mode, medians in per_mode.items():
            logs = [math.log(x) for x in medians]
            call = statistics.median(medians)
            levels = ruled.get(mode, [])
            scales.append({"config": label, "mode": mode, "call_s": call, "runs": len(medians),
                           "sd_log": statistics.stdev(logs) if len(logs) > 1 else None,
                           "sd_log_yardstick": statistics.stdev(levels) if len(levels) > 1 else None,
                           "floor_in_use": stats.noise_floor(call),
                           "yardstick_floor_in_use": stats.noise_floor(call, yardstick=True), "medians_s": medians})
        decisions += [dict(m, config=label) for m in _aa_calls(runs_of, threshold)]
    called = sum(d["status"] in ("improved", "worse", "regression") for d in decisions)
    return Result("verdicts", "floor", {
        "runs": runs, "scales": scales, "floor": max(s["sd_log"] for s in scales if s["sd_log"] is not None),
        "noise_floors_in_use": [list(b) for b in stats.NOISE_FLOORS], "compare_decisions": len(decisions),
        "compare_called_a_change": called, "called": [d for d in decisions if d["status"] != "inconclusive"
                                                      and d["status"] != "same"],
        "limit": math.floor(0.05 * len(decisions)), "passed": called <= math.floor(0.05 * len(decisions))})


# single: LeNet training steps per timed call, OLD against NEW
KNOWN_STEPS = ((2, 3), (4, 7))


def known_work_run(steps, path, repeat=5, number=3):
    """One saved run (the child of `single`): a hybridized LeNet's training steps on batches of
    32 (gluonperf.training.steprate's, as tune measures them), `steps` of them per timed call,
    `repeat` repeats of `number` calls, written to `path` as one record whose call time is
    `steps` times a step's."""
    import mxnet as mx
    from gluonperf.measure.harness import environment, measure
    from gluonperf.records import write_jsonl
    from gluonperf.training import steprate
    ctx = [mx.cpu()]
    net, trainer, loss = steprate.build("lenet", ctx, "static")
    batches = steprate.synthetic_batches("lenet", 32, 4)
    m = measure(lambda: steprate.run_steps(net, trainer, loss, batches, ctx, steps), "lenet", warmup=2,
                repeat=repeat, number=number, yardstick=True)
    write_jsonl([Result("known-work", "lenet-train", dict(m.summary(), model="lenet", batch_size=32))], path,
                environment(ctx))


def _saved_run(steps, processes, tmp, tag):
    """One saved run of the known work: `processes` fresh processes one after another, their
    records in one list, each marked with its `process` (as `--processes` writes them)."""
    records = []
    for i in range(1, processes + 1):
        path = os.path.join(tmp, "%s-%d.json" % (tag, i))
        for r, env in _fresh_run([os.path.abspath(__file__), "--known-work", str(steps)], path):
            r.metrics["process"] = i
            records.append((r, env))
    return records


def check_single(pairs, processes, threshold, progress=None):
    """Alternating pairs of saved runs (each `processes` fresh processes) per known ratio
    (KNOWN_STEPS: 1.5x for `pairs` pairs, 1.75x for half as many): compare's status on each;
    `compare --fail-above 5%`'s exit status on the 1.75x pairs; and the A/A decisions between
    consecutive saved runs of one side."""
    from gluonperf.measure.comparison import compare
    from gluonperf.records import write_jsonl
    runs = {n: [] for ab in KNOWN_STEPS for n in ab}
    statuses, exits = {}, []
    with tempfile.TemporaryDirectory(prefix="gluonperf-single-") as tmp:
        for (old, new), count in zip(KNOWN_STEPS, (pairs, max(1, pairs // 2))):
            for i in range(count):
                for steps in ((old, new) if i % 2 == 0 else (new, old)):
                    runs[steps].append(_saved_run(steps, processes, tmp, "steps%d-%d" % (steps, i)))
                    if progress:
                        progress()
                got = compare(runs[old][-1], runs[new][-1], fail_above=0.05, threshold=threshold)[0].metrics
                statuses.setdefault("%dx%d" % (old, new), []).append(
                    {k: got.get(k) for k in ("status", "ratio", "ratio_ci_low", "ratio_ci_high", "evidence")})
                if (old, new) == KNOWN_STEPS[1]:
                    paths = []
                    for side, recs in (("old", runs[old][-1]), ("new", runs[new][-1])):
                        path = os.path.join(tmp, "%s-%d.json" % (side, i))
                        write_jsonl([r for r, _ in recs], path, recs[0][1])
                        paths.append(path)
                    c = subprocess.run([sys.executable, "-m", "gluonperf.compare", *paths, "--fail-above", "5%"],
                                       cwd=ROOT, capture_output=True, text=True, timeout=120)
                    exits.append(c.returncode)
    aa = []
    for steps, saved in runs.items():
        aa += [dict(m, steps=steps) for m in _aa_calls(saved, threshold)]
    one_five = statuses["%dx%d" % KNOWN_STEPS[0]]
    called = sum(s["status"] in ("worse", "regression") for s in one_five)
    false = sum(d["status"] in ("improved", "worse", "regression") for d in aa)
    need = math.ceil(0.9 * pairs)
    return Result("verdicts", "single", {
        "pairs": pairs, "processes": processes, "known": statuses,
        "saved_runs_s": {str(steps): [[r.metrics["median_s"] for r, _ in run] for run in saved]
                         for steps, saved in runs.items()}, "called_1_5x": called, "needed": need,
        "fail_above_exits": exits, "aa_decisions": len(aa), "aa_called": false,
        "aa_limit": math.floor(0.05 * len(aa)),
        "passed": called >= need and all(e == 1 for e in exits) and false <= math.floor(0.05 * len(aa))})


def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--parts", default=",".join(PARTS),
                   help="which checks, comma-separated: %s (default: all)" % ",".join(PARTS))
    p.add_argument("--decisions", type=cli.positive_int, default=40,
                   help="decisions for aa and known (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=8,
                   help="interleaved repeats per decision (default: %(default)s)")
    p.add_argument("--number", type=cli.positive_int, default=10,
                   help="calls per repeat, each 20 or 22 MLP forward steps (default: %(default)s)")
    p.add_argument("--tune-runs", type=cli.positive_int, default=20, help="tune A/A sweeps (default: %(default)s)")
    p.add_argument("--tune-steps", type=cli.positive_int, default=30,
                   help="training steps per tune run (default: %(default)s)")
    p.add_argument("--tune-budget", type=cli.positive_int, default=60,
                   help="seconds per tune sweep for --rounds auto (default: %(default)s)")
    p.add_argument("--simulated-tunes", type=cli.positive_int, default=1000,
                   help="simulated tunes a setting for simulate (default: %(default)s)")
    p.add_argument("--floor-runs", type=cli.positive_int, default=10,
                   help="fresh bench hybridize runs per time scale for the noise floor (default: %(default)s)")
    p.add_argument("--single-pairs", type=cli.positive_int, default=10,
                   help="alternating pairs of saved runs for the 1.5x change (half as many for 1.75x; "
                        "default: %(default)s)")
    p.add_argument("--single-processes", type=cli.positive_int, default=4,
                   help="fresh processes per saved run, as --processes makes them (default: %(default)s)")
    p.add_argument("--known-work", type=cli.positive_int, metavar="STEPS", help=argparse.SUPPRESS)
    cli.add_threshold(p)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON lines")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.known_work:  # the child of `single`
        known_work_run(args.known_work, args.json)
        return 0
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    bad = [x for x in parts if x not in PARTS]
    if bad or not parts:
        raise cli.UserError("--parts %s: choose from %s" % (args.parts, ",".join(PARTS)))
    cli.check_output_path(args.json, "--json")
    from gluonperf.measure import machine
    start = machine.before()
    total = (args.decisions if "aa" in parts else 0) + (args.decisions if "known" in parts else 0) + \
        (args.tune_runs if "tune" in parts else 0) + (args.tune_runs if "tune-script" in parts else 0) + (args.floor_runs * len(FLOOR_CONFIGS) if "floor" in parts else 0) + \
        (2 * (args.single_pairs + max(1, args.single_pairs // 2)) if "single" in parts else 0) + \
        (len(NOISES) * (1 + 2 * len(POWER)) if "simulate" in parts else 0)
    out, settings = [], []
    checks = {"aa": lambda bar: check_aa(args.decisions, args.repeat, args.number, args.threshold, bar.update),
              "known": lambda bar: check_known(args.decisions, args.repeat, args.number, args.threshold, bar.update),
              "tune": lambda bar: check_tune(args.tune_runs, args.tune_steps, args.threshold, args.tune_budget,
                                             bar.update),
              "tune-script": lambda bar: check_tune_script(args.tune_runs, args.threshold, bar.update),
              "simulate": lambda bar: check_simulate(args.simulated_tunes, progress=bar.update),
              "floor": lambda bar: check_floor(args.floor_runs, args.threshold, bar.update),
              "single": lambda bar: check_single(args.single_pairs, args.single_processes, args.threshold,
                                                bar.update)}
    with cli.progress_bar(total, "verdicts") as bar:
        for part in PARTS:
            if part in parts:
                began = time.time()
                r = checks[part](bar)
                r, more = r if isinstance(r, tuple) else (r, [])
                r.metrics.update(machine_before=start, seconds=round(time.time() - began, 1))
                out.append(r)
                settings += more
    columns = ["name", "decisions", "runs", "called_a_change", "wrong_sign", "same", "covered", "kept", "a_a_called",
               "hybridize_kept",
               "compare_called_a_change", "floor", "called_1_5x", "aa_called", "limit", "passed"]
    cli.emit(out, args, title="verdicts on this machine (%s, %d cores)" % (
        __import__("gluonperf.measure.harness", fromlist=["cpu_model"]).cpu_model(), os.cpu_count()), columns=columns,
        records=out + settings)
    return 0 if all(r.metrics["passed"] for r in out) else 1


if __name__ == "__main__":
    cli.run(main, PROG)

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
- floor: `bench hybridize` run again and again in fresh processes: the run-to-run spread of
  one configuration (the SD of the log of a run's median), which `compare` adds to the
  interval when each side is one run, and the A/A verdicts of `compare` on consecutive runs.
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
from gluonperf.render.records import Result, read_jsonl  # noqa: E402

PROG = "benchmarks/verdicts.py"
PARTS = ("aa", "known", "tune", "floor")
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
    from gluonperf.experiments import sweep
    kept = []
    base = sweep.Candidate("defaults", (("OMP_NUM_THREADS", "1"),),
                           (("model", "mlp"), ("batch_size", "32"), ("ctx", "cpu0"), ("hybridize", "static")))
    twin = sweep.Candidate("the same settings", base.env, base.flags)
    rounds = []
    for _ in range(count):
        results = sweep.paired_sweep([base, twin], sweep.STEPRATE, steps, sweep.Rounds(budget=budget), "aa",
                                     threshold=threshold)
        kept.append(sweep.winner(results) is not None)
        rounds.append(max(r.metrics["rounds"] for r in results if r.name == twin.name))
        if progress:
            progress()
    return Result("verdicts", "tune", {"runs": count, "kept": sum(kept), "limit": math.floor(count / 10),
                                       "rounds": rounds, "passed": sum(kept) <= math.floor(count / 10)})


def check_floor(runs, threshold, progress=None):
    """`runs` fresh-process runs of bench hybridize: per mode the SD of log(median) from run to
    run, and compare's verdicts on each pair of consecutive runs at the current noise floor."""
    from gluonperf.measure.comparison import compare
    files = []
    with tempfile.TemporaryDirectory(prefix="gluonperf-floor-") as tmp:
        for i in range(runs):
            path = os.path.join(tmp, "run%d.json" % i)
            p = subprocess.run([sys.executable, "-m", "gluonperf.bench", "hybridize", "--repeat", "5",
                                "--number", "300", "--json", path], cwd=ROOT, capture_output=True, text=True,
                               timeout=600)
            if p.returncode != 0:
                raise RuntimeError("bench hybridize failed: %s" % p.stderr.strip().splitlines()[-1:])
            files.append(read_jsonl(path))
            if progress:
                progress()
    per_mode = {}
    for run in files:
        for r, _ in run:
            per_mode.setdefault(r.name, []).append(math.log(r.metrics["median_s"]))
    sd = {mode: statistics.stdev(v) for mode, v in per_mode.items() if len(v) > 1}
    verdicts = []
    for a, b in zip(files, files[1:]):
        verdicts += [r.metrics["status"] for r in compare(a, b, threshold=threshold) if "status" in r.metrics]
    called = sum(v in ("improved", "worse", "regression") for v in verdicts)
    return Result("verdicts", "floor", {
        "runs": runs, "sd_log_per_mode": sd, "floor": max(sd.values()) if sd else None,
        "noise_floor_in_use": stats.NOISE_FLOOR, "compare_decisions": len(verdicts),
        "compare_called_a_change": called, "limit": math.floor(0.1 * len(verdicts)),
        "passed": called <= math.floor(0.1 * len(verdicts))})


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
    p.add_argument("--floor-runs", type=cli.positive_int, default=12,
                   help="fresh bench hybridize runs for the noise floor (default: %(default)s)")
    cli.add_threshold(p)
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON lines")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    bad = [x for x in parts if x not in PARTS]
    if bad or not parts:
        raise cli.UserError("--parts %s: choose from %s" % (args.parts, ",".join(PARTS)))
    cli.check_output_path(args.json, "--json")
    from gluonperf.measure import machine
    start = machine.before()
    total = (args.decisions if "aa" in parts else 0) + (args.decisions if "known" in parts else 0) + \
        (args.tune_runs if "tune" in parts else 0) + (args.floor_runs if "floor" in parts else 0)
    out = []
    checks = {"aa": lambda bar: check_aa(args.decisions, args.repeat, args.number, args.threshold, bar.update),
              "known": lambda bar: check_known(args.decisions, args.repeat, args.number, args.threshold, bar.update),
              "tune": lambda bar: check_tune(args.tune_runs, args.tune_steps, args.threshold, args.tune_budget,
                                             bar.update),
              "floor": lambda bar: check_floor(args.floor_runs, args.threshold, bar.update)}
    with cli.progress_bar(total, "verdicts") as bar:
        for part in PARTS:
            if part in parts:
                began = time.time()
                r = checks[part](bar)
                r.metrics.update(machine_before=start, seconds=round(time.time() - began, 1))
                out.append(r)
    columns = ["name", "decisions", "runs", "called_a_change", "wrong_sign", "same", "covered", "kept",
               "compare_called_a_change", "floor", "limit", "passed"]
    cli.emit(out, args, title="verdicts on this machine (%s, %d cores)" % (
        __import__("gluonperf.measure.harness", fromlist=["cpu_model"]).cpu_model(), os.cpu_count()), columns=columns)
    return 0 if all(r.metrics["passed"] for r in out) else 1


if __name__ == "__main__":
    cli.run(main, PROG)

"""What a fresh process costs, with MXNet's operator code from gluonperf's cache and without it.

Every gluonperf command, each run of a script under `tune --` and each test of the suite that
starts a command pays MXNet's start-up; gluonperf/runtime/operator_code.py takes the operators'
compiling out of it. This times fresh processes in alternating pairs (the order swapped every
pair), the cache on (warm: one process ran before) and off (GLUONPERF_OPERATOR_CACHE=0), for:
`import gluonperf, mxnet` alone, and a whole short command (one LeNet step on the digits). Per
pair: off/on of the wall time and of the CPU time (user + system, the children's rusage); the
ratio's 95% interval over the pairs (benchmarks/suite_stats.py).

    python benchmarks/startup.py [--pairs 10]

Writes benchmarks/results/startup_<machine>_<date>.jsonl (records and the environment) and
prints a table; docs/measurements.md shows the latest.
"""
import argparse
import datetime
import os
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
from advice import machine_tag, user_env  # noqa: E402
from suite_stats import columns, ratio_fields  # noqa: E402
from gluonperf.measure.harness import cpu_model, environment  # noqa: E402
from gluonperf.records import format_table, result, write_jsonl  # noqa: E402

COMMANDS = {
    "import gluonperf, mxnet": ["-c", "import gluonperf, mxnet"],
    "train: one LeNet step on digits": ["-m", "gluonperf.train", "--dataset", "digits", "--model", "lenet",
                                        "--epochs", "1", "--limit", "64"],
}


def timed(argv, cache):
    """(wall s, CPU s) of one fresh process, from an environment without OMP_*/MXNET_* settings."""
    env = user_env()
    env["PYTHONPATH"] = ROOT
    if not cache:
        env["GLUONPERF_OPERATOR_CACHE"] = "0"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=300)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=10, help="alternating pairs per command (default: %(default)s)")
    p.add_argument("--out", default=None, help="results file (default: benchmarks/results/startup_<machine>_<date>.jsonl)")
    args = p.parse_args()
    if args.pairs < 2:
        p.error("--pairs must be at least 2, for an interval")
    out = args.out or os.path.join(HERE, "results", "startup_%s_%s.jsonl" % (machine_tag(),
                                                                             datetime.date.today().isoformat()))
    rows = []
    for name, argv in COMMANDS.items():
        timed(argv, True)  # the cache warm, as after any earlier process
        on, off = [], []
        for i in range(args.pairs):
            for cache in ((True, False) if i % 2 == 0 else (False, True)):
                (on if cache else off).append(timed(argv, cache))
        wall = [b[0] / a[0] for a, b in zip(on, off)]
        cpu = [b[1] / a[1] for a, b in zip(on, off)]
        rows.append(result("startup", name, command=" ".join(["python", *argv]), pairs=args.pairs,
                           wall_on_s=[a[0] for a in on], wall_off_s=[b[0] for b in off],
                           cpu_on_s=[a[1] for a in on], cpu_off_s=[b[1] for b in off],
                           **ratio_fields(wall, "wall_off_over_on"), **ratio_fields(cpu, "cpu_off_over_on"),
                           cpu_saved_s=sorted(b[1] - a[1] for a, b in zip(on, off))[args.pairs // 2],
                           wall_on_median_s=sorted(a[0] for a in on)[args.pairs // 2],
                           wall_off_median_s=sorted(b[0] for b in off)[args.pairs // 2]))
        print("%s: done" % name, file=sys.stderr)
    write_jsonl(rows, out, environment())
    print(format_table(rows, ["name", *columns("wall_off_over_on"), *columns("cpu_off_over_on"), "cpu_saved_s"],
                       "a fresh process on %s (%d cores): MXNet's operator code compiled (off) against from "
                       "gluonperf's cache (on), %d alternating pairs; cpu_saved: the median pair's"
                       % (cpu_model(), os.cpu_count(), args.pairs)))
    print("wrote %s" % out)


if __name__ == "__main__":
    main()

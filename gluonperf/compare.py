"""Compare two saved runs: `python -m gluonperf.compare OLD NEW [--fail-above 10%]`.

OLD and NEW are JSON-lines files written with `--json` by any gluonperf command or
benchmark suite. Records are matched by (bench, name) and the fields that say what
was measured (model, batch size, contexts, ...). For each pair the change of one
metric is shown, direction-aware: a rate (`*_per_s`, e.g. images/s) is better when
higher, a time (`*_s`, e.g. median_s) when lower. As pytest-benchmark's compare
does, the exit status is 1 when any benchmark got worse by more than --fail-above.
"""
import argparse
import sys

from . import UserError
from .measure import comparison, stats
from .cli.common import add_threshold, add_wide, check_output_path, parse_threshold, percentage, positive_int
from .records import format_estimate, format_table, level_text, write_jsonl


def floor_bands():
    """'26% up to 1 ms, ...': stats.NOISE_FLOORS for --help."""
    from .records import format_value
    bands, low = [], None
    for upto, floor in stats.NOISE_FLOORS:
        where = ("above %s" % format_value("median_s", low)) if upto == float("inf") else ("up to %s" % format_value("median_s", upto))
        bands.append("%g%%%% %s" % (100 * floor, where))
        low = upto
    return ", ".join(bands)


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m gluonperf.compare",
        description="Compare two result files written with --json, or two commands run in alternation "
                    "(--ab): per benchmark the change of throughput (higher is better) or time (lower is "
                    "better), its 95% interval and a verdict: faster/slower only when the interval says "
                    "so, 'same' when it lies within +-THRESHOLD, otherwise inconclusive. Exit 1 on a "
                    "regression that is significant and past --fail-above.")
    p.add_argument("old", metavar="OLD", help="baseline results (JSON lines written with --json; several runs "
                                              "of the same benchmark in one file count as runs); with --ab, "
                                              "the baseline command, quoted")
    p.add_argument("new", metavar="NEW", help="new results to judge against OLD; with --ab, the new command")
    p.add_argument("--fail-above", type=parse_threshold, metavar="PCT",
                   help="exit with status 1 when a benchmark got worse by more than PCT (e.g. 10%%) and the "
                        "interval says it got worse; without it the table is informational and the exit status 0")
    add_threshold(p)
    p.add_argument("--noise-floor", type=percentage, metavar="PCT",
                   help="the run-to-run drift of one configuration (the SD of one run's level), added to the "
                        "interval when a side is a single run (default: by how long one call takes, %s; "
                        "measured with benchmarks/verdicts.py)" % floor_bands())
    p.add_argument("--ab", action="store_true",
                   help="OLD and NEW are commands (each run with --json FILE added): run them in alternation "
                        "(ABBA...), --runs times each, and judge the per-pair ratios")
    p.add_argument("--runs", type=positive_int, default=6, help="with --ab: runs of each command (default: "
                                                                 "%(default)s)")
    p.add_argument("--timeout", type=positive_int, default=1800, metavar="SEC",
                   help="with --ab: seconds before one run is abandoned (default: %(default)s)")
    p.add_argument("--metric", help="compare on this metric (e.g. median_s, images_per_s) instead of the "
                                    "first of %s found in both records" % ", ".join(comparison.PREFERRED))
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON lines")
    add_wide(p)
    return p


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv[:-1]):  # "--fail-above -5%": argparse takes "-5%" for an option
        if a == "--fail-above" and argv[i + 1][:1] == "-" and argv[i + 1][1:2].isdigit():
            argv[i:i + 2] = ["--fail-above=" + argv[i + 1]]
            break
    args = build_parser().parse_args(argv)
    check_output_path(args.json, "--json")  # as every command: before the work, not after it
    pairs, unstable = None, []
    if args.ab:
        from .cli.common import guard_command, progress_bar
        guard_command(args, "python -m gluonperf.compare", stall_timeout=args.timeout + 120)
        with progress_bar(2 * args.runs, "compare --ab") as bar:
            old_runs, new_runs, unstable = comparison.run_ab(args.old, args.new, args.runs, args.timeout, bar.update)
        pairs = comparison.ab_pairs(old_runs, new_runs, args.metric)
        if unstable:
            from .measure.machine import warning_line
            print("note: " + warning_line(unstable), file=sys.stderr)
        old = [pair for run in old_runs for pair in run]
        new = [pair for run in new_runs for pair in run]
    else:
        old = comparison.load_records(args.old, "OLD")
        new = comparison.load_records(args.new, "NEW")
    results = comparison.compare(old, new, args.fail_above, args.metric, args.threshold, args.noise_floor, pairs,
                      stats.level_for(not unstable))
    if not any("metric" in r.metrics for r in results):
        raise UserError("no benchmark of %s matches one in %s with a common metric%s; are they results of "
                        "the same suite?" % (args.new, args.old, " (%s)" % args.metric if args.metric else ""))
    for line in comparison.environment_changes(old[0][1], new[0][1]):
        print("note: environment differs: %s" % line, file=sys.stderr)
    for path, records in ((args.old, old), (args.new, new)):
        partial = sum(1 for r, _ in records if r.metrics.get("partial"))
        if partial:  # written by a run that was stopped (cli.keep_on_stop)
            print("note: %s comes from a run that was stopped: %d record(s) hold only the rounds it had "
                  "finished" % (path, partial), file=sys.stderr)
    ids = [f for f in comparison.ID_FIELDS if any(f in r.metrics for r in results)]
    columns = ["name"] + ids + ["metric", "better", "old", "new", "change", "ratio", "95% CI", "n", "status"]
    title = "%s -> %s: ratio > 1 is better; same within +-%g%%" % (args.old, args.new, 100 * args.threshold)
    if args.fail_above is not None:
        title += "; fail above %.4g%% worse" % (100 * args.fail_above)
    shown = comparison.display(results)
    if not args.wide:  # the figures first, the ratio and its interval in one cell; what identifies a record after
        # them, the first to go when the terminal is narrow (the name holds most of it)
        levels = {r.metrics.get("ratio_level") for r in results} - {None}  # 99% on an unstable machine
        cell = "ratio (%s CI)" % level_text(levels.pop()) if len(levels) == 1 else "ratio (95% CI)" if not levels \
            else "ratio (CI)"
        for row, r in zip(shown, results):
            m = r.metrics
            high = m.get("ratio_ci_high")
            row.metrics[cell] = None if m.get("ratio") is None else format_estimate(
                "ratio", m["ratio"], m.get("ratio_ci_low"), high if high not in (None, float("inf")) else None)
        columns = ["name", "metric", "old", "new", "change", cell, "status"] + ids + ["better", "n"]
    left = []
    print(format_table(shown, columns=columns, title=title, wide=args.wide, left_out=left.append))
    if left:  # on stderr, with compare's other notes: stdout stays the table and its evidence line
        sys.stdout.flush()
        print("note: " + left[0], file=sys.stderr)
    kinds = sorted({r.metrics["evidence"] for r in results if "evidence" in r.metrics})
    print("evidence: %s" % "; ".join(kinds))
    if any("one run each" in k for k in kinds):
        print("note: with one run on each side the interval includes a run-to-run noise floor (by how long one "
              "call takes, or --noise-floor): it cannot see how this machine drifted between the two runs; for "
              "a sharper verdict save several runs of each side in one file each, or use --ab", file=sys.stderr)
    if args.json:
        write_jsonl(results, args.json)
    bad = comparison.regressions(results)
    if bad:
        print("%d regression(s) past %.4g%%: %s" % (len(bad), 100 * args.fail_above,
                                                  ", ".join(r.name for r in bad)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from .cli import common as cli  # no MXNet: cli loads it only where a command needs it
    cli.run(main, "python -m gluonperf.compare", mxnet=False)

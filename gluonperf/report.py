"""One HTML page of a results folder: `python -m gluonperf.report RESULTS... -o report.html`.

RESULTS are files or folders of JSON lines written with `--json` by any gluonperf command or
benchmark suite; the page is one self-contained file (docs/commands/report.md). Each kind of
records is drawn by a small renderer, keyed by the records' `bench`: a bench subcommand's in
its module (gluonperf.bench, `section`), the other commands' in gluonperf.render.kinds; `PAGE`
orders them. Records no renderer can read go to a generic table, never dropped.
`--compare OLD` judges the change with `gluonperf.measure.comparison`, as compare does.

Nothing here imports MXNet.
"""
import argparse

from .cli.common import parse_threshold
from .measure import comparison
from .render import page
from .runtime.outputs import write_output

PROG = "python -m gluonperf.report"

# The sections in the order a reader needs them, by the first `bench` of their kind: a kind
# not named here comes after these.
PAGE = ["hybridize", "hybridize_suite", "async", "memory", "parallel", "overlap", "allreduce", "scratch", "train",
        "scaling", "ceiling", "tune", "footprint", "predict", "inference"]


def kinds():
    """Every kind the page draws: the bench subcommands' (gluonperf.bench.kinds) and the other
    commands' (gluonperf.render.kinds.KINDS, and infer's, gluonperf.render.inference), in PAGE's order."""
    from . import bench
    from .render.inference import KIND as INFERENCE
    from .render.kinds import KINDS
    place = {bench_name: i for i, bench_name in enumerate(PAGE)}
    return sorted(bench.kinds() + KINDS + [INFERENCE], key=lambda kind: place.get(kind.benches[0], len(place)))


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Write one self-contained HTML page (tables, SVG plots, one-line readings; no network "
                    "needed to view it) of results written with --json by any gluonperf command or "
                    "benchmark suite: the machine and environment, then one section per benchmark kind.")
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="JSON-lines files, or folders searched for *.json / *.jsonl (profiler traces and "
                        "checkpoint meta.json files in them are skipped)")
    p.add_argument("-o", "--output", default="report.html", metavar="HTML",
                   help="the page to write (default: %(default)s)")
    p.add_argument("--compare", metavar="OLD",
                   help="older results (file or folder): add each benchmark's change, matched as "
                        "python -m gluonperf.compare does")
    p.add_argument("--threshold", type=parse_threshold, default=0.10, metavar="PCT",
                   help="with --compare: mark a benchmark that got worse by more than PCT a regression "
                        "(default: 10%%)")
    p.add_argument("--metric", help="with --compare: compare on this metric instead of the first of %s"
                                    % ", ".join(comparison.PREFERRED))
    p.add_argument("--title", default="gluonperf report", help="the page's title (default: %(default)s)")
    return p


def main(argv=None):
    from .cli import common as cli
    args = build_parser().parse_args(argv)
    cli.check_output_path(args.output, "-o")
    runs, skipped = page.load_results(args.results)
    old_runs = None
    if args.compare:
        old_runs, more = page.load_results([args.compare], "OLD")
        skipped += more
    html, regressions = page.render_page(runs, args.title, old_runs, args.threshold, args.metric, args.compare, skipped,
                                         kinds())
    write_output(args.output, html.encode("utf-8"))
    for path in skipped:
        cli.note("note: skipped %s (a profiler trace or checkpoint, not results)" % path)
    records = sum(len(pairs) for _, pairs in runs)
    print("wrote %s: %d records from %d file%s%s" % (
        args.output, records, len(runs), "" if len(runs) == 1 else "s",
        "; %d regression(s) past %.4g%% against %s" % (regressions, 100 * args.threshold, args.compare)
        if regressions else ""))
    return 0


if __name__ == "__main__":
    from .cli import common as cli
    cli.run(main, PROG, mxnet=False)

"""python -m gluonperf.bench parallel: two devices computing at once."""
from ..cli import common as cli
from . import shared

NAME = "parallel"
QUICK = ["--cpu-size", "64", "--products", "3", "--repeat", "2"]
# CPU contexts that run at once, at least: a single context is paired with the next one
AT_LEAST_CONTEXTS = 2
# its CPU contexts stand in for devices: glibc keeps freed memory, as a GPU's pool does
STAND_IN = True
RECORDS = ("parallel",)
TITLE = "Two devices at once"
# on devices that are not stand-ins the terminal adds each one's peak memory (device_peak_bytes...)
COLUMNS = ["name", "median_s", "iqr_s", "noisy", "gain", "gain_ci_low", "gain_ci_high", "verdict"]


def add_parser(sub, common):
    p = sub.add_parser(
        "parallel", parents=[common],
        help="CPU and GPU at once: 10 matrix products on each alone, then both queued together",
        description="The chapter's 10 matrix products on two devices: each alone, then both queued "
                    "together with no sync in between; reports the concurrency gain (t_a + t_b) / t_both. "
                    "Devices: the first two of --ctx; a single GPU is paired with cpu0 (the book's CPU + GPU); "
                    "a single CPU context with the next one (cpu0 and cpu1 have separate engine workers), "
                    "labelled as a stand-in.")
    shared.add_device_sizes(p, repeat=7)
    p.set_defaults(contexts_used=lambda args: shared.pair_used(args, "pick_pair"))


def measure(args):
    """Check the flags, time each device alone and both at once: (records, the two devices)."""
    from ..experiments.auto_parallel import concurrency, pick_pair, size_for
    from ..measure.timing import Timing
    from ..measure.trace import Trace
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    a, b = pick_pair(ctxs)
    # x and its --products products on each CPU context (n x n float32 each)
    cli.check_memory(sum(4 * (args.products + 1) * size_for(c, args.cpu_size, args.gpu_size) ** 2
                         for c in (a, b) if c.device_type == "cpu"),
                     "--products %d of a %d x %d matrix on each context"
                     % (args.products, args.cpu_size, args.cpu_size))
    trace = Trace(args.trace)
    with cli.progress_bar(3 * args.repeat, "parallel") as bar:
        results = concurrency(a, b, size_for(a, args.cpu_size, args.gpu_size), size_for(b, args.cpu_size, args.gpu_size),
                              args.products, Timing(repeat=args.repeat, progress=bar.update), trace)
    shared.write_trace(trace)
    return results, [a, b]


def show(args, results, ctxs):
    """The terminal's table."""
    a, b = ctxs
    columns = list(COLUMNS)
    if not results[0].metrics["stand_in"]:
        columns += [k for k in results[-1].metrics if k.startswith("device_peak_bytes")]
    cli.emit(results, args, ctxs, columns=columns,
             title="%d products of x with itself on %s (%s) and %s (%s), median of %d%s"
                   % (args.products, a, "x %dx%d" % ((results[0].metrics["size_a"],) * 2), b,
                      "x %dx%d" % ((results[0].metrics["size_b"],) * 2), args.repeat,
                      shared.stand_in_note(results[0].metrics["stand_in"])))
    shared.wrote_trace(args.trace)
    shared.warn_noisy(results)


def section(records):
    """The report's block: each device alone and both at once, and the gain."""
    from ..render.figures import time_bars
    from ..render.kinds import Block, Table, noisy_note, report_columns, verdict_of, with_interval
    both = next(r for r in records if "gain" in r.metrics)
    alone = [r for r in records if r is not both]
    return Block("%s products on %s" % (both.metrics.get("n"), both.metrics.get("devices")),
                 [Table(records, report_columns(COLUMNS))],
                 time_bars(records, [("sum of the runs alone", sum(r.metrics["median_s"] for r in alone))]),
                 "both at once: gain %s%s = (t_a + t_b) / t_both (2: the devices fully overlap, 1: not at all)%s%s"
                 % (with_interval(both.metrics, "gain", "repeats"), verdict_of(both.metrics, what="repeats"),
                    shared.stand_in_reading(both.metrics), noisy_note(records)))

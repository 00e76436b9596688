"""python -m gluonperf.bench overlap: computation and communication pipelined."""
from ..cli import common as cli
from . import shared

NAME = "overlap"
QUICK = ["--cpu-size", "64", "--products", "3", "--repeat", "2"]
# CPU contexts that run at once, at least: a single context is paired with the next one
AT_LEAST_CONTEXTS = 2
# its CPU contexts stand in for devices: glibc keeps freed memory, as a GPU's pool does
STAND_IN = True
RECORDS = ("overlap",)
TITLE = "Computation and communication overlapping"
# on devices that are not stand-ins the terminal adds each one's peak memory (device_peak_bytes...)
COLUMNS = ["name", "median_s", "iqr_s", "noisy", "minor_faults", "gain", "gain_ci_low", "gain_ci_high",
           "verdict", "hidden_s", "overlap", "overlap_lost_in_noise"]

# extra page faults per repeat (1 MiB of 4 KiB pages) worth telling the user about
FAULTS_WORTH_A_NOTE = 256


def add_parser(sub, common):
    p = sub.add_parser(
        "overlap", parents=[common],
        help="computation and communication: compute, copy, then both pipelined",
        description="Compute 10 matrix products on a device, copy the results to another, then both "
                    "pipelined (copy y[i-1] while y[i] computes); reports the time hidden, "
                    "t_compute + t_copy - t_both, and the overlap: that divided by min(t_compute, t_copy). "
                    "Devices: the first two of --ctx (compute, destination); a single GPU copies to cpu0 "
                    "(the book); a single CPU context copies to the next CPU context, labelled as a stand-in.")
    shared.add_device_sizes(p, repeat=30)
    p.add_argument("--inner", type=cli.positive_int, default=None,
                   help="compute each y as x (n x K) times w (K x n) instead of x times x: the same bytes "
                        "to copy for K/n of the work (default: the book's x times x on a GPU, K=16 on a CPU, "
                        "where a full product dwarfs the copy of its result)")
    p.set_defaults(contexts_used=lambda args: shared.pair_used(args, "pick_source_and_destination"))


def _shape(args, src):
    """(n, K): y is x (n x K) times w (K x n); K is None for the book's x times x."""
    from ..experiments.auto_parallel import size_for
    size = size_for(src, args.cpu_size, args.gpu_size)
    return size, args.inner or (None if src.device_type == "gpu" else min(16, size))


def measure(args):
    """Check the flags, time compute, copy and both pipelined: (records, source and destination)."""
    from ..experiments.auto_parallel import overlap, pick_source_and_destination
    from ..measure.timing import Timing
    from ..measure.trace import Trace
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    src, dest = pick_source_and_destination(ctxs)
    size, inner = _shape(args, src)
    if src.device_type == "cpu":  # the products on the source, their copies on the destination
        k = inner or size
        cli.check_memory(4 * (2 * size * k + 2 * args.products * size * size),
                         "--products %d of %d x %d on the source and their copies" % (args.products, size, size))
    trace = Trace(args.trace)
    with cli.progress_bar(3 * args.repeat, "overlap") as bar:
        results = overlap(src, dest, size, args.products, inner, Timing(repeat=args.repeat, progress=bar.update),
                          trace)
    shared.write_trace(trace)
    return results, [src, dest]


def show(args, results, ctxs):
    """The terminal's table, and notes on page faults and on an overlap lost in noise."""
    src, dest = ctxs
    size, inner = _shape(args, src)
    columns = list(COLUMNS)
    if not results[0].metrics["stand_in"]:
        columns += [k for k in results[-1].metrics if k.startswith("device_peak_bytes")]
    cli.emit(results, args, ctxs, columns=columns,
             title="%d products %s on %s, copied to %s (%.1f MiB), median of %d%s"
                   % (args.products, "x times x, x %dx%d" % (size, size) if not inner or inner == size
                      else "x (%dx%d) times w (%dx%d)" % (size, inner, inner, size),
                      src, dest, results[0].metrics["copy_bytes"] / 2 ** 20,
                      args.repeat, shared.stand_in_note(results[0].metrics["stand_in"])))
    extra_faults = results[-1].metrics["extra_faults"]
    if extra_faults is not None and extra_faults > FAULTS_WORTH_A_NOTE:
        cli.note("note: the pipelined run took %d more page faults per repeat than compute and copy apart "
                 "(%.0f MiB faulted in again): the allocator gave freed arrays back to the system, a cost "
                 "that is not overlap (gluonperf avoids it unless MALLOC_*, GLIBC_TUNABLES or LD_PRELOAD choose the "
                 "allocator: see the README's bench overlap)" % (extra_faults, extra_faults * 4096 / 2 ** 20))
    if results[-1].metrics["overlap_lost_in_noise"]:
        cli.note("note: the runs' spread is larger than half the shorter of compute and copy, so the "
                 "overlap ratio is noise; raise --repeat, or balance them with --inner")
    shared.wrote_trace(args.trace)
    shared.warn_noisy(results)


def section(records):
    """The report's block: compute, copy and both, the time hidden and the overlap."""
    from ..render.figures import time_bars
    from ..render.kinds import Block, Table, noisy_note, report_columns, seconds, verdict_of, with_interval
    both = next(r for r in records if "overlap" in r.metrics)
    m = both.metrics
    parts = [r for r in records if r is not both]
    reading = ("the overlap is lost in noise (the spread exceeds half the shorter of compute and copy)"
               if m.get("overlap_lost_in_noise") else
               "pipelining hid %s: overlap %.2f of the shorter of compute and copy (1: fully hidden)"
               % (seconds(m["hidden_s"]), m["overlap"]))
    if m.get("gain") is not None:
        reading += "; gain over compute and copy apart %s%s" % (with_interval(m, "gain", "repeats"),
                                                                verdict_of(m, what="repeats"))
    return Block("%s products, copied %s (%.3g MiB)" % (m.get("n"), m.get("devices"), m.get("copy_bytes", 0) / 2 ** 20),
                 [Table(records, report_columns(COLUMNS, besides={"overlap": ["paired_overlap"]}))],
                 time_bars(records, [("compute + copy, one after the other",
                                      sum(r.metrics["median_s"] for r in parts))]),
                 reading + shared.stand_in_reading(m) + noisy_note(records))

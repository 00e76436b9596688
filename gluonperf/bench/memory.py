"""python -m gluonperf.bench memory: the memory cost of running ahead of the engine."""
from ..cli import common as cli
from . import shared

NAME = "memory"
QUICK = ["--batches", "4", "--every", "2", "--batch-size", "32", "--features", "16"]
RECORDS = ("memory",)
TITLE = "Memory cost of running ahead"
# device_peak_bytes on GPU contexts, error when a variant failed
COLUMNS = ["name", "seconds_s", "per_batch_s", "rss_peak_bytes", "rss_growth_bytes", "device_peak_bytes",
           "ran_ahead_batches", "max_in_flight", "time_vs_first", "growth_vs_first", "error"]


def add_parser(sub, common):
    p = sub.add_parser(
        "memory", parents=[common],
        help="memory cost of running ahead: sync every batch, every k batches, or never",
        description="Train the chapter's MLP (Dense 2048 relu, Dense 512 relu, Dense 1; L2 loss; SGD) "
                    "on batches of 1024x512, calling l.mean().asscalar() every batch, every k batches, or "
                    "never. Each variant runs in a fresh process, so allocator warm-up and order do not "
                    "decide the result. Reports the loop's time, peak RSS sampled during the loop (and its "
                    "growth over the start of the loop), on GPU contexts the peak device memory, and how far "
                    "the data producer ran ahead: batches produced before the first had finished, and the "
                    "most batches in flight. Runs on the first context of --ctx.")
    p.add_argument("--batches", type=cli.positive_int, default=100,
                   help="batches per variant (default: %(default)s)")
    p.add_argument("--every", type=cli.positive_int_list, default=[1, 5, 25],
                   help="comma-separated k: sync every k batches, one variant each; a no-sync variant is "
                        "always added (default: 1,5,25)")
    p.add_argument("--batch-size", type=cli.positive_int, default=1024, help="samples per batch (default: %(default)s)")
    p.add_argument("--features", type=cli.positive_int, default=512, help="input features (default: %(default)s)")
    p.add_argument("--data", choices=["host", "engine"], default="host",
                   help="host: batches made in host memory and copied in, as a data loader does, so a batch "
                        "takes memory as soon as it is produced (default); engine: made by nd.random.normal "
                        "as in the book, which takes no memory until the engine runs it")
    p.add_argument("--plot", metavar="PNG", help="also draw the memory/time trade-off to this PNG file")
    shared.add_trace(p, "each variant's training loop (its process's trace merged into one file; times then "
                  "include the profiler's small overhead)")


def measure(args):
    """Check the flags, run each variant in its own process: (records, the context they ran on)."""
    from ..experiments.asynchronous import memory_cost
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    cli.check_output_path(args.plot, "--plot")
    with cli.progress_bar(len(set(args.every) | {0}), "memory") as bar:
        results = memory_cost(ctxs[0], args.batches, args.every, args.batch_size, args.features, args.data,
                              trace_path=args.trace, progress=bar.update)
    return results, ctxs[:1]


def show(args, results, ctxs):
    """The terminal's table (device memory on a GPU, errors where a variant failed) and the plot."""
    from ..render.plots import plot_memory_tradeoff
    ctx = ctxs[0]
    failed = any("error" in r.metrics for r in results)
    columns = [c for c in COLUMNS
               if (c != "device_peak_bytes" or ctx.device_type == "gpu") and (c != "error" or failed)]
    cli.emit(results, args, ctxs, columns=columns,
             title="the chapter's MLP, %d batches of %dx%d (%s data) on %s, one fresh process per variant"
                   % (args.batches, args.batch_size, args.features, args.data, ctx))
    if args.plot:
        plot_memory_tradeoff(results, args.plot, title="memory cost of running ahead (%s, %d batches)"
                                                        % (ctx, args.batches))
        cli.note("wrote plot %s" % args.plot)
    if args.trace:
        cli.note("wrote profiler trace %s (one process per variant; open in ui.perfetto.dev)" % args.trace)


def section(records):
    """The report's block: time and peak-RSS growth per variant, the last against the first."""
    from ..render.figures import figure, svg
    from ..render.kinds import Block, Table
    ok = [r for r in records if "error" not in r.metrics]
    fig, ax = figure(height=3.0)
    a = ax[0][0]
    xs = range(len(ok))
    a.plot(xs, [r.metrics["rss_growth_bytes"] / 2 ** 20 for r in ok], "o-", color="tab:red")
    a.set_ylabel("peak RSS growth (MiB)", color="tab:red")
    a.set_ylim(0, 1.15 * max(r.metrics["rss_growth_bytes"] / 2 ** 20 for r in ok) or 1)
    t = a.twinx()
    t.plot(xs, [r.metrics["seconds_s"] for r in ok], "s--", color="tab:blue")
    t.set_ylabel("time for the loop (s)", color="tab:blue")
    t.set_ylim(0, 1.15 * max(r.metrics["seconds_s"] for r in ok))
    a.set_xticks(list(xs))
    a.set_xticklabels([r.name for r in ok])
    a.grid(True, alpha=0.3)
    first, last = ok[0], ok[-1]
    reading = "%s: %.3gx the time and %.3gx the peak-RSS growth of %s (one run each, no interval; ran ahead up to " \
              "%s batches)" % (
        last.name, last.metrics["seconds_s"] / first.metrics["seconds_s"],
        last.metrics["rss_growth_bytes"] / max(first.metrics["rss_growth_bytes"], 1), first.name,
        last.metrics.get("max_in_flight", "?"))
    m = first.metrics
    return Block("the chapter's MLP, %s batches of %s samples (%s data) on %s" % (m.get("batches"), m.get("batch_size"),
                                                                        m.get("data"), m.get("ctx")),
                 [Table(records, COLUMNS)], svg(fig), reading)

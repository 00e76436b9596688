"""python -m gluonperf.bench memory: the memory cost of running ahead of the engine."""

from ..cli import common as cli
from . import shared

NAME = "memory"


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
    p.set_defaults(run=run)


def run(args):
    from ..experiments.asynchronous import memory_cost
    from ..render.plots import plot_memory_tradeoff
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    cli.check_output_path(args.plot, "--plot")
    ctx = ctxs[0]
    with cli.progress_bar(len(set(args.every) | {0}), "memory") as bar:
        results = memory_cost(ctx, args.batches, args.every, args.batch_size, args.features, args.data,
                              trace_path=args.trace, progress=bar.update)
    columns = ["name", "seconds_s", "per_batch_s", "rss_peak_bytes", "rss_growth_bytes",
               "ran_ahead_batches", "max_in_flight", "time_vs_first", "growth_vs_first"]
    if ctx.device_type == "gpu":
        columns.insert(5, "device_peak_bytes")
    if any("error" in r.metrics for r in results):
        columns.append("error")
    cli.emit(results, args, ctxs[:1], columns=columns,
             title="the chapter's MLP, %d batches of %dx%d (%s data) on %s, one fresh process per variant"
                   % (args.batches, args.batch_size, args.features, args.data, ctx))
    if args.plot:
        plot_memory_tradeoff(results, args.plot, title="memory cost of running ahead (%s, %d batches)"
                                                        % (ctx, args.batches))
        cli.note("wrote plot %s" % args.plot)
    if args.trace:
        cli.note("wrote profiler trace %s (one process per variant; open in ui.perfetto.dev)" % args.trace)
    return 0

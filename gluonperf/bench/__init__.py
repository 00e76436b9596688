"""python -m gluonperf.bench <experiment>: a thin command line over the experiment modules.

Each subcommand parses its flags, calls one experiment function, and hands the
records to `gluonperf.cli.common.emit`. Nothing is computed here.
"""
import argparse

from ..cli import common as cli
from ..cli import units
from ..cli.processes import add_processes

# Experiments that run more CPU contexts at once than --ctx names: parallel and overlap
# pair a single context with the next one; allreduce with --ctx cpu uses cpu0..cpuN-1.
AT_LEAST_CONTEXTS = {"parallel": 2, "overlap": 2, "allreduce": 2}


def contexts_at_once(argv):
    """The fewest CPU contexts the subcommand in `argv` runs at once (read before argparse)."""
    command = cli.subcommand_in_argv(argv)
    at_least = AT_LEAST_CONTEXTS.get(command, 1)
    if command == "allreduce" and "--num-ctx" in argv[:-1]:
        try:
            at_least = max(int(n) for n in argv[argv.index("--num-ctx") + 1].split(","))
        except ValueError:
            pass  # argparse reports it
    return at_least


# Experiments whose CPU contexts stand in for devices: glibc keeps freed memory, as a GPU's pool does
# (gluonperf.runtime.allocator); not bench memory or footprint, which measure the process's memory.
STAND_IN_COMMANDS = ("parallel", "overlap", "allreduce")
# overlap: extra page faults per repeat (1 MiB of 4 KiB pages) worth telling the user about
FAULTS_WORTH_A_NOTE = 256

PROG = "python -m gluonperf.bench"


# --- hybridize ---------------------------------------------------------------

def add_hybridize(sub, common):
    p = sub.add_parser(
        "hybridize", parents=[common],
        help="imperative vs hybridize() vs hybridize(static_alloc, static_shape)",
        description="Time the same model, with the same weights and input, imperatively, after "
                    "hybridize(), and after hybridize(static_alloc=True, static_shape=True). Reports "
                    "per-call time, speedup over imperative, the largest output difference, and how "
                    "often Python's hybrid_forward ran. Runs on the first context of --ctx.")
    p.add_argument("--model", default="mlp", help="model name (default: %(default)s; see --list-models)")
    p.add_argument("--list-models", action="store_true", help="list the names --model accepts and exit")
    p.add_argument("--batch-size", type=cli.positive_int, default=1, help="samples per call (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=5, help="timed repeats per mode (default: %(default)s)")
    p.add_argument("--number", type=cli.positive_int, default=None,
                   help="calls per repeat (default: 1000 forward calls, as in the chapter; 10 with --train)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=1,
                   help="untimed calls per mode before timing (default: %(default)s)")
    p.add_argument("--train", action="store_true",
                   help="time full training steps (forward, backward, Trainer.step) instead of forward calls")
    cli.add_threshold(p)
    p.add_argument("--export", metavar="DIR",
                   help="export the hybridized model (symbol JSON + params) to DIR and check that "
                        "SymbolBlock.imports gives the same outputs")
    p.set_defaults(run=run_hybridize)


def run_hybridize(args):
    from ..experiments.hybridize import compare_modes
    if args.list_models:
        cli.print_models()
        return 0
    from ..training.models import get_model
    get_model(args.model)  # unknown names fail here, before any work
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_dir(args.export, "--export")
    number = args.number or (10 if args.train else 1000)
    with cli.progress_bar(3 * args.repeat, "hybridize") as bar:
        results = compare_modes(model=args.model, batch_size=args.batch_size, ctx=ctxs[0],
                                repeat=args.repeat, number=number, warmup=args.warmup,
                                train=args.train, export_dir=args.export, progress=bar.update,
                                threshold=args.threshold)
    timed = [r for r in results if r.name != "export"]
    cli.emit(timed, args, ctxs[:1],
             title="%s %s, batch %d on %s: per-call time over %d repeats of %d calls"
                   % (args.model, "train steps" if args.train else "forward calls",
                      args.batch_size, ctxs[0], args.repeat, number),
             columns=["name", "median_s", "iqr_s", "noisy", "speedup", "speedup_ci_low", "speedup_ci_high",
                      "verdict", "samples_per_s", "max_abs_diff", "hybrid_forward_calls", "calls"])
    for r in timed:
        if r.metrics.get("verdict_text"):
            print("%s vs imperative: %s" % (r.name, r.metrics["verdict_text"]))
    _warn_unstable(timed)
    for r in results:
        if r.name == "export":
            print("exported %s and %s; SymbolBlock.imports matches (max abs diff %.3g)"
                  % (r.metrics["symbol_file"], r.metrics["params_file"], r.metrics["max_abs_diff"]))
    if any(r.metrics.get("noisy") for r in timed):
        cli.note("note: some results are noisy (IQR above 10% of the median); "
                 "close other work or raise --repeat")
    return 0


def _warn_unstable(results):
    """A note when the machine was unstable during the measurement (gluonperf.measure.machine)."""
    from ..measure.machine import warning_line
    line = warning_line(next((r.metrics["machine_warnings"] for r in results if r.metrics.get("machine_warnings")),
                             None))
    if line:
        cli.note("note: " + line)


# --- data parallelism from scratch: allreduce, scratch ------------------------

def _size_list(text):
    """'4K,256K,4M,32M' -> bytes (K = KiB, M = MiB; a plain number is bytes)."""
    import re
    out = []
    for item in text.split(","):
        m = re.match(r"^\s*(\d+(?:\.\d+)?)\s*([kKmM]?)(?:i?[bB])?\s*$", item)
        if not m:
            raise argparse.ArgumentTypeError("%r is not a size; use e.g. 4K,256K,4M,32M" % item)
        value = float(m.group(1)) * {"": 1, "k": 2 ** 10, "m": 2 ** 20}[m.group(2).lower()]
        if value < 4:
            raise argparse.ArgumentTypeError("size %r is below one float32 (4 bytes)" % item)
        out.append(int(value))
    return out


def _count_list(text):
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of whole numbers" % text)
    if any(c < 2 for c in counts):
        raise argparse.ArgumentTypeError("%r: an allreduce needs at least 2 contexts" % text)
    return counts


def add_allreduce(sub, common):
    from ..config import ALLREDUCE_KVSTORES, ALLREDUCE_METHODS
    p = sub.add_parser(
        "allreduce", parents=[common],
        help="allreduce bandwidth: book / ring / tree vs kvstore device / local vs plain copyto",
        description="Bandwidth of summing one float32 tensor over k contexts and leaving the sum on "
                    "each: the book's reduce-then-broadcast, a ring (reduce-scatter + all-gather) and a "
                    "binomial tree, side by side with MXNet's kvstore ('device' and 'local') push+pull, "
                    "and a plain copyto between two contexts as the ceiling. GB/s counts the bytes each "
                    "context must receive, 2(k-1)/k x size (NCCL's 'bus bandwidth'), so a perfect allreduce "
                    "reaches the copy's rate; of_ceiling is that fraction. max_recv is the most any one "
                    "context receives under the schedule, in tensor sizes. With --ctx cpu (the default) "
                    "cpu0..cpu3 stand in for devices; they share one memory system, so this measures "
                    "engine and memcpy costs, not links.")
    p.add_argument("--sizes", type=_size_list, default=_size_list("4K,256K,4M,32M"),
                   help="tensor sizes in bytes, K = KiB, M = MiB (default: 4K,256K,4M,32M)")
    p.add_argument("--num-ctx", type=_count_list, default=None,
                   help="numbers of contexts to allreduce over (default: 2,3,4, up to the number of --ctx)")
    p.add_argument("--methods", default=",".join(ALLREDUCE_METHODS + ALLREDUCE_KVSTORES),
                   help="comma-separated variants (default: %(default)s); the copyto ceiling always runs")
    p.add_argument("--repeat", type=cli.positive_int, default=7, help="timed repeats per variant (default: %(default)s)")
    p.add_argument("--number", type=cli.positive_int, default=None,
                   help="calls per repeat (default: enough for about 50 ms per repeat of the slowest variant)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=1,
                   help="untimed calls per variant before timing (default: %(default)s)")
    p.add_argument("--reuse-buffers", action="store_true",
                   help="let book/ring/tree keep one receive buffer per context between calls instead of "
                        "a fresh temporary per transfer (as the book does)")
    p.set_defaults(run=run_allreduce, contexts_used=allreduce_contexts)


def allreduce_contexts(args):
    """--ctx cpu (one CPU): cpu(0).. cpu(k-1) stand in for devices; else the contexts of --ctx."""
    import mxnet as mx
    if args.ctx.strip().lower() == "cpu":
        return [mx.cpu(i) for i in range(max(args.num_ctx or [4]))]
    return cli.contexts(args)


def run_allreduce(args):
    from .. import UserError
    from ..experiments.from_scratch import KVSTORES, METHODS, allreduce_bandwidth
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS + KVSTORES:
            raise UserError("unknown --methods item %r; choose from %s" % (m, ",".join(METHODS + KVSTORES)))
    if not methods:
        raise UserError("--methods is empty; choose from %s" % ",".join(METHODS + KVSTORES))
    ctxs = allreduce_contexts(args)
    if len(ctxs) < 2:
        raise UserError("--ctx %s is one context; an allreduce needs at least 2 (e.g. --ctx cpu0,cpu1)" % args.ctx)
    counts = args.num_ctx or [k for k in (2, 3, 4) if k <= len(ctxs)]
    for k in counts:
        if k > len(ctxs):
            raise UserError("--num-ctx %d is more than the %d contexts of --ctx %s" % (k, len(ctxs), args.ctx))
    cli.check_outputs(args)
    total = len(counts) * len(args.sizes) * (len(methods) + 1) * args.repeat
    with cli.progress_bar(total, "allreduce") as bar:
        results = allreduce_bandwidth(ctxs, args.sizes, counts, methods, repeat=args.repeat,
                                      warmup=args.warmup, number=args.number, reuse_buffers=args.reuse_buffers,
                                      progress=bar.update)
    cli.emit(results, args, ctxs,
             title="allreduce of one float32 tensor over k of %s (median of %d repeats); GB/s counts the "
                   "2(k-1)/k x size each context receives; ceiling = copyto %s -> %s%s"
                   % (",".join(map(str, ctxs)), args.repeat, ctxs[0], ctxs[1],
                      "; all cpu(i) share one memory system" if all(c.device_type == "cpu" for c in ctxs) else ""),
             columns=["contexts", "size", "name", "median_s", "iqr_s", "bus_GBps", "of_ceiling",
                      "max_recv", "noisy", "max_abs_err"])
    bad = [r for r in results if r.metrics["max_abs_err"] > 0]
    if bad:
        raise UserError("%s gave a wrong sum (error %g)" % (bad[0].name, bad[0].metrics["max_abs_err"]))
    if any(r.metrics.get("noisy") for r in results):
        cli.note("note: some results are noisy (IQR above 10% of the median); "
                 "close other work or raise --repeat")
    if not args.reuse_buffers and max(args.sizes) >= 32 * 2 ** 20 and ctxs[0].device_type == "cpu":
        cli.note("note: on CPU every temporary of 32 MiB or more is freshly mapped memory (glibc malloc; "
                 "MXNet does not pool CPU memory), so methods that receive whole tensors pay for it; "
                 "compare with --reuse-buffers")
    return 0


def add_scratch(sub, common):
    from ..config import ALLREDUCE_METHODS, DATASETS
    p = sub.add_parser(
        "scratch", parents=[common],
        help="the book's LeNet trained data-parallel from scratch (get_params, allreduce, split_and_load)",
        description="Train the chapter's NDArray LeNet data-parallel over the contexts of --ctx with the "
                    "from-scratch helpers (get_params, split_and_load, allreduce, train_batch), by default on "
                    "synthetic Fashion-MNIST-shaped data (1x28x28, 10 classes, learnable class patterns plus "
                    "noise). Reports per-epoch training time (each batch ends in a sync, as in the book), images/s, "
                    "mean training loss and test accuracy (on the first context).")
    p.add_argument("--epochs", type=cli.positive_int, default=4, help="epochs (default: %(default)s)")
    p.add_argument("--batch-size", type=cli.positive_int, default=256,
                   help="global batch size, split over the contexts (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.2, help="SGD learning rate (default: %(default)s, as in the book)")
    p.add_argument("--method", default="book",
                   help="allreduce method: %s (default: %%(default)s)" % ", ".join(ALLREDUCE_METHODS))
    p.add_argument("--init-scale", type=float, default=0.1,
                   help="std of the normal initial weights (default: %(default)s; the book's 0.01 needs "
                        "hundreds of steps to leave chance level, more than the default data gives)")
    p.add_argument("--dataset", choices=list(DATASETS), default="synthetic",
                   help="synthetic (6000 train / 1000 test images), digits (scikit-learn's, offline) or "
                        "fashion-mnist (IDX files in --data-dir) (default: %(default)s)")
    p.add_argument("--data-dir", metavar="DIR", help="where the Fashion-MNIST .gz files are")
    p.add_argument("--limit", type=cli.positive_int, metavar="N",
                   help="use only the first N training (and test) images")
    p.add_argument("--seed", type=cli.non_negative_int, default=0, help="seed for data and weights (default: %(default)s)")
    p.set_defaults(run=run_scratch)


def run_scratch(args):
    import math
    from .. import UserError
    from ..training.data import load_dataset
    from ..experiments.from_scratch import check_method, init_params, loaders, train
    check_method(args.method)
    ctxs = cli.contexts(args)
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the %d contexts; each needs at least one sample"
                        % (args.batch_size, len(ctxs)))
    if not (args.lr > 0 and math.isfinite(args.lr)) or not (args.init_scale > 0 and math.isfinite(args.init_scale)):
        raise UserError("--lr and --init-scale must be positive numbers")
    cli.check_outputs(args)
    train_set, test_set = load_dataset(args.dataset, args.data_dir, args.limit, args.seed)
    if len(train_set) < args.batch_size:
        raise UserError("--batch-size %d is larger than the %d training images; lower it or raise --limit"
                        % (args.batch_size, len(train_set)))
    train_iter, test_iter = loaders(train_set, test_set, args.batch_size, len(ctxs), seed=args.seed)
    with cli.progress_bar(args.epochs * len(train_iter), "scratch") as bar:
        results = train(ctxs, train_iter, test_iter, epochs=args.epochs, lr=args.lr, method=args.method,
                        params=init_params(scale=args.init_scale, seed=args.seed), progress=bar.update)
    cli.emit(results, args, ctxs,
             title="LeNet from scratch on %s, %s (%d train / %d test), batch %d, lr %g, allreduce %s"
                   % (",".join(map(str, ctxs)), args.dataset, len(train_set), len(test_set), args.batch_size,
                      args.lr, args.method),
             columns=["epoch", "time_s", "images_per_s", "train_loss", "test_acc"])
    return 0


# --- async, memory, parallel, overlap ---------------------------------------------

def positive_int_list(text):
    """'10,100,1000' -> [10, 100, 1000]; every item a whole number >= 1."""
    items = [t.strip() for t in text.split(",")]
    if not items or not all(items):
        raise argparse.ArgumentTypeError("%r: give whole numbers separated by commas, e.g. 10,100,1000" % text)
    return [cli.positive_int(t) for t in items]


def _add_trace(p, what="one more run of the measured code, untimed, so the profiler's overhead stays "
                        "out of the timings"):
    p.add_argument("--trace", metavar="PATH",
                   help="also write an MXNet profiler trace (Chrome trace JSON: open in ui.perfetto.dev or "
                        "chrome://tracing) of %s" % what)


def _emit_sections(sections, args, ctxs, extra=()):
    """Print one table per (title, results, columns) section; write every record, and the
    `extra` records not shown as tables, to --json / --csv once."""
    from ..records import format_table
    cli.write_outputs([r for _, results, _ in sections for r in results] + list(extra), args, ctxs)
    for number, (title, results, columns) in enumerate(sections):
        if number:
            print()
        print(format_table(results, columns=columns, title=title))


def _dump_trace(trace):
    if trace:
        trace.dump()
        cli.note("wrote profiler trace %s (open in ui.perfetto.dev or chrome://tracing)" % trace.path)


def _warn_noisy(results):
    if any(r.metrics.get("noisy") for r in results):
        cli.note("note: some results are noisy (IQR above 10% of the median); "
                 "close other work or raise --repeat")


def add_async(sub, common):
    p = sub.add_parser(
        "async", parents=[common],
        help="asynchronous execution: queued vs finished, blocking calls, sync vs async loops",
        description="The chapter's asynchronous-execution experiments on the first context of --ctx: "
                    "(1) how long y = nd.dot(x, x).sum() takes to be queued versus to finish; "
                    "(2) which calls block (wait_to_read, waitall, asnumpy, asscalar, print): each is timed "
                    "with the work it leaves behind, and checked against an input held back by a gate "
                    "(a custom operator that waits until released); (3) a loop of y = x + 1 that waits on every "
                    "result versus one that waits once, over a sweep of sizes, with the crossover size "
                    "where async stops paying and the chapter's model N(t1+t2+t3) vs t1+N*t2+t3 solved "
                    "for the front-end cost t1, back-end cost t2 and return cost t3 per iteration.")
    p.add_argument("--demo-size", type=cli.positive_int, default=2000,
                   help="n of the n x n matrix in parts 1 and 2 (default: %(default)s, as in the chapter)")
    p.add_argument("--sizes", type=positive_int_list, default=[10, 32, 100, 316, 1000, 2000],
                   help="comma-separated n of the n x n tensors swept in part 3 (default: 10,32,100,316,1000,2000)")
    p.add_argument("--iterations", type=cli.positive_int, default=None,
                   help="loop iterations per timed loop in part 3 (default: as many as make a synchronous "
                        "loop last about 0.15 s, between 20 and 1000)")
    p.add_argument("--op", choices=["add", "dot"], default="add",
                   help="the loop's operator in part 3: add (y = x + 1, the chapter's) or dot "
                        "(y = nd.dot(x, x)) (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=5,
                   help="timed repeats of each measurement, interleaved (default: %(default)s)")
    _add_trace(p)
    p.set_defaults(run=run_async)


def run_async(args):
    from ..experiments.asynchronous import blocking_calls, queue_vs_finish, sync_vs_async
    from ..measure.trace import Trace
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    ctx, trace = ctxs[0], Trace(args.trace)
    if ctx.device_type == "cpu":  # x, x times x, and its copy in host memory; n x n float32 each
        n = max([args.demo_size] + list(args.sizes))
        cli.check_memory(3 * 4 * n * n, "an n x n product at n = %d" % n)
    with cli.progress_bar(2 * args.repeat * len(args.sizes), "async") as bar:
        demo = queue_vs_finish(ctx, args.demo_size, args.repeat, trace)
        calls = blocking_calls(ctx, args.demo_size, args.repeat, trace)
        sweep = sync_vs_async(ctx, args.sizes, args.repeat, args.iterations, args.op, trace=trace,
                              progress=bar.update)
    rows, cross = sweep[:-1], sweep[-1]
    _emit_sections([
        ("y = nd.dot(x, x).sum() with x %dx%d on %s: queued vs finished (median of %d)"
         % (args.demo_size, args.demo_size, ctx, args.repeat), demo,
         ["name", "median_s", "iqr_s", "ratio_to_queued"]),
        ("which calls block: queue y = nd.dot(x, x) and make the call (median_s), then time "
         "nd.waitall() (left_s); blocks: does the call wait while y's input is held back", calls,
         ["name", "median_s", "left_s", "blocks"]),
        ("%s per iteration on %s: wait_to_read() every iteration (sync) vs waitall() once "
         "(async); t1 front end, t2 back end, t3 return, per iteration" % (cross.metrics["op"], ctx), rows,
         ["name", "iterations", "sync_s", "async_s", "speedup", "speedup_ci_low", "speedup_ci_high", "verdict",
          "t1_s", "t2_s", "t3_s", "t2_plus_t3_s", "bound", "model_fits", "noisy"]),
    ], args, ctxs[:1], extra=[cross])
    print()
    m = cross.metrics
    if m["backend_bound_from"] is None:
        print("front end vs back end: the Python front end set the async loop's pace at every size swept")
    else:
        print("front end vs back end: from %dx%d up the operator (t2), not Python (t1), sets the async "
              "loop's pace" % (m["backend_bound_from"], m["backend_bound_from"]))
    if m["size"] is None:
        print("crossover: async still gains %d%% or more at the largest size swept"
              % (100 * m["gain_below"]))
    else:
        print("crossover: from %dx%d up, async gains less than %d%%" % (m["size"], m["size"], 100 * m["gain_below"]))
    _dump_trace(trace)
    _warn_noisy(rows)
    return 0


def add_memory(sub, common):
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
    p.add_argument("--every", type=positive_int_list, default=[1, 5, 25],
                   help="comma-separated k: sync every k batches, one variant each; a no-sync variant is "
                        "always added (default: 1,5,25)")
    p.add_argument("--batch-size", type=cli.positive_int, default=1024, help="samples per batch (default: %(default)s)")
    p.add_argument("--features", type=cli.positive_int, default=512, help="input features (default: %(default)s)")
    p.add_argument("--data", choices=["host", "engine"], default="host",
                   help="host: batches made in host memory and copied in, as a data loader does, so a batch "
                        "takes memory as soon as it is produced (default); engine: made by nd.random.normal "
                        "as in the book, which takes no memory until the engine runs it")
    p.add_argument("--plot", metavar="PNG", help="also draw the memory/time trade-off to this PNG file")
    _add_trace(p, "each variant's training loop (its process's trace merged into one file; times then "
                  "include the profiler's small overhead)")
    p.set_defaults(run=run_memory)


def run_memory(args):
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


def _add_device_sizes(p, repeat):
    p.add_argument("--cpu-size", type=cli.positive_int, default=1000,
                   help="n of the n x n matrix on a CPU context (default: %(default)s)")
    p.add_argument("--gpu-size", type=cli.positive_int, default=6000,
                   help="n of the n x n matrix on a GPU context (default: %(default)s, as in the chapter)")
    p.add_argument("--products", type=cli.positive_int, default=10,
                   help="matrix products per run (default: %(default)s, as in the chapter)")
    p.add_argument("--repeat", type=cli.positive_int, default=repeat,
                   help="timed repeats of each variant, interleaved (default: %(default)s)")
    _add_trace(p)


def _pair_used(args, pick):
    from ..experiments import auto_parallel
    return list(getattr(auto_parallel, pick)(cli.contexts(args)))


def _stand_in_note(stand_in):
    return " [no GPU: two CPU contexts stand in for two devices; they share the same cores]" if stand_in else ""


def add_parallel(sub, common):
    p = sub.add_parser(
        "parallel", parents=[common],
        help="CPU and GPU at once: 10 matrix products on each alone, then both queued together",
        description="The chapter's 10 matrix products on two devices: each alone, then both queued "
                    "together with no sync in between; reports the concurrency gain (t_a + t_b) / t_both. "
                    "Devices: the first two of --ctx; a single GPU is paired with cpu0 (the book's CPU + GPU); "
                    "a single CPU context with the next one (cpu0 and cpu1 have separate engine workers), "
                    "labelled as a stand-in.")
    _add_device_sizes(p, repeat=7)
    p.set_defaults(run=run_parallel, contexts_used=lambda args: _pair_used(args, "pick_pair"))


def run_parallel(args):
    from ..experiments.auto_parallel import concurrency, pick_pair, size_for
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
                              args.products, args.repeat, trace=trace, progress=bar.update)
    columns = ["name", "median_s", "iqr_s", "noisy", "gain", "gain_ci_low", "gain_ci_high", "verdict"]
    if not results[0].metrics["stand_in"]:
        columns += [k for k in results[-1].metrics if k.startswith("device_peak_bytes")]
    cli.emit(results, args, [a, b], columns=columns,
             title="%d products of x with itself on %s (%s) and %s (%s), median of %d%s"
                   % (args.products, a, "x %dx%d" % ((results[0].metrics["size_a"],) * 2), b,
                      "x %dx%d" % ((results[0].metrics["size_b"],) * 2), args.repeat,
                      _stand_in_note(results[0].metrics["stand_in"])))
    _dump_trace(trace)
    _warn_noisy(results)
    return 0


def add_overlap(sub, common):
    p = sub.add_parser(
        "overlap", parents=[common],
        help="computation and communication: compute, copy, then both pipelined",
        description="Compute 10 matrix products on a device, copy the results to another, then both "
                    "pipelined (copy y[i-1] while y[i] computes); reports the time hidden, "
                    "t_compute + t_copy - t_both, and the overlap: that divided by min(t_compute, t_copy). "
                    "Devices: the first two of --ctx (compute, destination); a single GPU copies to cpu0 "
                    "(the book); a single CPU context copies to the next CPU context, labelled as a stand-in.")
    _add_device_sizes(p, repeat=30)
    p.add_argument("--inner", type=cli.positive_int, default=None,
                   help="compute each y as x (n x K) times w (K x n) instead of x times x: the same bytes "
                        "to copy for K/n of the work (default: the book's x times x on a GPU, K=16 on a CPU, "
                        "where a full product dwarfs the copy of its result)")
    p.set_defaults(run=run_overlap, contexts_used=lambda args: _pair_used(args, "pick_source_and_destination"))


def run_overlap(args):
    from ..experiments.auto_parallel import overlap, pick_source_and_destination, size_for
    from ..measure.trace import Trace
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    src, dest = pick_source_and_destination(ctxs)
    size = size_for(src, args.cpu_size, args.gpu_size)
    inner = args.inner or (None if src.device_type == "gpu" else min(16, size))
    if src.device_type == "cpu":  # the products on the source, their copies on the destination
        k = inner or size
        cli.check_memory(4 * (2 * size * k + 2 * args.products * size * size),
                         "--products %d of %d x %d on the source and their copies" % (args.products, size, size))
    trace = Trace(args.trace)
    with cli.progress_bar(3 * args.repeat, "overlap") as bar:
        results = overlap(src, dest, size, args.products, args.repeat, inner=inner, trace=trace,
                          progress=bar.update)
    columns = ["name", "median_s", "iqr_s", "noisy", "minor_faults", "gain", "gain_ci_low", "gain_ci_high",
               "verdict", "hidden_s", "overlap", "overlap_lost_in_noise"]
    if not results[0].metrics["stand_in"]:
        columns += [k for k in results[-1].metrics if k.startswith("device_peak_bytes")]
    cli.emit(results, args, [src, dest], columns=columns,
             title="%d products %s on %s, copied to %s (%.1f MiB), median of %d%s"
                   % (args.products, "x times x, x %dx%d" % (size, size) if not inner or inner == size
                      else "x (%dx%d) times w (%dx%d)" % (size, inner, inner, size),
                      src, dest, results[0].metrics["copy_bytes"] / 2 ** 20,
                      args.repeat, _stand_in_note(results[0].metrics["stand_in"])))
    extra_faults = results[-1].metrics["extra_faults"]
    if extra_faults is not None and extra_faults > FAULTS_WORTH_A_NOTE:
        cli.note("note: the pipelined run took %d more page faults per repeat than compute and copy apart "
                 "(%.0f MiB faulted in again): the allocator gave freed arrays back to the system, a cost "
                 "that is not overlap (gluonperf avoids it unless MALLOC_*, GLIBC_TUNABLES or LD_PRELOAD choose the "
                 "allocator: see the README's bench overlap)" % (extra_faults, extra_faults * 4096 / 2 ** 20))
    if results[-1].metrics["overlap_lost_in_noise"]:
        cli.note("note: the runs' spread is larger than half the shorter of compute and copy, so the "
                 "overlap ratio is noise; raise --repeat, or balance them with --inner")
    _dump_trace(trace)
    _warn_noisy(results)
    return 0


# --- footprint: the memory of a training step ---------------------------------------

def non_negative_int_list(text):
    items = [t.strip() for t in text.split(",")]
    if not items or not all(items):
        raise argparse.ArgumentTypeError("%r: give whole numbers separated by commas, e.g. 0,2,4" % text)
    return [cli.non_negative_int(t) for t in items]


def _hybridize_list(text):
    from ..config import HYBRIDIZE
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in HYBRIDIZE]
    if bad or not items:
        raise argparse.ArgumentTypeError("%r: choose from %s, comma-separated" % (text, ",".join(HYBRIDIZE)))
    return list(dict.fromkeys(items))


def add_footprint(sub, common):
    from ..config import OPTIMIZERS
    p = sub.add_parser(
        "footprint", parents=[common],
        help="the memory of a training step per batch size, hybridize setting and checkpointing; "
             "the largest batch that fits a budget",
        description="Where a training step's memory goes and what each setting costs. Every (hybridize, "
                    "checkpoint segments, batch size) runs in a fresh process: build the model, gradients and "
                    "optimizer (--optimizer), one warm-up step, then --steps timed training steps while a "
                    "background thread samples RSS (device memory on GPU contexts). Reports the model's bytes "
                    "(parameters + gradients + optimizer states, counted from the arrays), the peak during the "
                    "steps above them (activations, workspace, cached graphs), that per sample, what the step "
                    "needs in all, the step time and images/s. With --budget: per configuration the largest "
                    "batch whose needs fit, extrapolated from the measured slope and confirmed by a run. "
                    "--checkpoint N cuts the model into N segments and recomputes their activations in the "
                    "backward (gradient checkpointing; train with it: python -m gluonperf.train "
                    "--checkpoint-segments N). Times come from separate processes, one after the other: on a "
                    "shared machine trust the memory figures more than the times.")
    p.add_argument("--model", default="resnet18", help="model name (default: %(default)s; see "
                                                         "python -m gluonperf.train --list-models)")
    p.add_argument("--batch-sizes", type=positive_int_list, default=[32, 64, 128, 256],
                   help="comma-separated global batch sizes, split over --ctx (default: 32,64,128,256)")
    p.add_argument("--hybridize", type=_hybridize_list, default=["none", "hybrid", "static"],
                   help="comma-separated settings: none (imperative), hybrid (hybridize()), static "
                        "(hybridize(static_alloc=True, static_shape=True)) (default: none,hybrid,static)")
    p.add_argument("--checkpoint", type=non_negative_int_list, default=[0], metavar="N[,N...]",
                   help="comma-separated numbers of checkpoint segments, 0 for none (default: 0). With "
                        "checkpointing, static runs as hybrid: static buffers would keep every segment's "
                        "recomputed activations")
    p.add_argument("--budget", type=units.size_bytes, action="append", metavar="SIZE",
                   help="memory budget for the step (model + peak above it), e.g. 2G or 512M; report the "
                        "largest batch that fits it per configuration (repeatable)")
    p.add_argument("--steps", type=cli.positive_int, default=5, help="timed steps per run (default: %(default)s)")
    p.add_argument("--warmup", type=cli.positive_int, default=1,
                   help="untimed steps before them (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=1,
                   help="fresh processes per run; the table then shows the median peak and its min and max "
                        "(glibc's malloc makes the same run's peak RSS differ from process to process) "
                        "(default: %(default)s)")
    p.add_argument("--seed", type=cli.non_negative_int, default=0, help="seed of weights and data (default: %(default)s)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="bfloat16: the step as python -m gluonperf.train --dtype bfloat16 runs it (mixed "
                        "precision; CPU contexts; not with --checkpoint) (default: %(default)s)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                   help="the optimizer whose state the model's bytes count: sgd and nag (momentum: one array "
                        "per weight), adagrad and rmsprop (one), adam and adamw (two) (default: %(default)s)")
    p.add_argument("--plot", metavar="PNG",
                   help="also draw memory and images/s against the batch size, one line per configuration")
    p.set_defaults(run=run_footprint)


FOOTPRINT_COLUMNS = ["name", "batch_size", "model_bytes", "peak_above_bytes", "bytes_per_sample", "needs_bytes",
                     "median_s", "iqr_s", "images_per_s", "peak_vs_plain", "time_vs_plain"]
BUDGET_COLUMNS = ["name", "budget_bytes", "predicted_batch", "largest_batch", "fits", "needs_bytes", "images_per_s",
                  "over_batch", "confirm_runs"]


def run_footprint(args):
    from ..experiments.footprint import check_dtype, effective_configs, footprint, rows_of
    from ..render.plots import plot_footprint
    from ..runtime.precision import precision_label
    from ..training.models import get_model
    get_model(args.model)  # unknown names fail here, before any work
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    cli.check_output_path(args.plot, "--plot")
    budgets = sorted(set(args.budget or []))
    check_dtype(args.dtype, ctxs, args.checkpoint)  # before any note about it
    configs = effective_configs(args.hybridize, args.checkpoint)
    if "static" in args.hybridize and any(args.checkpoint):
        cli.note("note: with checkpointing, static runs as hybrid (segments are never statically allocated)")
    if getattr(args, "dtype_note", None) and args.dtype == "bfloat16":
        cli.note("note: " + args.dtype_note)
    runs = {}  # what a stopped run keeps: the runs it finished
    with cli.progress_bar(len(configs) * (len(args.batch_sizes) + len(budgets)) * args.repeat, "footprint") as bar, \
            cli.keep_on_stop(lambda: rows_of(dict(runs), configs), args, "%s training step on %s: the runs that "
                             "finished" % (args.model, ",".join(map(str, ctxs))), FOOTPRINT_COLUMNS, ctxs):
        rows = footprint(args.model, args.batch_sizes, ctxs, args.hybridize, args.checkpoint, steps=args.steps,
                         warmup=args.warmup, budgets=budgets, seed=args.seed, repeat=args.repeat,
                         progress=bar.update, dtype=args.dtype, runs=runs, optimizer=args.optimizer)
    results = [r for r in rows if r.bench == "footprint"]
    budget_rows = [r for r in rows if r.bench == "footprint-budget"]
    memory = "device memory" if any(c.device_type == "gpu" for c in ctxs) else "RSS"
    columns = list(FOOTPRINT_COLUMNS)
    if args.repeat > 1:
        columns[4:4] = ["peak_above_min_bytes", "peak_above_max_bytes"]
    if any("error" in r.metrics for r in results):
        columns.append("error")
    sections = [("%s training step on %s (%s%s): %s, %d warm-up + %d timed steps; "
                 "model = parameters + gradients + optimizer states; peak above = peak %s during the steps above "
                 "the model%s; needs = model + peak above"
                 % (args.model, ",".join(map(str, ctxs)),
                    "sgd, momentum" if args.optimizer == "sgd" else args.optimizer, precision_label(args.dtype), "one fresh process per run" if args.repeat == 1 else
                    "%d fresh processes per run" % args.repeat, args.warmup, args.steps, memory,
                    " (median over the processes)" if args.repeat > 1 else ""), results, columns)]
    if budget_rows:
        bcolumns = list(BUDGET_COLUMNS)
        if any("error" in r.metrics for r in budget_rows):
            bcolumns.append("error")
        sections.append(("largest batch whose needs fit the budget: predicted from the measured slope, confirmed "
                         "and refined by runs; over_batch: the smallest batch that ran over it", budget_rows,
                         bcolumns))
    _emit_sections(sections, args, ctxs)
    if args.plot:
        plot_footprint(results + budget_rows, args.plot)
        cli.note("wrote plot %s" % args.plot)
    return 0


def add_optimizers(sub, common):
    from ..config import UPDATE_OPTIMIZERS  # no MXNet: --help answers at once
    p = sub.add_parser(
        "optimizers", parents=[common],
        help="what an optimizer's update costs: from-scratch NDArray updates vs MXNet's fused operators",
        description="Per optimizer (sgd with momentum, adagrad, rmsprop, adam), on --model's parameters and "
                    "gradients on the first context of --ctx: the update's time per step and its share of a "
                    "training step (forward-backward + update), and the optimizer state's bytes, for the "
                    "from-scratch NDArray update of the book's optimization chapter, MXNet's fused "
                    "per-parameter operator and its multi-tensor operator where one exists, all timed in one "
                    "interleaved run with a forward-backward step; each against the from-scratch one with its "
                    "95% interval over the repeats. Before timing, "
                    "all implementations run a few updates from the same weights and must agree to float32 "
                    "tolerance (max_abs_diff). No weight decay, epsilon 1e-6 (the book's).")
    p.add_argument("--model", default="lenet", help="model whose parameters are updated (default: %(default)s; "
                                                   "resnet18 for a real network)")
    p.add_argument("--optimizers", default=",".join(UPDATE_OPTIMIZERS),
                   help="comma-separated, from %s (default: all)" % ",".join(UPDATE_OPTIMIZERS))
    p.add_argument("--batch-size", type=cli.positive_int, default=64,
                   help="batch of the forward-backward step the update's share is of (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=10,
                   help="interleaved repeats; the intervals are over these (default: %(default)s)")
    p.add_argument("--steps", type=cli.positive_int, default=10,
                   help="updates (and steps) per timed repeat (default: %(default)s)")
    p.set_defaults(run=run_optimizers)


OPTIMIZER_COLUMNS = ["name", "operator", "update_s", "share_of_step", "speedup", "speedup_ci_low",
                     "speedup_ci_high", "speedup_n", "verdict", "state_bytes", "max_abs_diff", "noisy"]


def run_optimizers(args):
    from .. import UserError
    from ..training.models import get_model
    from ..experiments.optimizer_cost import OPTIMIZERS, optimizer_cost
    ctxs = cli.contexts(args)
    names = [n.strip() for n in args.optimizers.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown or not names:
        raise UserError("--optimizers %r: choose from %s, comma-separated" % (args.optimizers, ",".join(OPTIMIZERS)))
    get_model(args.model)  # an unknown name fails here, in one line
    cli.check_outputs(args)
    ways = sum(3 if n in ("sgd", "adam") else 2 for n in names) + 1
    with cli.progress_bar(args.repeat * ways, "optimizers") as bar:
        results = optimizer_cost(args.model, ctxs[0], args.batch_size, names, args.repeat, args.steps,
                                 progress=bar.update)
    step = results[0].metrics
    cli.emit(results[1:], args, ctxs[:1], columns=OPTIMIZER_COLUMNS, records=results,
             title="optimizer updates on %s's %d parameters (%d bytes) on %s: median of %d interleaved repeats "
                   "of %d steps; forward-backward at batch %d: %.4g s; speedup over the from-scratch update "
                   "(95%% CI, n repeats)" % (args.model, step["parameters"], step["param_bytes"], ctxs[0],
                                              args.repeat, args.steps, args.batch_size, step["median_s"]))
    _warn_noisy(results)
    return 0


# --- input: the input pipeline alone (gluonperf.experiments.input_pipeline) -----------------------------

def add_input(sub, common):
    p = sub.add_parser(
        "input", parents=[common],
        help="the input pipeline alone: images/s of loading, decoding and augmenting real images, by source and "
             "workers, per stage, against the training step",
        description="The input pipeline of --dataset PATH (a folder of class subfolders, or a .rec with its .idx) "
                    "for --model's input size, with GluonCV's ImageNet training transforms: images/s of each "
                    "source (folder or .rec through a DataLoader with --workers processes; a .rec through MXNet's "
                    "ImageRecordIter with --workers preprocess threads) with its 95% interval over --repeat "
                    "repeats, the peak memory of the process and its workers (PSS); the cost of each stage (read, decode, "
                    "augment, batchify, copy to the context) timed on its own over a sample of images; and the "
                    "training step's own consumption rate on the first context of --ctx (a batch of the same "
                    "shape held in memory), which each loader's rate is set against (keeps up / too slow, a Welch "
                    "interval: they ran apart). On CPU contexts the loader measured alone has the cores to itself; "
                    "while training it shares them (python -m gluonperf.profile --dataset PATH --input-only "
                    "measures that).")
    p.add_argument("--dataset", required=True, metavar="PATH",
                   help="a folder with one subfolder per class (or train/ and val/ of them), or a .rec with its .idx "
                        "(python -m gluonperf.dataset make DIR --rec writes both)")
    p.add_argument("--model", default="resnet18_v1",
                   help="whose input size the images are cropped to and whose step they are set against "
                        "(default: %(default)s, 224x224)")
    p.add_argument("--batch-size", type=cli.positive_int, default=32, help="images per batch (default: %(default)s)")
    p.add_argument("--workers", type=_workers_list, default=[0, 1, 2], metavar="N[,N...]",
                   help="comma-separated numbers of DataLoader worker processes (ImageRecordIter: preprocess threads, "
                        "at least 1) (default: 0,1,2)")
    p.add_argument("--sources", default=None, metavar="S[,S...]",
                   help="folder (a folder), rec and recorditer (a .rec) (default: every source that reads --dataset)")
    p.add_argument("--repeat", type=cli.positive_int, default=5,
                   help="timed repeats per source and workers, and of each stage; the intervals are over these "
                        "(default: %(default)s)")
    p.add_argument("--batches", type=cli.positive_int, default=4, help="batches per timed repeat (default: %(default)s)")
    p.add_argument("--sample", type=cli.positive_int, default=16,
                   help="images the per-stage costs are timed on (default: %(default)s)")
    cli.add_threshold(p)
    p.set_defaults(run=run_input)


def _workers_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = [-1]
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError("%r is not a list of worker counts, comma-separated (e.g. 0,1,2)" % text)
    return list(dict.fromkeys(values))


INPUT_COLUMNS = ["name", "loader", "images_per_s", "images_per_s_ci_low", "images_per_s_ci_high", "images_per_s_n",
                 "memory_peak_bytes", "vs_step", "vs_step_ci_low", "vs_step_ci_high", "verdict"]
STAGE_COLUMNS = ["name", "per_image_s", "images_per_s", "images_per_s_ci_low", "images_per_s_ci_high",
                 "images_per_s_n"]


def run_input(args):
    from .. import UserError
    from ..training.data import check_available
    from ..experiments.input_pipeline import SOURCES, bench_input, sources_of
    from ..training.image_data import is_path
    if not is_path(args.dataset):
        raise UserError("--dataset %s is held in memory, with no loader to measure; give the PATH of a folder of class "
                        "subfolders or of a .rec (python -m gluonperf.dataset make DIR --rec makes both)" % args.dataset)
    ctxs = cli.contexts(args)
    check_available(args.dataset, None, args.model)  # one line for bad data, before any work
    sources = sources_of(args.dataset)
    if args.sources:
        asked = [v.strip() for v in args.sources.split(",") if v.strip()]
        bad = [v for v in asked if v not in SOURCES or v not in sources]
        if bad or not asked:
            raise UserError("--sources %s: --dataset %s is read by %s" % (args.sources, args.dataset, ",".join(sources)))
        sources = asked
    cli.check_outputs(args)
    runs = sum(len([w for w in args.workers if w or s != "recorditer"]) for s in sources)
    with cli.progress_bar(args.repeat * (1 + runs + len([s for s in sources if s != "recorditer"])), "input") as bar:
        results = bench_input(args.dataset, args.model, ctxs[0], args.batch_size, args.workers, sources, args.repeat,
                              args.batches, args.sample, threshold=args.threshold, progress=bar.update)
    step = next(r for r in results if r.bench == "input-step").metrics
    loaders = [r for r in results if r.bench == "input"]
    stages = [r for r in results if r.bench == "input-stage"]
    sections = [
        ("input pipeline of %s at %dx%d (%s's input), batch %d: images/s of each loader alone (geometric mean of %d "
         "repeats of %d batches, 95%% interval), peak memory (PSS) of the process and its workers; vs_step: the loader's rate "
         "over the training step's, %.4g images/s on %s (95%% CI %.4g-%.4g, %d repeats; a batch in memory)"
         % (args.dataset, step["image_size"], step["image_size"], args.model, args.batch_size, args.repeat,
            args.batches, step["images_per_s"], step["context"], step["images_per_s_ci_low"],
            step["images_per_s_ci_high"], step["images_per_s_n"]), loaders, INPUT_COLUMNS),
        ("per-stage cost in the main process, each stage timed on its own over %d images, %d repeats (95%% interval); "
         "images_per_s: what one core reaches on that stage alone (after a warm-up pass)" % (args.sample, args.repeat), stages,
         STAGE_COLUMNS)]
    _emit_sections(sections, args, ctxs[:1], extra=[r for r in results if r.bench == "input-step"])
    if all(c.device_type == "cpu" for c in ctxs):
        cli.note("note: each loader was measured alone, with the CPU cores to itself; while training on CPU "
                 "contexts it shares them with the step: python -m gluonperf.profile --dataset %s --input-only "
                 "measures the share of the step spent waiting" % args.dataset)
    return 0


TTA_FLAGS = ("model", "hybridize", "dataset", "data_dir", "limit", "batch_size", "epochs", "wd", "warmup_epochs",
             "lr_decay")


def add_time_to_accuracy(sub, common):
    from ..config import OPTIMIZERS
    from ..cli.training_flags import add_training_flags, fraction
    p = sub.add_parser(
        "time-to-accuracy", parents=[common],
        help="time to a test accuracy per optimizer, over seeds (DAWNBench's metric)",
        description="Train --model once per optimizer and seed, each at its own default learning rate, until "
                    "the test top-1 reaches --target-top1 (as python -m gluonperf.train --target-top1), seed by "
                    "seed with the optimizers in a rotating order. Per optimizer: how many seeds reached the "
                    "target, the median wall time, epochs and training images to it, and the time's ratio "
                    "against the first optimizer with its 95% interval over the seeds. An optimizer cheaper per "
                    "step (bench optimizers) can be slower to an accuracy.")
    add_training_flags(p, TTA_FLAGS, defaults={"model": "lenet", "dataset": "digits", "epochs": 10})
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS),
                   help="comma-separated, the first is the ratios' baseline (default: %(default)s)")
    p.add_argument("--seeds", type=cli.positive_int, default=3,
                   help="seeds 0..N-1 of initialisation and data order per optimizer (default: %(default)s)")
    p.add_argument("--target-top1", type=fraction, default=0.9, metavar="X",
                   help="the test top-1 to reach (default: %(default)s)")
    p.set_defaults(run=run_time_to_accuracy)


TTA_COLUMNS = ["name", "reached", "median_time_to_target_s", "median_epochs_to_target", "median_images_to_target",
               "median_best_test_top1", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_n", "verdict"]


def run_time_to_accuracy(args):
    from .. import UserError
    from ..config import OPTIMIZERS, TrainConfig
    from ..training.data import check_available
    from ..training.models import get_model
    from ..experiments.time_to_accuracy import time_to_accuracy
    ctxs = cli.contexts(args)
    names = list(dict.fromkeys(n.strip() for n in args.optimizers.split(",") if n.strip()))
    if not names or any(n not in OPTIMIZERS for n in names):
        raise UserError("--optimizers %r: choose from %s, comma-separated" % (args.optimizers, ",".join(OPTIMIZERS)))
    get_model(args.model)
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the number of contexts (%d)" % (args.batch_size, len(ctxs)))
    check_available(args.dataset, args.data_dir)
    cli.check_outputs(args)
    config = TrainConfig(**{f: getattr(args, f) for f in TTA_FLAGS}, target_top1=args.target_top1, workers=0,
                         log_interval=0, kvstore="flat" if len(ctxs) > 1 else "device")
    with cli.progress_bar(len(names) * args.seeds, "time to accuracy") as bar:
        results = time_to_accuracy(config, ctxs, names, list(range(args.seeds)), progress=bar.update)
    summary = [r for r in results if r.bench == "time-to-accuracy"]
    cli.emit(summary, args, ctxs, columns=TTA_COLUMNS, records=results,
             title="time to test top-1 %g: %s on %s, batch %d on %s, up to %d epochs, %d seed(s) per optimizer at "
                   "its default learning rate; speedup: %s's time / this one's (95%% CI over the seeds)"
                   % (args.target_top1, args.model, args.dataset, args.batch_size, ",".join(map(str, ctxs)),
                      args.epochs, args.seeds, names[0]))
    return 0


COMMANDS = [add_hybridize, add_async, add_memory, add_parallel, add_overlap, add_allreduce, add_scratch,
            add_footprint, add_optimizers, add_input, add_time_to_accuracy]


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure the computational performance of MXNet Gluon code. Every timed "
                    "region ends in mx.nd.waitall(), is warmed up, repeated, and reported as a "
                    "median with its spread.")
    sub = parser.add_subparsers(dest="command", metavar="EXPERIMENT")
    sub.required = True
    common = cli.common_parser()
    add_processes(common)
    for add in COMMANDS:
        add(sub, common)
    return parser


def main(argv=None, threads_note=None, malloc_note=None, dtype_note=None):
    """The command: parse `argv`, run the subcommand. The notes say what bench/__main__.py set
    before MXNet loaded (None when called from Python, where nothing is set)."""
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if not getattr(args, "list_models", False):
        used = getattr(args, "contexts_used", cli.contexts)
        cli.advise(used(args), threads_note)
    if malloc_note:
        cli.note_later("note: " + malloc_note)
    args.dtype_note = dtype_note
    return args.run(args)

"""python -m gluonperf.bench <experiment>: a thin command line over the experiment modules.

Each subcommand parses its flags, calls one experiment function, and hands the
records to `gluonperf.cli.emit`. Nothing is computed here.
"""
import argparse

from . import cli

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
    p.add_argument("--export", metavar="DIR",
                   help="export the hybridized model (symbol JSON + params) to DIR and check that "
                        "SymbolBlock.imports gives the same outputs")
    p.set_defaults(run=run_hybridize)


def run_hybridize(args):
    from .hybridize import compare_modes
    from .models import list_models
    if args.list_models:
        for name, description in list_models().items():
            print("%-28s %s" % (name, description))
        return 0
    from .models import get_model
    get_model(args.model)  # unknown names fail here, before any work
    ctxs = cli.contexts(args)
    cli.check_outputs(args)
    number = args.number or (10 if args.train else 1000)
    with cli.progress_bar(3 * args.repeat, "hybridize") as bar:
        results = compare_modes(model=args.model, batch_size=args.batch_size, ctx=ctxs[0],
                                repeat=args.repeat, number=number, warmup=args.warmup,
                                train=args.train, export_dir=args.export, progress=bar.update)
    timed = [r for r in results if r.name != "export"]
    cli.emit(timed, args, ctxs[:1],
             title="%s %s, batch %d on %s: per-call time over %d repeats of %d calls"
                   % (args.model, "train steps" if args.train else "forward calls",
                      args.batch_size, ctxs[0], args.repeat, number),
             columns=["name", "median_s", "iqr_s", "min_s", "max_s", "noisy", "speedup",
                      "samples_per_s", "max_abs_diff", "hybrid_forward_calls", "calls"])
    for r in results:
        if r.name == "export":
            print("exported %s and %s; SymbolBlock.imports matches (max abs diff %.3g)"
                  % (r.metrics["symbol_file"], r.metrics["params_file"], r.metrics["max_abs_diff"]))
    if any(r.metrics.get("noisy") for r in timed):
        cli.note("note: some results are noisy (IQR above 10% of the median); "
                 "close other work or raise --repeat")
    return 0


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
    from .data_parallel import KVSTORES, METHODS
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
    p.add_argument("--methods", default=",".join(METHODS + KVSTORES),
                   help="comma-separated variants (default: %(default)s); the copyto ceiling always runs")
    p.add_argument("--repeat", type=cli.positive_int, default=7, help="timed repeats per variant (default: %(default)s)")
    p.add_argument("--number", type=cli.positive_int, default=None,
                   help="calls per repeat (default: enough for about 50 ms per repeat of the slowest variant)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=1,
                   help="untimed calls per variant before timing (default: %(default)s)")
    p.add_argument("--reuse-buffers", action="store_true",
                   help="let book/ring/tree keep one receive buffer per context between calls instead of "
                        "a fresh temporary per transfer (as the book does)")
    p.set_defaults(run=run_allreduce)


def run_allreduce(args):
    import mxnet as mx
    from . import UserError
    from .data_parallel import KVSTORES, METHODS, allreduce_bandwidth
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in METHODS + KVSTORES:
            raise UserError("unknown --methods item %r; choose from %s" % (m, ",".join(METHODS + KVSTORES)))
    if not methods:
        raise UserError("--methods is empty; choose from %s" % ",".join(METHODS + KVSTORES))
    if args.ctx.strip().lower() == "cpu":  # one CPU: cpu(i) contexts stand in for devices
        ctxs = [mx.cpu(i) for i in range(max(args.num_ctx or [4]))]
    else:
        ctxs = cli.contexts(args)
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
    from .data_parallel import METHODS
    p = sub.add_parser(
        "scratch", parents=[common],
        help="the book's LeNet trained data-parallel from scratch (get_params, allreduce, split_and_load)",
        description="Train the chapter's NDArray LeNet data-parallel over the contexts of --ctx with the "
                    "from-scratch helpers (get_params, split_and_load, allreduce, train_batch), on synthetic "
                    "Fashion-MNIST-shaped data (1x28x28, 10 classes, learnable class patterns plus noise). "
                    "Reports per-epoch training time (each batch ends in a sync, as in the book), images/s, "
                    "mean training loss and test accuracy (on the first context).")
    p.add_argument("--epochs", type=cli.positive_int, default=4, help="epochs (default: %(default)s)")
    p.add_argument("--batch-size", type=cli.positive_int, default=256,
                   help="global batch size, split over the contexts (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.2, help="SGD learning rate (default: %(default)s, as in the book)")
    p.add_argument("--method", default="book", help="allreduce method: %s (default: %%(default)s)" % ", ".join(METHODS))
    p.add_argument("--init-scale", type=float, default=0.1,
                   help="std of the normal initial weights (default: %(default)s; the book's 0.01 needs "
                        "hundreds of steps to leave chance level, more than the default data gives)")
    p.add_argument("--train-size", type=cli.positive_int, default=6000,
                   help="synthetic training images (default: %(default)s)")
    p.add_argument("--test-size", type=cli.positive_int, default=1000, help="synthetic test images (default: %(default)s)")
    p.add_argument("--seed", type=cli.non_negative_int, default=0, help="seed for data and weights (default: %(default)s)")
    p.set_defaults(run=run_scratch)


def run_scratch(args):
    import math
    from . import UserError
    from .data_parallel import check_method, init_params, loaders, synthetic_fashion, train
    check_method(args.method)
    ctxs = cli.contexts(args)
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the %d contexts; each needs at least one sample"
                        % (args.batch_size, len(ctxs)))
    if args.train_size < args.batch_size:
        raise UserError("--train-size %d is smaller than --batch-size %d" % (args.train_size, args.batch_size))
    if not (args.lr > 0 and math.isfinite(args.lr)) or not (args.init_scale > 0 and math.isfinite(args.init_scale)):
        raise UserError("--lr and --init-scale must be positive numbers")
    cli.check_outputs(args)
    train_set, test_set = synthetic_fashion(args.train_size, args.test_size, seed=args.seed)
    train_iter, test_iter = loaders(train_set, test_set, args.batch_size, len(ctxs), seed=args.seed)
    with cli.progress_bar(args.epochs * len(train_iter), "scratch") as bar:
        results = train(ctxs, train_iter, test_iter, epochs=args.epochs, lr=args.lr, method=args.method,
                        params=init_params(scale=args.init_scale, seed=args.seed), progress=bar.update)
    cli.emit(results, args, ctxs,
             title="LeNet from scratch on %s, synthetic Fashion-MNIST-shaped data (%d train / %d test), "
                   "batch %d, lr %g, allreduce %s"
                   % (",".join(map(str, ctxs)), args.train_size, args.test_size, args.batch_size, args.lr, args.method),
             columns=["epoch", "time_s", "images_per_s", "train_loss", "test_acc"])
    return 0


COMMANDS = [add_hybridize, add_allreduce, add_scratch]


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure the computational performance of MXNet Gluon code. Every timed "
                    "region ends in mx.nd.waitall(), is warmed up, repeated, and reported as a "
                    "median with its spread.")
    sub = parser.add_subparsers(dest="command", metavar="EXPERIMENT")
    sub.required = True
    common = cli.common_parser()
    for add in COMMANDS:
        add(sub, common)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    cli.run(main, PROG)

"""python -m gluonperf.bench allreduce: the bandwidth of summing one tensor over k contexts."""
import argparse

from ..cli import common as cli
from ..cli import units
from . import shared

NAME = "allreduce"
# (Horovod's method is left out of the quick run: it starts a horovodrun job, which its own tests,
# tests/test_from_scratch.py's, run; the quick run is every in-process method)
QUICK = ["--sizes", "4K,256K", "--num-ctx", "2", "--repeat", "2", "--methods", "book,ring,tree,kv-device,kv-local"]
# CPU contexts that run at once, at least: --ctx cpu uses cpu0..cpuN-1 (contexts_at_once)
AT_LEAST_CONTEXTS = 2
# its CPU contexts stand in for devices: glibc keeps freed memory, as a GPU's pool does
STAND_IN = True
RECORDS = ("allreduce",)
TITLE = "Allreduce bandwidth"
COLUMNS = ["contexts", "size", "name", "median_s", "iqr_s", "bus_GBps", "of_ceiling", "max_recv", "noisy",
           "max_abs_err"]


def contexts_at_once(argv):
    """The CPU contexts that run at once: the most of --num-ctx (read before argparse), else 2."""
    at_least = AT_LEAST_CONTEXTS
    if "--num-ctx" in argv[:-1]:
        try:
            at_least = max(int(n) for n in argv[argv.index("--num-ctx") + 1].split(","))
        except ValueError:
            pass  # argparse reports it
    return at_least


def _size_list(text):
    """'4K,256K,4M,32M' -> bytes (K = KiB, M = MiB; a plain number is bytes)."""
    out = []
    for item in text.split(","):
        value = units.size_value(item, "KM")
        if value is None:
            raise argparse.ArgumentTypeError("%r is not a size; use e.g. 4K,256K,4M,32M" % item)
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


def add_parser(sub, common):
    from ..config import ALLREDUCE_HOROVOD, ALLREDUCE_KVSTORES, ALLREDUCE_METHODS
    p = sub.add_parser(
        "allreduce", parents=[common],
        help="allreduce bandwidth: book / ring / tree vs kvstore device / local vs Horovod vs plain copyto",
        description="Bandwidth of summing one float32 tensor over k contexts and leaving the sum on "
                    "each: the book's reduce-then-broadcast, a ring (reduce-scatter + all-gather) and a "
                    "binomial tree, side by side with MXNet's kvstore ('device' and 'local') push+pull, "
                    "Horovod's allreduce (horovod.mxnet, summing in place, in k processes, one per context, "
                    "started by horovodrun with Gloo) "
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
    every = ",".join(ALLREDUCE_METHODS + ALLREDUCE_KVSTORES + [ALLREDUCE_HOROVOD])
    p.add_argument("--methods", default=None,
                   help="comma-separated variants from %s (default: all of them, but %s only when Horovod is "
                        "installed, else a note says it was left out; bash scripts/install-horovod installs it); "
                        "the copyto ceiling always runs" % (every, ALLREDUCE_HOROVOD))
    p.add_argument("--repeat", type=cli.positive_int, default=7, help="timed repeats per variant (default: %(default)s)")
    p.add_argument("--number", type=cli.positive_int, default=None,
                   help="calls per repeat (default: enough for about 50 ms per repeat of the slowest variant; "
                        "horovod, in processes of its own, by the same rule for itself)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=1,
                   help="untimed calls per variant before timing (default: %(default)s)")
    p.add_argument("--reuse-buffers", action="store_true",
                   help="let book/ring/tree keep one receive buffer per context between calls instead of "
                        "a fresh temporary per transfer (as the book does)")
    p.set_defaults(contexts_used=allreduce_contexts)


def allreduce_contexts(args):
    """--ctx cpu (one CPU): cpu(0).. cpu(k-1) stand in for devices; else the contexts of --ctx."""
    import mxnet as mx
    if args.ctx.strip().lower() == "cpu":
        return [mx.cpu(i) for i in range(max(args.num_ctx or [4]))]
    return cli.contexts(args)


def methods_of(args):
    """The --methods list, checked; by default every method, Horovod's only when it is installed
    (a note says so when it is not). Reads no MXNet."""
    from .. import UserError
    from ..config import ALLREDUCE_HOROVOD as HOROVOD, ALLREDUCE_KVSTORES, ALLREDUCE_METHODS
    from ..runtime import horovod_launcher
    known = ALLREDUCE_METHODS + ALLREDUCE_KVSTORES + [HOROVOD]
    if args.methods is None:
        if horovod_launcher.available():
            return known
        cli.note_later("note: --methods leaves out %s: Horovod is not installed here; install it with %s"
                       % (HOROVOD, horovod_launcher.INSTALL))
        return known[:-1]
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for m in methods:
        if m not in known:
            raise UserError("unknown --methods item %r; choose from %s" % (m, ",".join(known)))
    if not methods:
        raise UserError("--methods is empty; choose from %s" % ",".join(known))
    if HOROVOD in methods:
        horovod_launcher.require("--methods %s" % HOROVOD)
    return methods


def measure(args):
    """Check the flags, time every method at every size and number of contexts: (records, the contexts)."""
    from .. import UserError
    from ..experiments.allreduce_bandwidth import allreduce_bandwidth
    from ..measure.timing import Timing
    methods = methods_of(args)
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
        timing = Timing(repeat=args.repeat, warmup=args.warmup, number=args.number, progress=bar.update)
        results = allreduce_bandwidth(ctxs, args.sizes, counts, methods, timing, reuse_buffers=args.reuse_buffers)
    return results, ctxs


def show(args, results, ctxs):
    """The terminal's table; a wrong sum is an error, after the table."""
    from .. import UserError
    from ..config import ALLREDUCE_HOROVOD
    cli.emit(results, args, ctxs,
             title="allreduce of one float32 tensor over k of %s (median of %d repeats); GB/s counts the "
                   "2(k-1)/k x size each context receives; ceiling = copyto %s -> %s%s"
                   % (",".join(map(str, ctxs)), args.repeat, ctxs[0], ctxs[1],
                      "; all cpu(i) share one memory system" if all(c.device_type == "cpu" for c in ctxs) else ""),
             columns=COLUMNS)
    bad = [r for r in results if r.metrics["max_abs_err"] > 0]
    if bad:
        raise UserError("%s gave a wrong sum (error %g)" % (bad[0].name, bad[0].metrics["max_abs_err"]))
    shared.warn_noisy(results)
    if any(r.name == ALLREDUCE_HOROVOD for r in results):
        cli.note("note: %s ran in k processes of its own, one per context (horovodrun with Gloo), before "
                 "the other variants of each k and not interleaved with them; each repeat is timed from a "
                 "barrier to its slowest rank's waitall" % ALLREDUCE_HOROVOD)
    if not args.reuse_buffers and max(args.sizes) >= 32 * 2 ** 20 and ctxs[0].device_type == "cpu":
        cli.note("note: on CPU every temporary of 32 MiB or more is freshly mapped memory (glibc malloc; "
                 "MXNet does not pool CPU memory), so methods that receive whole tensors pay for it; "
                 "compare with --reuse-buffers")


def section(records):
    """The report's block: bus GB/s per method against the size, one plot per number of contexts."""
    from ..render.figures import figure, svg
    from ..render.kinds import Block, Table, noisy_note, percent
    counts = sorted({r.metrics["contexts"] for r in records})
    sizes = sorted({r.metrics["tensor_bytes"] for r in records})
    methods = list(dict.fromkeys(r.name for r in records))
    labels = {r.metrics["tensor_bytes"]: r.metrics["size"] for r in records}
    fig, ax = figure(1, len(counts), width=min(4.0 * len(counts) + 1, 11), height=3.2, sharey=True)
    parts = []
    for a, k in zip(ax[0], counts):
        rows = [r for r in records if r.metrics["contexts"] == k]
        for method in methods:
            pts = sorted((r.metrics["tensor_bytes"], r.metrics["bus_GBps"]) for r in rows if r.name == method)
            if pts:
                ceiling = method == "copyto"
                a.plot([p[0] for p in pts], [p[1] for p in pts], "o--" if ceiling else "o-",
                       label=method + (" (ceiling)" if ceiling else ""))
        a.set_xscale("log", base=2)
        a.set_xticks(sizes)
        a.set_xticklabels([labels[s] for s in sizes])
        a.set_title("%d contexts" % k, fontsize=10)
        a.set_xlabel("tensor size")
        a.grid(True, alpha=0.3)
        largest = [r for r in rows if r.metrics["tensor_bytes"] == max(sizes) and r.name != "copyto"]
        if largest:
            best = max(largest, key=lambda r: r.metrics["bus_GBps"])
            parts.append("%s over %d: %s is fastest, %.3g GB/s = %s of the copyto ceiling"
                         % (best.metrics["size"], k, best.name, best.metrics["bus_GBps"],
                            percent(best.metrics.get("of_ceiling"))))
    ax[0][0].set_ylabel("bus GB/s (2(k-1)/k x size per context)")
    ax[0][-1].legend(fontsize=8)
    return Block("allreduce of one float32 tensor over %s contexts" % ",".join(map(str, counts)),
                 [Table(records, COLUMNS)], svg(fig), "; ".join(parts) + noisy_note(records))

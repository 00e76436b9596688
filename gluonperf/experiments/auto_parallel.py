"""Automatic parallelism (the chapter's section 8.3): two devices at once, and computation
overlapping with communication.

MXNet's engine runs each device's work on its own worker threads, so work queued for two
devices without a sync in between can run at the same time, and a copy of `y[i-1]` can
run while `y[i]` is computed. Without a GPU, `cpu(0)` and `cpu(1)` stand in for the two
devices: they have separate engine workers but share the same cores, and every result
says which devices it ran on (`devices`, `stand_in`).

Every function takes contexts and sizes and returns a list of `Result`; the same code
runs on `mx.gpu(i)` contexts. With a `Trace`, each variant runs once more, untimed, inside
the trace.
"""
import statistics

import mxnet as mx
from mxnet import nd

from ..measure.harness import Benchmark, measure_interleaved
from ..runtime.blas import check_concurrent_products, dense
from ..measure.trace import Trace
from ..records import result
from ..measure import stats
from ..measure.timing import Timing

_NO_TRACE = Trace(None)


def run(x, n=10, w=None):
    """The chapter's workload: `n` matrix products of `x` with itself (or with `w`).

    The chapter's `nd.dot` would hang here on two CPU contexts at once (MXNet's bundled
    OpenBLAS, see gluonperf.runtime.blas); FullyConnected computes the same product on oneDNN."""
    rhs_t = nd.transpose(x if w is None else w)
    return [dense(x, rhs_t) for _ in range(n)]


def copy_to(ys, ctx):
    """The chapter's `copy_to_cpu`, for any destination context."""
    return [y.copyto(ctx) for y in ys]


def _uniform(size, ctx, cols=None):
    return nd.random.uniform(shape=(size, cols or size), ctx=ctx)


def is_stand_in(contexts):
    """True when no GPU is among `contexts`: CPU contexts are standing in for devices."""
    return not any(c.device_type == "gpu" for c in contexts)


def pick_pair(contexts):
    """Two devices for `concurrency`: the first two of `contexts`; one GPU is paired with
    cpu(0) (the book's CPU + GPU); one CPU context with the next CPU context."""
    if len(contexts) >= 2:
        return contexts[0], contexts[1]
    ctx = contexts[0]
    if ctx.device_type == "gpu":
        return mx.cpu(0), ctx
    return ctx, mx.cpu(ctx.device_id + 1)


def pick_source_and_destination(contexts):
    """Compute device and copy destination for `overlap`: given two contexts, copy from
    the first to the second; one GPU copies to cpu(0) (the book); one CPU context copies
    to the next CPU context."""
    if len(contexts) >= 2:
        return contexts[0], contexts[1]
    ctx = contexts[0]
    if ctx.device_type == "gpu":
        return ctx, mx.cpu(0)
    return ctx, mx.cpu(ctx.device_id + 1)


def size_for(ctx, cpu_size, gpu_size):
    return gpu_size if ctx.device_type == "gpu" else cpu_size


def _traced_pass(fns, trace):
    """Run each variant once more, untimed, inside the trace (a sync between variants, so
    each appears on its own in the viewer); the profiler's overhead stays out of the timings."""
    if trace:
        with trace:
            for fn in fns.values():
                fn()
                mx.nd.waitall()


def _device_peaks(fns, contexts):
    """One extra untimed pass of each variant with memory sampling; {label: summary dict}.
    Only done when a GPU is involved, where device memory is worth reporting."""
    gpus = [c for c in contexts if c.device_type == "gpu"]
    if not gpus:
        return {label: {} for label in fns}
    out = {}
    for label, fn in fns.items():
        with Benchmark(memory=True, contexts=gpus) as b:
            fn()
        out[label] = b.memory.summary()
    return out


def concurrency(ctx_a, ctx_b, size_a=1000, size_b=1000, n=10, timing=Timing(repeat=7), trace=_NO_TRACE):
    """`run` on device A alone, on device B alone, then both queued together with no sync
    in between, interleaved repeat by repeat as `timing` says. The 'both' row carries the
    concurrency gain `(t_a + t_b) / t_both` (2 = perfect overlap, 1 = none, below 1 = they got
    in each other's way)."""
    check_concurrent_products((ctx_a, ctx_b))
    xa, xb = _uniform(size_a, ctx_a), _uniform(size_b, ctx_b)
    fns = {
        "run on %s" % ctx_a: lambda: run(xa, n),
        "run on %s" % ctx_b: lambda: run(xb, n),
        "both at once": lambda: (run(xa, n), run(xb, n)),
    }
    m = measure_interleaved(fns, warmup=timing.warmup, repeat=timing.repeat, number=timing.number,
                            progress=timing.progress)
    _traced_pass(fns, trace)
    peaks = _device_peaks(fns, (ctx_a, ctx_b))
    labels = list(fns)
    t_a, t_b, t_both = (m[label].median for label in labels)
    common = {"devices": "%s+%s" % (ctx_a, ctx_b), "stand_in": is_stand_in((ctx_a, ctx_b)),
              "n": n, "size_a": size_a, "size_b": size_b}
    out = []
    for label in labels:
        extra = dict(_gain_fields(*(m[l].samples for l in labels)), gain_of_medians=(t_a + t_b) / t_both) \
            if label == "both at once" else {}
        out.append(result("parallel", label, m[label], **common, **extra, **peaks[label]))
    return out


def _gain_fields(a, b, both):
    """`gain`, (t_a + t_b) / t_both repeat by repeat (the three ran side by side), with its 95%
    interval and a verdict: 'faster' when running both at once beats one after the other."""
    gains = [(x + y) / z for x, y, z in zip(a, b, both) if z]
    interval = stats.ratio_interval(gains)
    return dict(interval.fields("gain"), **stats.verdict(interval, what="repeats").fields())


def overlap(ctx, dest, size=1000, n=10, inner=None, timing=Timing(repeat=7), trace=_NO_TRACE):
    """Compute `run` on `ctx`; copy precomputed results to `dest`; then both pipelined
    (queue `y[i]`, then the copy of `y[i-1]`), interleaved repeat by repeat as `timing` says.
    The 'both' row carries `gain`, (t_compute + t_copy) / t_both per repeat with its interval
    and verdict, `hidden_s = t_compute + t_copy - t_both` and the overlap
    `hidden_s / min(t_compute, t_copy)` (1 = the shorter one is fully hidden, 0 = none),
    from the medians, and `paired_overlap`, the median of the same ratio per repeat;
    `overlap_lost_in_noise` is True when the spread (IQR) of any variant exceeds half the
    shorter time, so that the ratio cannot be trusted; `extra_faults`, the minor page faults
    per repeat the pipelined run took beyond the two apart (None where not counted).

    Each y is a size x size product; with `inner` K it is x (size x K) times w (K x size),
    which costs K/size of the book's x times x for the same bytes to copy: on a CPU a full
    product takes so much longer than copying its result that the overlap is lost in noise.
    """
    check_concurrent_products((ctx, dest))
    if inner is None or inner == size:
        x, w = _uniform(size, ctx), None
    else:
        x, w = _uniform(size, ctx, inner), _uniform(inner, ctx, size)
    done = run(x, n, w)

    def pipelined():
        ys = []
        rhs_t = nd.transpose(x if w is None else w)
        for i in range(n):
            ys.append(dense(x, rhs_t))
            if i:
                ys[i - 1].copyto(dest)
        ys[-1].copyto(dest)

    fns = {
        "compute on %s" % ctx: lambda: run(x, n, w),
        "copy to %s" % dest: lambda: copy_to(done, dest),
        "compute and copy": pipelined,
    }
    m = measure_interleaved(fns, warmup=timing.warmup, repeat=timing.repeat, number=timing.number,
                            progress=timing.progress)
    _traced_pass(fns, trace)
    peaks = _device_peaks(fns, (ctx, dest))
    labels = list(fns)
    t_c, t_copy, t_both = (m[label].median for label in labels)
    hidden = t_c + t_copy - t_both
    paired = statistics.median((c + p - b) / min(c, p) for c, p, b in zip(*(m[label].samples for label in labels)))
    common = {"devices": "%s->%s" % (ctx, dest), "stand_in": is_stand_in((ctx, dest)),
              "n": n, "size": size, "inner": inner or size, "copy_bytes": n * size * size * 4}
    # The ratio divides by the shorter of the two: when the runs' spread is of that order,
    # the overlap is noise, whatever its value (even above 1, which cannot happen).
    unresolved = max(m[label].iqr for label in labels) > 0.5 * min(t_c, t_copy)
    # Page faults the pipelined run took beyond the two apart: the allocator had given freed
    # arrays back to the system and faulted them in again (gluonperf.runtime.allocator), a cost of its own.
    faults = [m[label].faults_per_call for label in labels]
    extra_faults = None if None in faults else faults[2] - faults[0] - faults[1]
    out = []
    for label in labels:
        extra = (dict(_gain_fields(*(m[l].samples for l in labels)),
                      hidden_s=hidden, overlap=hidden / min(t_c, t_copy), paired_overlap=paired,
                      overlap_lost_in_noise=unresolved, extra_faults=extra_faults)
                 if label == "compute and copy" else {})
        out.append(result("overlap", label, m[label], **common, **extra, **peaks[label]))
    return out

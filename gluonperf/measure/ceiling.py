"""The ceiling of this machine: peak float32 (or bfloat16) FLOP/s, measured with the thread
settings in force.

`kernels`: four compute-bound kernels, a matrix product through oneDNN (`FullyConnected`) and
through `nd.dot` (OpenBLAS: run it on ONE context only, it spins forever on two at once; left
out in bfloat16, which OpenBLAS lacks), and two 3x3 oneDNN convolutions, the deep one of ResNet's
last layers. `measure_ceiling`: each kernel's peak is its FLOPs over its FASTEST repeat (a
ceiling is what the machine does undisturbed), the median beside it; the highest is the
ceiling. `best_of` combines passes made at different times (a busy spell on a shared machine);
`physical_bound` is a generous upper limit for sanity checks. Why these kernels:
docs/commands/profile.md ("ceiling"), docs/levers.md ("The convolutions, and the distance to
the ceiling").
"""
import math

import mxnet as mx

from ..runtime.threads import omp_threads, physical_cores
from .harness import measure, sync
from ..records import result

# (matrix n for an n x n x n product, convolutions (batch, channels, height=width)) per size
SIZES = {"full": (1536, ((32, 128, 28), (128, 256, 7))), "quick": (384, ((4, 32, 14), (8, 64, 7)))}
CONVOLUTIONS = ("Convolution 3x3 (oneDNN)", "Convolution 3x3 deep (oneDNN)")
REGION_S = 0.05  # each timed repeat runs the kernel at least this long


def physical_bound(cores=None, dtype="float32"):
    """cores x 64 float32 FLOP/cycle (two AVX-512 FMA units) or 2048 bfloat16 (an AMX unit's 1024
    multiply-adds) x 5 GHz: no CPU of today exceeds it."""
    return (cores or physical_cores()) * (2048 if dtype == "bfloat16" else 64) * 5e9


def _time_kernel(fn, flops, label, repeat, progress):
    fn()  # warm-up: oneDNN builds its primitive, memory is allocated
    sync()
    once = measure(fn, label, warmup=0, repeat=1).median
    number = max(1, int(math.ceil(REGION_S / max(once, 1e-9))))
    m = measure(fn, label, warmup=0, repeat=repeat, number=number, progress=progress)
    return m, flops / m.min, flops / m.median


def kernels(ctx, size="full", dtype="float32"):
    """{name: (callable, flops per call, shape description)} of the ceiling kernels on `ctx`
    in `dtype` (float32 or bfloat16)."""
    if dtype not in ("float32", "bfloat16"):
        raise ValueError("dtype %r: use float32 or bfloat16" % (dtype,))
    n, convolutions = SIZES[size]
    if dtype == "bfloat16":
        from ..runtime.precision import check, has_amx, request_amx
        check(dtype, [ctx])  # ValueError on a CPU where oneDNN has no bfloat16 kernels
        if has_amx():
            request_amx()  # oneDNN may be allowed AMX (DNNL_MAX_CPU_ISA): without permission it dies

    def uniform(shape):
        t = mx.nd.random.uniform(shape=shape, ctx=ctx)
        if dtype == "float32":
            return t
        from mxnet.contrib.amp.amp import bfloat16
        return mx.nd.amp_cast(t, dtype=bfloat16)
    a, b = uniform((n, n)), uniform((n, n))
    matmul = 2.0 * n ** 3
    found = {
        "FullyConnected (oneDNN)": (lambda: mx.nd.FullyConnected(a, b, no_bias=True, num_hidden=n),
                                    matmul, "%dx%d . %dx%d" % (n, n, n, n)),
        "nd.dot": (lambda: mx.nd.dot(a, b), matmul, "%dx%d . %dx%d" % (n, n, n, n)),
    }
    for name, (batch, channels, hw) in zip(CONVOLUTIONS, convolutions):
        x, w = uniform((batch, channels, hw, hw)), uniform((channels, channels, 3, 3))
        found[name] = ((lambda x=x, w=w, c=channels: mx.nd.Convolution(x, w, kernel=(3, 3), pad=(1, 1),
                                                                       no_bias=True, num_filter=c)),
                       2.0 * batch * channels * hw * hw * channels * 9,
                       "%dx%dx%dx%d, %d filters" % (batch, channels, hw, hw, channels))
    if dtype == "bfloat16":
        del found["nd.dot"]
    return found


def measure_ceiling(ctx, size="full", repeat=5, progress=None, dtype="float32"):
    """Peak `dtype` FLOP/s of each kernel on `ctx` (one context: nd.dot must not run on two
    at once). Returns Results (bench='ceiling'), one per kernel, the highest marked
    `ceiling=True`: name, flops per call, gflop_per_s (fastest repeat), median_gflop_per_s."""
    out = []
    threads = omp_threads()
    for name, (fn, flops, shape) in kernels(ctx, size, dtype).items():
        m, best, median = _time_kernel(fn, flops, name, repeat, progress)
        out.append(result("ceiling", name, m, kernel=name, shape=shape, flops=flops, gflop_per_s=best / 1e9,
                          median_gflop_per_s=median / 1e9, context=str(ctx), omp_threads=threads, dtype=dtype))
    top = max(r.metrics["gflop_per_s"] for r in out)
    return [result("ceiling", r.name, **dict(r.metrics, ceiling=r.metrics["gflop_per_s"] == top)) for r in out]


def best_of(passes, labels):
    """Combine `measure_ceiling` passes made at different times (`labels`, e.g. ("before",
    "after")): per kernel the pass with the highest peak, with each pass's peak as
    `<label>_gflop_per_s`; the highest kernel is marked `ceiling=True` again."""
    out = []
    for runs in zip(*passes):
        best = max(runs, key=lambda r: r.metrics["gflop_per_s"])
        extra = {"%s_gflop_per_s" % label: r.metrics["gflop_per_s"] for label, r in zip(labels, runs)}
        out.append(result("ceiling", best.name, **dict(best.metrics, **extra)))
    top = max(r.metrics["gflop_per_s"] for r in out)
    return [result("ceiling", r.name, **dict(r.metrics, ceiling=r.metrics["gflop_per_s"] == top)) for r in out]


def ceiling_flops(results):
    """The highest peak (FLOP/s) of `measure_ceiling`'s results."""
    return max(r.metrics["gflop_per_s"] for r in results) * 1e9


def ceiling_devices(contexts, cores=None, threads=None):
    """How many times the ceiling measured on the first context a run on `contexts` has:
    every GPU is one device. CPU contexts share the same cores: the ceiling is measured on
    one of them with its OpenMP threads (`threads`, default as MXNet runs them here), so
    n CPU contexts count n times while their threads fit the cores (`cores`, default this
    machine's), and no more than the cores hold (cpu0,cpu1 with one thread each on 2 cores:
    2; with 2 threads each: 1)."""
    from ..runtime.threads import omp_threads, physical_cores
    gpus = sum(1 for c in contexts if c.device_type == "gpu")
    cpus = sum(1 for c in contexts if c.device_type == "cpu")
    if not cpus:
        return gpus
    cores = cores or physical_cores()
    threads = threads or omp_threads()
    return gpus + max(1, min(cpus, cores // max(1, threads)))

"""Matrix products that cannot hang on CPU contexts: `dense` and `matmul`.

MXNet 1.9.1's bundled OpenBLAS (0.3.13, built with OpenMP) spins for ever in `exec_blas` when two
engine threads run a multi-threaded sgemm at once (`nd.dot`, `nd.batch_dot` on two CPU contexts,
or MXNET_CPU_WORKER_NTHREADS above 1), and `nd.waitall()` never returns.
`FullyConnected` runs on oneDNN on CPU (cuBLAS on GPU): safe, and on CPU several times faster,
so experiments that multiply on several contexts at once use `dense` / `matmul` from here.
Which sizes and settings hang: docs/measuring.md, "Common to every command", and docs/levers.md,
"OpenBLAS hangs when two CPU contexts multiply at once".
"""
import os

from mxnet import nd

from .. import UserError


def dense(x, weight):
    """x (m x k) times weight (n x k) transposed: FullyConnected's product, no bias."""
    return nd.FullyConnected(x, weight, no_bias=True, num_hidden=weight.shape[0], flatten=False)


def matmul(a, b):
    """a (m x k) times b (k x n), as nd.dot(a, b), through `dense` (differentiable)."""
    return dense(a, nd.transpose(b))


def onednn_enabled(env=None):
    """True when MXNet runs FullyConnected on oneDNN (built with it and not switched off)."""
    import mxnet as mx
    env = os.environ if env is None else env
    if env.get("MXNET_MKLDNN_ENABLED", "1").strip() in ("0", "false", "False"):
        return False
    return mx.runtime.Features().is_enabled("MKLDNN")


def check_concurrent_products(contexts):
    """Refuse (UserError) a run whose products would go to the bundled OpenBLAS from
    several CPU engine threads at once with several OpenMP threads each: it hangs."""
    from .threads import omp_threads
    cpu = sum(1 for c in contexts if c.device_type == "cpu")
    workers = int(os.environ.get("MXNET_CPU_WORKER_NTHREADS", "1") or 1)
    if cpu * workers > 1 and omp_threads() > 1 and not onednn_enabled():
        raise UserError("MXNET_MKLDNN_ENABLED=0 sends matrix products to MXNet's OpenBLAS, which hangs when "
                        "%d CPU engine threads run them at once with %d OpenMP threads each; unset "
                        "MXNET_MKLDNN_ENABLED or set OMP_NUM_THREADS=1" % (cpu * workers, omp_threads()))

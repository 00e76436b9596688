"""Matrix products that cannot hang on CPU contexts.

MXNet 1.9.1's pip wheels bundle OpenBLAS 0.3.13 built with OpenMP. `nd.dot` and
`nd.batch_dot` call its sgemm; when two engine threads call a multi-threaded sgemm at
the same time (two CPU contexts working at once, or MXNET_CPU_WORKER_NTHREADS above 1)
one of them spins for ever in OpenBLAS's `exec_blas`, and `nd.waitall()` never returns.
Measured (docs/levers.md, "OpenBLAS hang"): with OMP_NUM_THREADS=2, products of
1000x1000, 256x256 and LeNet's 128x800 by 800x128 on cpu(0) and cpu(1) at once hang
every time; 64x64 (which OpenBLAS runs on one thread) and OMP_NUM_THREADS=1 do not;
OPENBLAS_NUM_THREADS does not help (the OpenMP build follows MXNet's per-operator
OpenMP setting).

`FullyConnected` runs on oneDNN on CPU (and cuBLAS on GPU) and is safe, and on CPU it is
also several times faster than the bundled OpenBLAS, so gluonperf's experiments that
run products on several contexts at once use `dense` / `matmul` from here.
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

"""The code that runs inside a Horovod rank for a validation of scaling predictions:
`horovod_exchange_rank`, under `python -m gluonperf.workers.exchange` (started by
`scaling.runs.horovod_exchange` through `gluonperf.launch --engine horovod`). It times the
exchange from inside the rank and never starts a process.
"""
import time


def _busy(cpu_s):
    """Keep this thread computing for `cpu_s` seconds of its own CPU time (longer in wall time
    when the kernel gives its core to another thread meanwhile, as it would the compute)."""
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        sum(range(1000))


def horovod_exchange_rank(shapes, compute_s, steps=20, repeats=5, warmup=3):
    """One rank's part of `scaling.runs.horovod_exchange` (under horovodrun; hvd.init here,
    hvd.shutdown at the end), a step as training takes it with a stand-in for the compute: this
    thread computes for `compute_s` seconds of CPU time (`_busy`), the first 1 - BACKWARD_SHARE of
    it the forward, then the backward, which hands one array of each shape in `shapes` to
    `hvd.allreduce_` at an even pace, the last layer's first, with the priorities Horovod's
    DistributedTrainer gives them; then it waits for the sums (`mx.nd.waitall`). Each of
    `repeats` repeats times `steps` steps after `warmup` untimed ones: `exchange_s`, the wait
    after the compute (the slowest rank's), and `helper_cpu_s`, the CPU time of this process's
    other threads (Horovod's background thread, Gloo's, MXNet's engine) while the compute ran,
    summed over the ranks, and `compute_s`, how long the compute lasted (the ranks' mean); all
    per step. Returns on rank 0 {"ranks", "exchange_s", "helper_cpu_s", "compute_s"}, each a
    list with one value per repeat; None on the other ranks."""
    import mxnet as mx

    from ..training.horovod import load
    from ..scaling.model import BACKWARD_SHARE
    hvd = load()
    hvd.init()
    try:
        grads = [mx.nd.zeros(shape) for shape in shapes]
        names = ["gluonperf.exchange.%d" % i for i in range(len(grads))]
        piece = compute_s * BACKWARD_SHARE / len(grads)

        def step():
            began, cpu, own = time.perf_counter(), time.process_time(), time.thread_time()
            _busy(compute_s * (1 - BACKWARD_SHARE))
            for i in reversed(range(len(grads))):  # backward: the last layer's gradient first
                _busy(piece)
                hvd.allreduce_(grads[i], op=hvd.Sum, name=names[i], priority=-i)
            helpers = (time.process_time() - cpu) - (time.thread_time() - own)
            start = time.perf_counter()
            mx.nd.waitall()
            return time.perf_counter() - start, helpers, start - began

        for _ in range(warmup):
            step()
        exchange, helpers, computes = [], [], []
        for _ in range(repeats):
            timed = [step() for _ in range(steps)]
            exchange.append(sum(t for t, _, _ in timed) / steps)
            helpers.append(sum(h for _, h, _ in timed) / steps)
            computes.append(sum(c for _, _, c in timed) / steps)
        every = hvd.allgather_object((exchange, helpers, computes))
        if hvd.rank() != 0:
            return None
        return dict(ranks=hvd.size(), exchange_s=[max(e[i] for e, _, _ in every) for i in range(repeats)],
                    helper_cpu_s=[sum(h[i] for _, h, _ in every) for i in range(repeats)],
                    compute_s=[sum(c[i] for _, _, c in every) / len(every) for i in range(repeats)])
    finally:
        hvd.shutdown()

"""The code that runs inside a Horovod rank of `bench allreduce --methods horovod`:
`horovod_rank`, under `python -m gluonperf.workers.allreduce` (started by
`experiments.allreduce_bandwidth.horovod_allreduce` through horovodrun). It times Horovod's allreduce
from inside the rank and never starts a process.
"""
from mxnet import nd

from ..measure.harness import Benchmark, sync
from ..experiments.allreduce_bandwidth import calls_per_repeat


def horovod_rank(contexts, sizes, repeat=5, warmup=1, number=None, target_s=0.05, progress=None):
    """One rank's part of `allreduce_bandwidth.horovod_allreduce`, in each of the processes horovodrun starts
    (hvd.init here, hvd.shutdown at the end). This rank's context is contexts[local rank]
    (`training.horovod.device_of`). For each size in bytes: the sum is checked once (rank r
    contributes r + 1 everywhere), then, as `allreduce_bandwidth` does, the number of calls
    per repeat is chosen (unless `number`; from one timed call, the slowest rank's),
    `warmup` untimed calls run, and `repeat` repeats are timed: each starts at a barrier
    (a one-element allreduce) and ends in `mx.nd.waitall()` (`Benchmark`), and its time per
    call is the slowest rank's, since the allreduce is done when every rank has the sum.
    `progress`, if given, is called on rank 0 after each repeat.

    Returns on rank 0 {"ranks", "sizes": [{tensor_bytes, elements, samples_s, number, faults
    (minor page faults per repeat, summed over the ranks), max_abs_err}]}; None on the other
    ranks."""
    from ..training.horovod import device_of, load
    hvd = load()
    hvd.init()
    try:
        rank, k = hvd.rank(), hvd.size()
        ctx = device_of(contexts, hvd.local_rank(), hvd.local_size())
        token = nd.zeros(1, ctx=ctx)

        def barrier():
            hvd.allreduce_(token, op=hvd.Sum, name="gluonperf.allreduce.barrier")
            token.wait_to_read()

        rows = []
        for nbytes in sizes:
            n = max(1, int(nbytes) // 4)
            arr = nd.zeros(n, ctx=ctx)
            name = "gluonperf.allreduce.%d" % n

            def step():
                hvd.allreduce_(arr, op=hvd.Sum, name=name)

            arr[:] = rank + 1
            step()
            err = float(nd.abs(arr - k * (k + 1) / 2).max().asscalar())
            arr[:] = 0  # timed calls sum zeros
            calls = number
            if calls is None:
                step()
                barrier()
                with Benchmark() as b:
                    step()
                calls = calls_per_repeat(max(hvd.allgather_object(b.seconds)), target_s)
            for _ in range(warmup):
                step()
            sync()
            samples, faults = [], []
            for _ in range(repeat):
                barrier()
                with Benchmark() as b:
                    for _ in range(calls):
                        step()
                samples.append(b.seconds / calls)
                faults.append(b.minor_faults)
                if progress is not None and rank == 0:
                    progress()
            every = hvd.allgather_object((samples, faults, err))
            counted = all(None not in f for _, f, _ in every)
            rows.append({"tensor_bytes": 4 * n, "elements": n, "number": calls,
                         "samples_s": [max(s[i] for s, _, _ in every) for i in range(repeat)],
                         "faults": [sum(f[i] for _, f, _ in every) for i in range(repeat)] if counted else None,
                         "max_abs_err": max(e for _, _, e in every)})
        barrier()
        return {"ranks": k, "sizes": rows} if rank == 0 else None
    finally:
        hvd.shutdown()

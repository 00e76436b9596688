"""Asynchronous execution: what queuing costs, which calls block, when async pays, and
what running ahead costs in memory (the chapter's section 8.2).

MXNet's Python front end only queues operators; C++ engine threads run them. The functions
here measure that from the outside: `queue_vs_finish` (returned against ready),
`blocking_calls` (which calls wait), `sync_vs_async` (a wait on every result against one
wait, the chapter's t1, t2, t3 solved) and `memory_cost` (a sync every k batches, each variant
in a fresh process: `run_memory_variant`). A `Trace` runs the measured code once more, untimed
(`memory_cost` traces its loops themselves): docs/commands/bench.md, "Traces".

Every function returns a list of `Result`; nothing here parses arguments or prints.
"""
import contextlib
import io
import os
import queue
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd
from mxnet.gluon import nn

from ..measure.harness import Benchmark, Measurement, measure_interleaved, sync
from ..measure.memory import MemorySampler
from ..measure.trace import Trace, merge_traces
from ..runtime import guard, transport
from ..measure import stats
from ..records import result
from ..measure.timing import Timing

_NO_TRACE = Trace(None)


def _random(shape, ctx, seed=0):
    return nd.array(np.random.RandomState(seed).uniform(size=shape).astype("float32"), ctx=ctx)


# --- queued vs finished, and which calls block ----------------------------------

def queue_vs_finish(ctx, size=2000, repeat=5, trace=_NO_TRACE):
    """The chapter's first demonstration, repeated: the time for `y = nd.dot(x, x).sum()`
    to return (queued) and then for `y` to be ready (finished).

    The 'queued' clock deliberately stops before any sync: that is what it shows.
    """
    x = _random((size, size), ctx)
    nd.dot(x, x).sum().wait_to_read()  # warm-up
    queued, finished = [], []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        y = nd.dot(x, x).sum()
        queued.append(time.perf_counter() - start)
        start = time.perf_counter()
        y.wait_to_read()
        finished.append(time.perf_counter() - start)
    with trace:  # one more, untimed, so the profiler's overhead stays out of the timings
        nd.dot(x, x).sum().wait_to_read()
    q, f = Measurement("queued", tuple(queued)), Measurement("finished", tuple(finished))
    return [
        result("async", "dot(x, x).sum() queued", q, size=size, ctx=str(ctx), blocks=False),
        result("async", "then until y is ready", f, size=size, ctx=str(ctx),
               ratio_to_queued=f.median / q.median),
    ]


def _print(y):
    print(y, file=io.StringIO())


BLOCKING_CALLS = {
    "none (queue only)": lambda y: None,
    "y.shape": lambda y: y.shape,
    "y.wait_to_read()": lambda y: y.wait_to_read(),
    "nd.waitall()": lambda y: nd.waitall(),
    "y.asnumpy()": lambda y: y.asnumpy(),
    "y.norm().asscalar()": lambda y: y.norm().asscalar(),
    "print(y)": _print,
}


# A gate: a custom operator whose forward waits until its threading.Event is set, so the
# array it produces is certainly not ready until we say so. Whether a call blocks is then
# a matter of fact (does it return while the gate is shut?), not of timing.
_GATES = {}


class _Gate(mx.operator.CustomOp):
    def __init__(self, key):
        super().__init__()
        self.key = key

    def forward(self, is_train, req, in_data, out_data, aux):
        _GATES[self.key].wait(600)
        self.assign(out_data[0], req[0], in_data[0])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        self.assign(in_grad[0], req[0], out_grad[0])


@mx.operator.register("gluonperf_gate")
class _GateProp(mx.operator.CustomOpProp):
    def __init__(self, key):
        super().__init__(need_top_grad=True)
        self.key = key

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _Gate(self.key)


def call_blocks(call, ctx, patience=1.0):
    """True when `call(y)` waits for `y` to be computed: `y = nd.dot(gate(x), x)` is held
    back by a shut gate, the call runs on a thread, and it blocks if it has not returned
    after `patience` seconds (a call that only queues returns in microseconds)."""
    key = str(len(_GATES))
    _GATES[key] = threading.Event()
    x = nd.ones((4, 4), ctx=ctx)
    y = nd.dot(nd.Custom(x, key=key, op_type="gluonperf_gate"), x)
    worker = threading.Thread(target=call, args=(y,), daemon=True)
    try:
        worker.start()
        worker.join(patience)
        return worker.is_alive()
    finally:
        _GATES[key].set()
        worker.join()
        nd.waitall()
        del _GATES[key]


def blocking_calls(ctx, size=2000, repeat=5, trace=_NO_TRACE):
    """For each call in BLOCKING_CALLS: queue `y = nd.dot(x, x)`, make the call, and time
    both (the Measurement, `median_s`); then time an `nd.waitall()` right after (`left_s`,
    the work the call did not wait for). `blocks` is decided apart from the timings, by
    `call_blocks`: whether the call returns while its input is held back by a gate.
    """
    x = _random((size, size), ctx)
    nd.dot(x, x).wait_to_read()
    calls, left = {n: [] for n in BLOCKING_CALLS}, {n: [] for n in BLOCKING_CALLS}
    for r in range(repeat):
        names = list(BLOCKING_CALLS)
        names = names[r % len(names):] + names[:r % len(names)]
        for name in names:
            sync()
            start = time.perf_counter()
            y = nd.dot(x, x)
            BLOCKING_CALLS[name](y)
            middle = time.perf_counter()
            nd.waitall()
            calls[name].append(middle - start)
            left[name].append(time.perf_counter() - middle)
    with trace:  # one more pass, untimed
        for call in BLOCKING_CALLS.values():
            call(nd.dot(x, x))
            nd.waitall()
    out = []
    for name in BLOCKING_CALLS:
        c, l = Measurement(name, tuple(calls[name])), Measurement(name, tuple(left[name]))
        out.append(result("async", name, c, size=size, ctx=str(ctx), left_s=l.median,
                          blocks=call_blocks(BLOCKING_CALLS[name], ctx)))
    return out


# --- sync-per-op loop vs async loop, over sizes ------------------------------------

OPS = {
    "add": ("y = x + 1", lambda x: x + 1),        # the chapter's loop
    "dot": ("y = nd.dot(x, x)", lambda x: nd.dot(x, x)),
}


def _loops(x, iterations, frontend, op="add"):
    f = OPS[op][1]

    def synchronous():
        for _ in range(iterations):
            y = f(x)
            y.wait_to_read()

    def asynchronous():
        start = time.perf_counter()
        for _ in range(iterations):
            y = f(x)
        frontend.append(time.perf_counter() - start)  # queued, not yet done: the front end's time
        nd.waitall()
    return synchronous, asynchronous


def _iterations_for(x, budget, op="add", low=20, high=1000):
    """How many iterations make one synchronous loop last about `budget` seconds."""
    f = OPS[op][1]
    f(x).wait_to_read()
    with Benchmark() as b:
        for _ in range(10):
            f(x).wait_to_read()
    return int(min(high, max(low, round(budget * 10 / max(b.seconds, 1e-9)))))


def estimate_t1_t2_t3(sync_s, async_s, frontend_s, iterations):
    """Solve the chapter's model for per-iteration costs (seconds).

    synchronous: N (t1 + t2 + t3) = N sync_s;  asynchronous: t1 + N t2 + t3 = N async_s.
    t1 is measured directly: the front end's time to queue one iteration. Subtracting the
    two equations gives t2 = (N async_s - sync_s) / (N - 1), and t3 = sync_s - t1 - t2.
    The model assumes the back end is the bottleneck (t2 > t1). When it is not, the
    asynchronous loop runs at the front end's pace (async_s close to t1), t2 and t3 cannot
    be told apart, and only their sum t2 + t3 = sync_s - t1 is reported; `bound` says which
    side set the pace of the asynchronous loop. `model_fits` is False when the estimate of t3
    comes out negative: the synchronous loop itself overlapped front and back end (the
    operator finished while Python was still returning from the call), which the model
    does not allow.
    """
    n = iterations
    t1 = frontend_s
    row = {"t1_s": t1, "t2_s": None, "t3_s": None, "t2_plus_t3_s": sync_s - t1}
    if async_s > 1.1 * t1:
        t2 = (n * async_s - sync_s) / (n - 1) if n > 1 else async_s
        row.update(t2_s=t2, t3_s=sync_s - t1 - t2, bound="back-end")
    else:
        row["bound"] = "front-end"
    row["model_fits"] = row["t2_plus_t3_s"] >= 0 and (row["t3_s"] is None or row["t3_s"] >= 0)
    return row


def sync_vs_async(ctx, sizes=(10, 32, 100, 316, 1000, 2000), timing=Timing(number=None), op="add", budget=0.15,
                  gain=0.10, trace=_NO_TRACE):
    """For each size n, a loop of `y = x + 1` (op='add', the chapter's; or op='dot':
    `y = nd.dot(x, x)`) on an n x n `x` that calls `y.wait_to_read()` every iteration
    (synchronous) against one that calls `nd.waitall()` once (asynchronous), interleaved
    repeat by repeat as `timing` says: a repeat is one loop of `timing.number` iterations
    (None: as many as make one synchronous loop last about `budget` seconds, between 20 and
    1000).

    Returns one Result per size (per-iteration medians, speedup of async over sync per
    repeat with its 95% interval and a verdict against `gain`, the median of the per-repeat
    speedups, t1/t2/t3 estimates) and a final 'crossover' Result: `size`, the
    smallest size from which the asynchronous loop gains less than `gain` (10%) for every
    larger size swept, and `backend_bound_from`, the smallest size from which the back end
    (the operator) rather than the Python front end sets the asynchronous loop's pace.
    """
    out = []
    for size in sizes:
        x = _random((size, size), ctx)
        n = timing.number or _iterations_for(x, budget, op)
        frontend = []
        synchronous, asynchronous = _loops(x, n, frontend, op)
        m = measure_interleaved({"sync": synchronous, "async": asynchronous},
                                warmup=timing.warmup, repeat=timing.repeat, number=1, progress=timing.progress)
        front = Measurement("frontend", tuple(frontend[timing.warmup:]))  # the first are the warm-up
        with trace:  # one more run of each loop, untimed
            synchronous()
            asynchronous()
        s, a = m["sync"].median / n, m["async"].median / n
        paired = statistics.median(p / q for p, q in zip(m["sync"].samples, m["async"].samples))
        row = {"op": OPS[op][0], "size": size, "iterations": n, "sync_s": s, "async_s": a,
               **stats.speedup_fields(m["sync"].samples, m["async"].samples, threshold=gain),
               "paired_speedup": paired,
               "sync_iqr_s": m["sync"].iqr / n, "async_iqr_s": m["async"].iqr / n,
               "noisy": m["sync"].noisy or m["async"].noisy}
        row.update(estimate_t1_t2_t3(s, a, front.median / n, n))
        out.append(result("async", "%dx%d" % (size, size), ctx=str(ctx), **row))
    out.append(result("async", "crossover", ctx=str(ctx), op=OPS[op][0], gain_below=gain,
                      size=_smallest_from(out, lambda m: m["speedup"] < 1 + gain),
                      backend_bound_from=_smallest_from(out, lambda m: m["bound"] == "back-end")))
    return out


def _smallest_from(rows, holds):
    """The smallest size from which `holds(metrics)` is true for every larger size swept
    (sizes in sweep order); None when it is false for the largest."""
    found = None
    for r in reversed(rows):
        if not holds(r.metrics):
            break
        found = r.metrics["size"]
    return found


# --- memory cost of running ahead ----------------------------------------------------

def book_mlp():
    """The chapter's MLP for the memory experiment: 2048 -> 512 -> 1."""
    net = nn.Sequential()
    net.add(nn.Dense(2048, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(1))
    return net


def host_batches(batch_size, features, pool=4, seed=0):
    """A few batches in host memory (numpy), cycled by `data_iter` like a loader's output."""
    rng = np.random.RandomState(seed)
    return [rng.normal(size=(batch_size, features)).astype("float32") for _ in range(pool)]


def data_iter(num_batches, batch_size, features, ctx, data="host", host=None, seed=0):
    """Yield (X, y) batches with time stamps recorded by the caller.

    data='host' makes each batch the way a real loader does, from host memory
    (numpy -> nd.array), so its memory is taken as soon as it is produced.
    data='engine' makes it with `nd.random.normal` as the book does: an operator that is
    only queued, so the batch takes no memory until the engine gets to it.
    """
    if data == "host" and host is None:
        host = host_batches(batch_size, features, seed=seed)
    for i in range(num_batches):
        if data == "host":
            X = nd.array(host[i % len(host)], ctx=ctx)
        else:
            X = nd.random.normal(shape=(batch_size, features), ctx=ctx)
        yield X, nd.ones((batch_size,), ctx=ctx)


class _Finished:
    """Watches arrays in order on a background thread and stamps when each is ready.

    `wait_to_read` releases the GIL, so the training loop keeps queuing meanwhile."""

    def __init__(self):
        self.times = []
        self._queue = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            array = self._queue.get()
            if array is None:
                return
            array.wait_to_read()
            self.times.append(time.perf_counter())

    def watch(self, array):
        self._queue.put(array)

    def close(self):
        self._queue.put(None)
        self._thread.join()


@dataclass(frozen=True)
class TrainLoop:
    """The memory experiment's training loop: the book's MLP on `num_batches` batches of
    `batch_size` x `features` (`data`: 'host' or 'engine', see `data_iter`), SGD at `lr`, a
    sync (`l.mean().asscalar()`) every `every` batches (0: never); `seed` for the weights and
    the data."""
    num_batches: int = 100
    every: int = 1
    batch_size: int = 1024
    features: int = 512
    data: str = "host"
    lr: float = 0.005
    seed: int = 0


def train_with_sync(ctx, loop=TrainLoop(), trace=_NO_TRACE):
    """Train the book's MLP as `loop` says, syncing every `loop.every` batches (0: never).
    Returns a flat dict: seconds, peak RSS above the start of
    the loop, peak device memory (GPU), and how far the producer ran ahead:

    - ran_ahead_batches: batches produced by the time the first batch had finished;
    - max_in_flight: the most batches produced but not yet finished, seen each time a
      batch finished.
    A batch counts as finished when its parameter update has run: after `trainer.step`
    the loop queues a one-element copy of the last parameter updated, and a background
    thread stamps the moment each copy is ready.
    """
    num_batches, every, batch_size, features, data, seed = (loop.num_batches, loop.every, loop.batch_size,
                                                            loop.features, loop.data, loop.seed)
    mx.random.seed(seed)
    net = book_mlp()
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": loop.lr})
    loss = gluon.loss.L2Loss()
    for X, y in data_iter(1, batch_size, features, ctx, data, seed=seed + 1):  # warm-up
        with autograd.record():
            l = loss(net(X), y)
        l.backward()
        trainer.step(batch_size)
    host = host_batches(batch_size, features, seed=seed + 2) if data == "host" else None
    last = list(net.collect_params().values())[-1]
    sync()
    produced = []
    finished = _Finished()
    l_sum = 0.0
    sampler = MemorySampler([ctx], interval=0.002)
    with trace, Benchmark() as bench:
        sampler.start()
        for i, (X, y) in enumerate(data_iter(num_batches, batch_size, features, ctx, data, host)):
            produced.append(time.perf_counter())
            with autograd.record():
                l = loss(net(X), y)
            if every and (i + 1) % every == 0:
                l_sum += l.mean().asscalar()
            l.backward()
            trainer.step(batch_size)
            finished.watch(last.data(ctx)[0:1].copy())
    usage = sampler.stop()
    finished.close()
    done = finished.times
    ahead = [sum(1 for p in produced if p <= d) - i for i, d in enumerate(done)]
    row = {
        "every": every, "batches": num_batches, "batch_size": batch_size, "data": data,
        "seconds_s": bench.seconds, "per_batch_s": bench.seconds / num_batches,
        "samples_per_s": num_batches * batch_size / bench.seconds,
        "rss_peak_bytes": usage.rss_peak, "rss_growth_bytes": usage.rss_growth,
        "ran_ahead_batches": ahead[0], "max_in_flight": max(ahead),
        "loss_sum": l_sum, "ctx": str(ctx),
    }
    for name, peak in usage.device_peak.items():
        row["device_peak_bytes"] = peak
    return row


def _variant_name(every):
    if not every:
        return "no sync"
    return "sync every batch" if every == 1 else "sync every %d" % every


def run_memory_variant(params, timeout=None):
    """Run `train_with_sync` in a fresh Python process; returns its dict.

    A fresh process per variant means allocator warm-up and the order of variants cannot
    decide the result. `params` holds JSON-able values: 'ctx', a string like 'cpu0', the
    fields of a `TrainLoop`, and 'trace', a path, when the loop is traced.
    """
    return transport.run_worker("gluonperf.workers.memory", params,
                                "memory worker (%s)" % _variant_name(params.get("every")), timeout=timeout)


def memory_cost(ctx, num_batches=150, every=(1, 5, 25), batch_size=1024, features=512, data="host",
                trace_path=None, progress=None):
    """The chapter's memory experiment done right: one fresh process per variant (sync every
    k batches for each k in `every`, then no sync), each reporting peak RSS during its loop,
    time, and how far the producer ran ahead. Also the time and memory relative to
    syncing every batch (or to the first variant). With `trace_path`, each worker traces
    its loop and the traces are merged into one file.
    """
    from ..runtime.contexts import describe
    variants = list(dict.fromkeys(list(every) + [0]))
    rows, traces = [], []
    with contextlib.ExitStack() as stack:
        tmpdir = stack.enter_context(guard.temp_dir(prefix="gluonperf-trace-")) if trace_path else None
        for k in variants:
            params = {"ctx": describe([ctx]), "num_batches": num_batches, "every": k,
                      "batch_size": batch_size, "features": features, "data": data}
            if tmpdir:
                params["trace"] = os.path.join(tmpdir, "every%d.json" % k)
                traces.append(params["trace"])
            try:
                rows.append(run_memory_variant(params))
            except (RuntimeError, subprocess.TimeoutExpired) as e:  # e.g. out of memory: keep the others
                rows.append({"every": k, "error": str(e)})
            if progress is not None:
                progress()
        if trace_path:
            merge_traces([t for t in traces if os.path.exists(t)], trace_path)
    done = [row for row in rows if "error" not in row]
    base = done[0] if done else None
    out = []
    for row in rows:
        row = dict(row)
        if "error" in row:
            out.append(result("memory", _variant_name(row["every"]), **row))
            continue
        row["time_vs_first"] = row["seconds_s"] / base["seconds_s"]
        row["growth_vs_first"] = row["rss_growth_bytes"] / max(base["rss_growth_bytes"], 1)
        out.append(result("memory", _variant_name(row["every"]), **row))
    return out

"""python -m gluonperf.workers.coldstart '<json>': one cold start of infer's (`inference.coldstart.measure`
starts it): import, load one rung, answer; its parts as one JSON line.

`import_s` runs from the parent's launch (the wall clock, which both processes share) to the end
of the imports in `cold_start`, so this module imports only the standard library and the wire
before it: what a deployed process would not import would count in it.
"""
import statistics
import time

from ..runtime.wire import worker_main


def _timed_call(forward, x):
    start = time.perf_counter()
    forward(x).wait_to_read()
    return time.perf_counter() - start


def cold_start(params):
    """Import, load, answer: the parts (`inference.coldstart.PARTS`), the batch sizes and the steady calls."""
    import mxnet as mx
    import numpy as np
    from ..inference.ladder import Rung, load, input_dtype
    imported = time.time()
    rung = Rung.from_text(params["rung"])
    ctx = mx.Context(params["device_type"], params["device_id"])
    first, second = params["batch_sizes"]
    rng = np.random.RandomState(0)

    def batch(n):
        x = mx.nd.array(rng.uniform(size=(n,) + tuple(rung.input_shape)), ctx=ctx,
                        dtype=input_dtype(rung.spec) if rung.kind == "spec" else "float32")
        x.wait_to_read()
        return x
    start = time.perf_counter()
    forward = load(rung, ctx)
    mx.nd.waitall()
    parts = {"import_s": imported - params["launched"], "load_s": time.perf_counter() - start}
    parts["first_call_s"] = _timed_call(forward, batch(first))
    parts["new_shape_call_s"] = _timed_call(forward, batch(second))
    x = batch(second)
    calls = params["steady_calls"]
    parts["steady_call_s"] = statistics.median(_timed_call(forward, x) for _ in range(calls))
    parts["total_s"] = parts["import_s"] + parts["load_s"] + parts["first_call_s"]
    parts.update(batch_sizes=[first, second], steady_calls=calls)
    return parts


if __name__ == "__main__":
    worker_main(cold_start, __spec__.name, "python -m gluonperf.infer")

"""The measured parts of a scaling prediction.

- `gradient_bytes(model)`: the bytes one step's gradients take (float32, trainable
  parameters only: BatchNorm's running statistics are not summed), from the model
  initialised with its input shape; `gradient_shapes(model)` their arrays' shapes.
- `step_from_scaling(records)` / `measure_step(...)`: the per-device step (t1 and the
  update) from `train --scaling` records (`read_records` reads a --json file), or measured
  now with `training.device_scaling.scaling`.
- `link_from_allreduce(records)`: a link from `bench allreduce` records (bus_GBps);
  `copy_link` (copyto between two contexts) and `loopback_link` (TCP over loopback): a link
  measured now.

Nothing here parses arguments or prints.
"""
import socket
import statistics
import threading
import time

from .. import UserError
from . import model as scaling_model
from ..config import ALLREDUCE_HOROVOD


def gradient_shapes(model):
    """The shapes of the gradient arrays of `model` (a ModelSpec, or its text), in the order of
    its parameters: the trainable ones (BatchNorm's running statistics are not summed)."""
    import mxnet as mx

    from ..training.data import CLASSES
    from ..training.model_spec import as_spec
    from ..training.models import get_model, input_shape
    spec = as_spec(model)
    net = get_model(spec, CLASSES)
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net(mx.nd.zeros((1,) + tuple(input_shape(spec)), ctx=mx.cpu()))
    return [tuple(p.shape) for p in net.collect_params().values() if p.grad_req != "null"]


def gradient_bytes(model):
    """(bytes, arrays, parameters) of the gradients of `model` (a ModelSpec, or its text)."""
    import math
    shapes = gradient_shapes(model)
    count = sum(math.prod(shape) for shape in shapes)
    return 4 * count, len(shapes), count


def read_records(path, bench):
    """The records of `bench` in a --json file, as metric dicts."""
    from ..records import SchemaError, read_jsonl
    try:
        rows = read_jsonl(path)
    except OSError as e:
        raise UserError("cannot read %s: %s" % (path, e.strerror or e))
    except SchemaError as e:
        raise UserError(str(e))
    except (ValueError, KeyError) as e:
        raise UserError("%s is not a gluonperf --json file (%s)" % (path, e))
    found = [dict(r.metrics, name=r.name, env=env) for r, env in rows if r.bench == bench]
    if not found:
        raise UserError("%s holds no '%s' records; write them with %s" % (
            path, bench, "python -m gluonperf.train --scaling --json FILE" if bench == "scaling"
            else "python -m gluonperf.bench allreduce --json FILE"))
    return found


def step_from_scaling(records):
    """The one-device step of `train --scaling` records: dict(t1_s, update_s,
    per_device_batch, model, contexts)."""
    ones = [r for r in records if r.get("devices") == 1]
    if not ones:
        raise UserError("the scaling records have no 1-device row; run train --scaling (it always measures 1 device)")
    r = ones[0]
    for key in ("t1_s", "update_s", "per_device_batch"):
        if not isinstance(r.get(key), (int, float)):
            raise UserError("the scaling record lacks %s; write it with python -m gluonperf.train --scaling --json" % key)
    cpu = r.get("cpu_s")
    return dict(t1_s=float(r["t1_s"]), update_s=float(r["update_s"]), per_device_batch=int(r["per_device_batch"]),
                model=r.get("model"), contexts=r.get("contexts"), step_s=r.get("step_s"),
                cpu_s=float(cpu) if isinstance(cpu, (int, float)) else None)


def measure_step(config, ctx, steps=5):
    """Measure the one-device step now (training.scaling on one context)."""
    from ..training.device_scaling import scaling
    rows = scaling(config, [ctx], steps)
    return step_from_scaling([rows[0].metrics])


def link_from_allreduce(records, scope="machine"):
    """A link from `bench allreduce` records: the best bus bandwidth at the largest tensor
    (the copyto ceiling excluded, and Horovod's rows: processes over Gloo, not the devices' link),
    latency fitted from the smallest tensor when there are two sizes."""
    rows = [r for r in records if isinstance(r.get("bus_GBps"), (int, float))
            and r.get("name") not in ("copyto", ALLREDUCE_HOROVOD)]
    if not rows:
        raise UserError("the allreduce records carry no bus_GBps; write them with python -m gluonperf.bench "
                        "allreduce --json FILE")
    largest = max(r.get("tensor_bytes", 0) for r in rows)
    best = max((r for r in rows if r.get("tensor_bytes", 0) == largest), key=lambda r: r["bus_GBps"])
    latency = 0.0
    smallest = min(r.get("tensor_bytes", 0) for r in rows)
    if smallest < largest:
        small = min((r for r in rows if r.get("tensor_bytes", 0) == smallest), key=lambda r: r["median_s"])
        k = small.get("contexts", 2)
        need = 2 * (k - 1) / k * smallest
        latency = max(0.0, (small["median_s"] - need / (best["bus_GBps"] * 1e9)) / (2 * (k - 1)))
    return scaling_model.measured_link(
        best["bus_GBps"], latency, name="measured %.3g GB/s" % best["bus_GBps"], scope=scope,
        source="bench allreduce: %s over %s contexts, %d bytes" % (best.get("name"), best.get("contexts"), largest))


def copy_link(src, dst, nbytes, repeat=7):
    """The link between two contexts of this machine: copyto of a small and a `nbytes`
    array (median of `repeat`), bandwidth from the difference, latency from the small one.
    Shared: CPU contexts move every byte through one memory system."""
    import mxnet as mx

    from ..measure.harness import Benchmark

    def timed(n):
        a, b = mx.nd.ones(max(1, n // 4), ctx=src), mx.nd.zeros(max(1, n // 4), ctx=dst)
        samples = []
        for i in range(repeat + 1):
            with Benchmark() as t:
                a.copyto(b)
            if i:
                samples.append(t.seconds)
        return statistics.median(samples)
    small_bytes, large_bytes = 4096, max(nbytes, 1 << 20)
    small, large = timed(small_bytes), timed(large_bytes)
    bw = (large_bytes - small_bytes) / max(large - small, 1e-9) / 1e9
    return scaling_model.measured_link(bw, small, name="copyto %s->%s" % (src, dst), scope="machine",
                                       shared=src.device_type == "cpu",
                                       source="measured: copyto %s -> %s, %d bytes" % (src, dst, large_bytes))


def loopback_link(nbytes, repeat=5):
    """TCP over the loopback interface: a thread receives what this one sends, and echoes
    a small message for the latency. Shared: every process's traffic moves through one CPU."""
    server = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(server.getsockname(), timeout=30)
    b, _ = server.accept()
    server.close()
    b.settimeout(30)
    payload = memoryview(bytearray(max(nbytes, 1 << 20)))
    done = []

    def sink():
        buf = bytearray(1 << 20)
        while True:
            head = b.recv(8)
            if not head or head == b"stop....":
                return
            if head == b"ping....":
                b.sendall(b"pong....")
                continue
            want = int(head)
            while want > 0:
                want -= b.recv_into(buf, min(len(buf), want))
            b.sendall(b"ok")
            done.append(1)
    t = threading.Thread(target=sink, daemon=True)
    t.start()
    try:
        rtts, rates = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            a.sendall(b"ping....")
            a.recv(8)
            rtts.append(time.perf_counter() - start)
            start = time.perf_counter()
            a.sendall(b"%08d" % len(payload))
            a.sendall(payload)
            a.recv(2)
            rates.append(len(payload) / (time.perf_counter() - start) / 1e9)
        a.sendall(b"stop....")
    finally:
        t.join(5)
        a.close()
        b.close()
    return scaling_model.measured_link(statistics.median(rates), statistics.median(rtts) / 2, name="loopback",
                                       scope="network", shared=True,
                                       source="measured: TCP over loopback, %d bytes" % len(payload))

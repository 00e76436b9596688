"""Measured parts for scaling predictions, the predictions as records, and their validation.

- `gradient_bytes(model)`: the bytes one step's gradients take (float32, trainable
  parameters only: BatchNorm's running statistics are not summed), from the model
  initialised with its input shape.
- `step_from_scaling(records)` / `measure_step(...)`: the per-device step (t1 and the
  update) from `train --scaling` records, or measured now with `training.scaling`.
- `link_from_allreduce(records)`: a link from `bench allreduce` records (bus_GBps).
- `prediction_results(...)`: `scaling_model.sweep` as Results (bench 'predict').
- `validate_devices(...)` / `validate_dist(...)` / `validate_horovod(...)`: predict what
  this machine can run (CPU contexts; dist_sync on loopback and Horovod over Gloo on
  loopback, both through `gluonperf.launch`), measure it (several samples of the step: the
  timed steps, or timed epochs), and return predicted vs measured with the interval of
  measured / predicted and the judgement (`judge`: within 25%, outside, or inconclusive)
  (bench 'predict-check'). A job's check says how many processes it ran and how many threads
  wanted a core at once on how many cores; when they outnumbered the cores
  (`scaling_model.oversubscribed`) its judgement says so; the prediction then counts the CPU
  time of the workers and their helpers against the cores (`scaling_model.cores_bound_s`).
- `horovod_exchange_rank(...)` / `horovod_exchange(...)`: Horovod's exchange of a model's
  gradients on this machine's ranks, with a stand-in for the compute: the t2 of
  `validate_horovod`, and its background threads' CPU time while the ranks compute.

Nothing here parses arguments or prints.
"""
import os
import socket
import statistics
import sys
import threading
import time

from .. import UserError
from . import scaling_model
from ..config import ALLREDUCE_HOROVOD
from ..records import result
from ..training.model_spec import spec_flags

CHECK_COLUMNS = ["scheme", "workers", "servers", "devices", "threads", "runnable", "per_device_batch", "t1_s", "t2_s",
                 "predicted_step_s", "measured_step_s", "measured_step_low_s", "measured_step_high_s", "measured_n",
                 "measured_over_predicted", "measured_over_predicted_ci_low", "measured_over_predicted_ci_high",
                 "within_25pct"]
WITHIN = 0.25  # a prediction is judged within 25% of the measured step


# --- measured parts --------------------------------------------------------------

def gradient_shapes(model):
    """The shapes of the gradient arrays of `model` (a gluonperf.training.models name), in the
    order of its parameters: the trainable ones (BatchNorm's running statistics are not summed)."""
    import mxnet as mx

    from ..training.data import CLASSES
    from ..training.models import get_model, input_shape
    net = get_model(model, CLASSES)
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    net(mx.nd.zeros((1,) + tuple(input_shape(model)), ctx=mx.cpu()))
    return [tuple(p.shape) for p in net.collect_params().values() if p.grad_req != "null"]


def gradient_bytes(model):
    """(bytes, arrays, parameters) of the gradients of `model` (a gluonperf.training.models name)."""
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
    from ..training.loop import scaling
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


# --- predictions as records ---------------------------------------------------------

def prediction_results(model, step, nbytes, devices, machines, intra, inter, servers=None, overlap=True,
                       placement="colocated", base_lr=0.1, base_batch=256, per_device_batch=None,
                       compute_units=None, keys=1, engine="ps",
                       fusion_threshold=scaling_model.HOROVOD_FUSION_THRESHOLD,
                       cycle_time_s=scaling_model.HOROVOD_CYCLE_TIME_S, cores=None):
    """Results (bench 'predict') for every N x M. With a `per_device_batch` other than the
    measured one, t1 is scaled linearly with it (an assumption: small batches run below the
    device's peak, so this overestimates their speed). The update is not: every device updates
    all the weights (Trainer with update_on_kvstore=False), whatever its batch, in the time of
    the optimizer measured (an Adam update costs more than SGD's: bench optimizers). `engine`
    'horovod' predicts Horovod's flat ring with `fusion_threshold` and `cycle_time_s`. With
    `cores` (per machine) and the step's `cpu_s` (a worker's CPU seconds per step, scaled with the
    batch as t1 is), the compute lasts at least the devices' CPU time over the cores
    (`scaling_model.cores_bound_s`)."""
    batch = per_device_batch or step["per_device_batch"]
    factor = batch / step["per_device_batch"]
    cpu = step.get("cpu_s")
    bound = dict(cores=cores, worker_cpu_s=cpu * factor) if cores and cpu is not None else {}
    rows = scaling_model.sweep(step["t1_s"] * factor, batch, nbytes, devices, machines, intra, inter, servers,
                               update_s=step["update_s"], overlap=overlap, placement=placement,
                               base_lr=base_lr, base_batch=base_batch, compute_units=compute_units, keys=keys,
                               engine=engine, fusion_threshold=fusion_threshold, cycle_time_s=cycle_time_s,
                               **bound)
    horovod = engine == "horovod"
    out = []
    for r in rows:
        name = "%dx%d" % (r["devices"], r["machines"])
        extra = dict(fusion_threshold_bytes=fusion_threshold, cycle_time_s=cycle_time_s) if horovod else {}
        out.append(result("predict", name, model=model, grad_bytes=nbytes, keys=keys,
                          machine_link=intra.name, network_link=inter.name if inter and r["machines"] > 1 else None,
                          placement=placement if r["machines"] > 1 and not horovod else None, **extra, **r))
    return out


def best_results(results, min_efficiency):
    """Per machine count, the most devices per machine that keep efficiency >= min_efficiency."""
    best = scaling_model.largest_efficient([r.metrics for r in results], min_efficiency)
    out = []
    for m, row in sorted(best.items()):
        if row is None:
            out.append(result("predict-best", "%d machines" % m, machines=m, devices=None, total_devices=None,
                              efficiency=None, images_per_s=None, min_efficiency=min_efficiency))
        else:
            out.append(result("predict-best", "%d machines" % m, machines=m, devices=row["devices"],
                              total_devices=row["total_devices"], efficiency=row["efficiency"],
                              images_per_s=row["images_per_s"], min_efficiency=min_efficiency))
    return out


# --- validation on this machine --------------------------------------------------------

def judge(predicted_step, measured_steps, within=WITHIN, what="steps"):
    """The measured step (`measured_steps`: its samples, seconds) against a prediction, with
    the spread of the measurement: the interval of measured / predicted (a t interval on the
    log step times, stats.ratio_interval, scaled by the prediction). Within `within` when the
    whole interval lies inside 1 -+ within, outside when it lies wholly outside, otherwise
    inconclusive. Returns (measured step interval, ratio interval, True / False / None, text)."""
    from ..measure import stats
    measured = stats.ratio_interval(measured_steps)
    ratio = stats.Interval(measured.estimate / predicted_step, measured.low / predicted_step,
                           measured.high / predicted_step, measured.n, measured.level, measured.method,
                           measured.sd_log)
    lo, hi = 1 - within, 1 + within
    verdict = True if lo <= ratio.low and ratio.high <= hi else (
        False if ratio.high < lo or ratio.low > hi else None)
    word = {True: "within", False: "outside", None: "inconclusive against"}[verdict]
    return measured, ratio, verdict, "%s %g%%: measured/predicted %s" % (word, 100 * within,
                                                                        ratio.describe(what=what))


def crowding(workers, threads, helpers, cores):
    """What a job on this machine asks of its cores: the workers' compute threads (workers x
    OpenMP threads) and `helpers`, the processes or threads that must run at every exchange
    beside them ({'servers': 2, 'scheduler': 1}, {'Horovod background threads': 2}). Returns
    the fields of a check: runnable (all of them), cores, oversubscribed
    (`scaling_model.oversubscribed`: then the cores bound the compute, `scaling_model.cores_bound_s`)
    and `crowding_note`, the words its judgement adds when so."""
    runnable = workers * threads + sum(helpers.values())
    over = scaling_model.oversubscribed(runnable, cores)
    parts = ["%d compute thread%s" % (workers * threads, "s" * (workers * threads != 1))] + \
        ["%d %s" % (n, what) for what, n in helpers.items() if n]
    note = ("oversubscribed: %d threads want a core at once on %d cores (%s)" % (runnable, cores, ", ".join(parts))
            if over else None)
    return dict(runnable=runnable, cores=cores, oversubscribed=over, crowding_note=note)


def _check(scheme, predicted_step, measured_steps, batch, what="steps", **fields):
    """A 'predict-check' record: `judge`'s verdict on the prediction, with the `crowding`
    fields' note, when there is one, added to the judgement."""
    measured, ratio, within, text = judge(predicted_step, measured_steps, what=what)
    err = scaling_model.relative_error(predicted_step, measured.estimate)
    note = fields.pop("crowding_note", None)
    if note:
        text += "; " + note
    return result("predict-check", "%s %s" % (scheme, ",".join("%s=%s" % kv for kv in fields.items()
                                                             if kv[0] in ("devices", "workers", "servers")
                                                             and kv[1] is not None)),
                  scheme=scheme, predicted_step_s=predicted_step, measured_step_s=measured.estimate,
                  measured_step_low_s=measured.low, measured_step_high_s=measured.high, measured_n=measured.n,
                  measured_samples_s=list(measured_steps), **ratio.fields("measured_over_predicted"),
                  predicted_images_per_s=batch / predicted_step, measured_images_per_s=batch / measured.estimate,
                  error=err, within_25pct=within, judgement=text, **fields)


def validate_devices(model, per_device_batch, max_devices, steps=5, dataset="synthetic", progress=None):
    """Predict 1..max_devices CPU contexts from the measured 1-context step, the model's
    gradient bytes and the measured copy link; then measure them (training.scaling,
    kvstore device) and compare step times. The contexts share this machine's cores:
    compute_units = cores // OMP threads contexts compute at full speed at once, the compute
    lasts at least every context's CPU time (as one context's step takes it, the Python thread
    that feeds it included) over the cores (`scaling_model.cores_bound_s`) and at least the
    contexts' compute side by side (the run's own t1 at that many contexts, forward and backward
    to a sync with nothing exchanged), and compute and copies do not overlap (they run on the
    same cores)."""
    import mxnet as mx

    from ..runtime.threads import omp_threads, physical_cores
    from ..training.loop import TrainConfig, scaling
    ctxs = [mx.cpu(i) for i in range(max_devices)]
    config = TrainConfig(model=model, dataset=dataset, batch_size=per_device_batch * max_devices,
                         kvstore="device", steps=steps, hybridize="static", limit=per_device_batch * max_devices)
    nbytes, keys, _ = gradient_bytes(model)
    lnk = copy_link(ctxs[0], ctxs[min(1, max_devices - 1)], nbytes)
    measured = [r.metrics for r in scaling(config, ctxs, steps, progress=progress)]
    step = step_from_scaling(measured)
    threads, cores = omp_threads(), physical_cores()
    units = max(1, cores // threads)
    cpu = measured[0]["cpu_s"]
    out = []
    for m in measured:
        n = m["devices"]
        p = scaling_model.predict(step["t1_s"], per_device_batch, nbytes, n, 1, lnk, update_s=step["update_s"],
                                  overlap=False, compute_units=units, keys=keys, cores=cores, worker_cpu_s=cpu)
        # the contexts' compute side by side, nothing exchanged (the run's t1 at n contexts), as
        # validate_dist's workers side by side: it costs more than the contexts' CPU time
        t1 = max(p["t1_s"], m["t1_s"])
        predicted = scaling_model.step_s(t1, p["t2_s"], p["update_s"], overlap=False)
        out.append(_check("device", predicted, m.get("samples_s") or [m["step_s"]], per_device_batch * n,
                          devices=n, workers=1,
                          servers=None, threads=threads, per_device_batch=per_device_batch, t1_s=t1,
                          t2_s=p["t2_s"], measured_t1_s=m["t1_s"], measured_t2_s=m["t2_s"],
                          link_GBps=lnk.GBps, link_latency_s=lnk.latency_s, compute_units=units, keys=keys,
                          worker_cpu_s=cpu, cores_bound_s=p["cores_bound_s"], update_s=p["update_s"], processes=1,
                          cores=cores, load=os.getloadavg()[0], model=model))
    return out


def _job_env():
    """This environment for the validation's training runs: without thread and ps-lite settings
    (each run gets its own OMP_NUM_THREADS) and Horovod's tunables (set per run), with this
    checkout on PYTHONPATH."""
    from ..runtime import guard
    return guard.package_env(drop=("OMP_", "MXNET_OMP", "DMLC_", "HOROVOD_"))


def _threads(cores, workers, helpers):
    """OpenMP threads per worker of a job here: the cores the `helpers` (servers and scheduler,
    Horovod's background threads) leave, shared among the workers; at least 1 (`crowding` then
    says the job is oversubscribed)."""
    return max(1, (cores - helpers) // workers)


def _train_argv(model, batch, limit, epochs, extra=()):
    return [sys.executable, "-m", "gluonperf.train", *spec_flags(model), "--dataset", "synthetic",
            "--limit", str(limit), "--batch-size", str(batch), "--epochs", str(epochs), "--lr", "0.05",
            "--log-interval", "0", "--stall-timeout", "120", *extra]


def _run_train(argv, env, timeout, what, kind="validation run"):
    from ..runtime import guard
    try:
        done = guard.run(argv, timeout=timeout, env=env)
    except Exception as e:  # subprocess.TimeoutExpired: the child group was killed
        raise UserError("%s %s did not finish: %s" % (kind, what, e))
    _raise_if_failed([done], what, kind)


def _raise_if_failed(done, what, kind="validation run"):
    """One line for the first of the finished runs `done` that exited non-zero: its last line."""
    from ..runtime import guard
    for d in done:
        if d.returncode != 0:
            raise UserError("%s %s failed (exit %d): %s" % (kind, what, d.returncode,
                                                             guard.last_line(d.stderr, "(no output)")))


def _run_job(launcher, model, batch, steps, workers, repeats, kvstore, env, path, timeout, what):
    """One run of a job of `workers` processes through `gluonperf.launch` (its flags
    `launcher`) over this validation's training command with `kvstore`: the step of each timed
    epoch (`_epoch_steps`)."""
    argv = [sys.executable, "-m", "gluonperf.launch", *launcher, "--timeout", str(timeout), "--"] + _train_argv(
        model, batch, batch * steps * workers, repeats + 1, ["--ctx", "cpu0", "--kvstore", kvstore, "--json", path])
    _run_train(argv, env, timeout + 30, what)
    return _epoch_steps(path, batch * workers)


def _epoch_steps(path, images_per_step):
    """The step time of every epoch but the first (graph building, first allocations) of a
    train --json file: images per step / the epoch's training images/s. One sample each."""
    from ..records import read_jsonl
    try:
        rows = [r.metrics for r, _ in read_jsonl(path) if r.bench == "train"]
    except OSError as e:
        raise UserError("a training run ended without writing its records (%s)" % (e.strerror or e)) from None
    if not rows:
        raise UserError("a training run wrote no epoch records to %s" % path)
    return [images_per_step / r["train_images_per_s"] for r in rows[1:] or rows]


def _epoch_cpu(path, images_per_step):
    """The CPU seconds per step of every epoch but the first of a train --json file: the
    epoch's train_cpu_s (this process, all its threads) over its steps. One sample each."""
    from ..records import read_jsonl
    rows = [r.metrics for r, _ in read_jsonl(path) if r.bench == "train"]
    rows = rows[1:] or rows
    if not all(isinstance(r.get("train_cpu_s"), (int, float)) and r.get("images") for r in rows):
        raise UserError("a training run's epoch records at %s carry no train_cpu_s; is this gluonperf's train?" % path)
    return [r["train_cpu_s"] * images_per_step / r["images"] for r in rows]


def _mean_step(samples):
    """The geometric mean of step samples (what stats.ratio_interval estimates)."""
    import math
    return math.exp(sum(math.log(s) for s in samples) / len(samples))


def _single_step(model, batch, steps, env, tmp, timeout, threads, repeats=1):
    """The one-worker step (kvstore device, cpu0) at `threads` OpenMP threads, alone on the
    machine: (step, CPU seconds per step of the worker's process, all its threads), each the
    geometric mean over `repeats` timed epochs (after one untimed)."""
    path = os.path.join(tmp, "single-%d.json" % threads)
    _run_train(_train_argv(model, batch, batch * steps, repeats + 1,
                           ["--ctx", "cpu0", "--kvstore", "device", "--json", path]),
               dict(env, OMP_NUM_THREADS=str(threads)), timeout, "1 worker, %d thread(s)" % threads)
    return _mean_step(_epoch_steps(path, batch)), _mean_step(_epoch_cpu(path, batch))


def _corun_step(model, batch, steps, env, tmp, timeout, threads, workers, repeats=1, tries=3):
    """The per-worker step of `workers` one-worker runs (kvstore device, cpu0, `threads` OpenMP
    threads each) started at once, with nothing exchanged: the compute of a job whose workers
    share this machine's cores, with whatever their threads cost each other beyond their CPU
    time (switches between them, caches). The runs start a moment apart (each loads MXNet
    first), so only the epochs that lay wholly within the time every run was training count
    (`_side_by_side`, by the epochs' `train_started_at`). The runs train 2 x `repeats` + 1
    epochs; when fewer than `repeats` of each run's fall in that time (epochs short beside the
    start-up), they run again with 4 times the epochs, `tries` times in all. Returns (step, CPU
    seconds per step of a worker's process), each the geometric mean over those epochs of every
    run."""
    from ..runtime import guard
    paths = [os.path.join(tmp, "corun-%d-%d-%d.json" % (workers, threads, i)) for i in range(workers)]
    what = "%d workers side by side, %d thread(s) each" % (workers, threads)
    epochs = 2 * repeats + 1
    for _ in range(tries):
        argvs = [_train_argv(model, batch, batch * steps, epochs,
                             ["--ctx", "cpu0", "--kvstore", "device", "--json", path]) for path in paths]
        try:
            done = guard.run_all(argvs, timeout=timeout, env=dict(env, OMP_NUM_THREADS=str(threads)))
        except Exception as e:  # subprocess.TimeoutExpired: every child group was killed
            raise UserError("validation run %s did not finish: %s" % (what, e))
        _raise_if_failed(done, what)
        runs = _side_by_side(paths, what)
        fewest = min(len(run) for run in runs)
        if fewest >= repeats:
            inside = [r for run in runs for r in run]
            return (_mean_step([batch / r["train_images_per_s"] for r in inside]),
                    _mean_step([r["train_cpu_s"] * batch / r["images"] for r in inside]))
        epochs *= 4
    raise UserError("validation runs %s ran together for only %d of one run's epochs (need %d; %d tries); is "
                    "the machine busy?" % (what, fewest, repeats, tries))


def _side_by_side(paths, what):
    """Per train --json file of `paths`, its epoch records (the run's first left out) whose
    training lay wholly within the time every run was training (`train_started_at` and
    `train_s`): the epochs that ran side by side with all the others."""
    from ..records import read_jsonl
    runs = [[r.metrics for r, _ in read_jsonl(path) if r.bench == "train"][1:] for path in paths]
    if not all(runs) or not all("train_started_at" in r for run in runs for r in run):
        raise UserError("a run of %s wrote no epoch records with train_started_at" % what)
    begin = max(run[0]["train_started_at"] for run in runs)
    end = min(run[-1]["train_started_at"] + run[-1]["train_s"] for run in runs)
    return [[r for r in run if begin <= r["train_started_at"] and r["train_started_at"] + r["train_s"] <= end]
            for run in runs]


def _ps_link(model, batch, steps, nbytes, keys, lnk, env, tmp, timeout, singles, repeats=1, pairs=1):
    """The loopback link as ps-lite sees it: bandwidth from the socket measurement, the
    per-message cost from one worker and one server (dist_sync step - plain step, 2 messages
    per key), both at one thread (the setting every worker runs with on 2 cores). A difference
    of two runs' steps, each run's own noise in it: on a 2-core Zen 5 one pair gave half the
    cost the others did, so `pairs` pairs (the plain run, then the dist_sync one; a validation
    runs as many as it runs each job) are run and the median taken. The plain runs also give
    `singles[1]` (the geometric mean of theirs)."""
    extras, plain = [], []
    for _ in range(pairs):
        plain.append(_single_step(model, batch, steps, env, tmp, timeout, 1, repeats))
        dist = _run_job(["-n", "1", "-s", "1"], model, batch, steps, 1, repeats, "dist_sync",
                        dict(env, OMP_NUM_THREADS="1"), os.path.join(tmp, "dist-1-1.json"), timeout,
                        "dist_sync 1 worker 1 server")
        extras.append(_mean_step(dist) - plain[-1][0] - 2.0 * nbytes / lnk.Bps)
    singles[1] = (_mean_step([s for s, _ in plain]), _mean_step([c for _, c in plain]))
    per_message = max(lnk.latency_s, statistics.median(extras) / (2 * keys))
    return scaling_model.measured_link(lnk.GBps, per_message, name="loopback via ps-lite", scope="network",
                                       shared=True, source="%s; per-message cost %.3g us, the median of %d "
                                       "pairs of 1-worker runs with and without dist_sync"
                                       % (lnk.source, per_message * 1e6, pairs))


VALIDATE_LAUNCHES = 3  # runs of each job (and of Horovod's calibration) in a validation


def _launch_note(launches):
    return "epochs of %d runs" % launches if launches > 1 else "epochs"


def validate_dist(model, per_worker_batch, configs, steps=8, timeout=240, progress=None, repeats=5,
                  launches=VALIDATE_LAUNCHES):
    """dist_sync on loopback: for each (workers, servers) in `configs`, predict the step from
    a one-worker run of the same training command (kvstore device, same threads per worker),
    the model's gradient bytes and the measured loopback link, then run it through
    gluonperf.launch and compare. Every process shares this machine's cores: workers get the
    cores the servers and the scheduler leave (`_threads`), and compute_units = cores // threads;
    the compute lasts at least the workers' CPU time (each as measured alone, every thread of
    it) over the cores (`scaling_model.cores_bound_s`; `crowding` says when the threads
    outnumber the cores). The servers' and the scheduler's work is the exchange's, in t2
    (calibrated from a 1-worker run, `_ps_link`); the servers answer side by side only on the
    cores the workers' compute threads leave (on a 2-core Zen 5, 2 servers were no faster than 1
    in any of four pairs of jobs: docs/commands/predict.md). Every run
    trains `repeats` timed epochs of `steps` steps after an untimed one, and each job runs
    `launches` times: each epoch's step is one sample of the measured step, whose interval the
    prediction is judged against (`judge`). One run of a job is not enough: on a 2-core Zen 5
    runs of the same job differed by more than their epochs did (docs/commands/predict.md)."""
    from ..runtime import guard
    from ..runtime.threads import physical_cores
    nbytes, keys, _ = gradient_bytes(model)
    lnk = loopback_link(nbytes)
    cores = physical_cores()
    base_env = _job_env()
    out, singles, coruns = [], {}, {}
    with guard.temp_dir(prefix="gluonperf-predict-") as tmp:
        lnk = _ps_link(model, per_worker_batch, steps, nbytes, keys, lnk, base_env, tmp, timeout, singles, repeats,
                       pairs=launches)
        for workers, servers in configs:
            threads = _threads(cores, workers, servers + 1)
            env = dict(base_env, OMP_NUM_THREADS=str(threads))
            if threads not in singles:  # the measured per-worker step at this thread count
                singles[threads] = _single_step(model, per_worker_batch, steps, base_env, tmp, timeout, threads,
                                                repeats)
            single, cpu = singles[threads]
            if (threads, workers) not in coruns:
                coruns[threads, workers] = _corun_step(model, per_worker_batch, steps, base_env, tmp, timeout, threads,
                                                       workers, repeats)
            corun, corun_cpu = coruns[threads, workers]
            measured = []
            for launch in range(launches):
                measured += _run_job(["-n", str(workers), "-s", str(servers)], model, per_worker_batch, steps,
                                     workers, repeats, "dist_sync", env,
                                     os.path.join(tmp, "dist-%d-%d-%d.json" % (workers, servers, launch)), timeout,
                                     "dist_sync %d workers %d servers" % (workers, servers))
                if progress:  # one tick a run of a job
                    progress()
            units = max(1, cores // threads)
            # every worker process shares the cores: compute_units counts all `workers` of them
            bound = scaling_model.cores_bound_s(cpu, workers, cores)
            t1 = max(scaling_model.compute_s(single, workers, units), bound, corun)
            # the servers answer side by side only on cores the workers' compute threads leave
            t2 = scaling_model.ps_sync_s(nbytes, workers, servers, lnk, keys=keys,
                                         compute_units=max(1, cores - workers * threads))
            predicted = scaling_model.step_s(t1, t2, 0.0, overlap=False)
            out.append(_check("dist_sync", predicted, measured, per_worker_batch * workers, what=_launch_note(launches),
                              launches=launches,
                              devices=1, workers=workers, servers=servers, threads=threads,
                              per_device_batch=per_worker_batch, t1_s=t1, t2_s=t2, measured_single_s=single,
                              worker_cpu_s=cpu, helper_cpu_s=0.0, cores_bound_s=bound, corun_step_s=corun,
                              corun_cpu_s=corun_cpu,
                              link_GBps=lnk.GBps, link_latency_s=lnk.latency_s, compute_units=units,
                              processes=workers + servers + 1,  # + ps-lite's scheduler
                              **crowding(workers, threads, {"servers": servers, "scheduler": 1}, cores),
                              load=os.getloadavg()[0], model=model))
    return out


def _busy(cpu_s):
    """Keep this thread computing for `cpu_s` seconds of its own CPU time (longer in wall time
    when the kernel gives its core to another thread meanwhile, as it would the compute)."""
    end = time.thread_time() + cpu_s
    while time.thread_time() < end:
        sum(range(1000))


def horovod_exchange_rank(shapes, compute_s, steps=20, repeats=5, warmup=3):
    """One rank's part of `horovod_exchange` (under horovodrun; hvd.init here, hvd.shutdown at
    the end), a step as training takes it with a stand-in for the compute: this thread computes
    for `compute_s` seconds of CPU time (`_busy`), the first 1 - BACKWARD_SHARE of it the
    forward, then the backward, which hands one array of each shape in `shapes` to
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
    from .scaling_model import BACKWARD_SHARE
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


def horovod_exchange(shapes, ranks, compute_s, env, tmp, timeout, steps=20, repeats=5):
    """The exchange of a model's gradients (arrays of `shapes`) by Horovod over `ranks`
    processes of this machine, measured with a stand-in for the compute: `gluonperf.launch
    --engine horovod` over `gluonperf.workers.exchange` (`horovod_exchange_rank`: each rank
    computes `compute_s` of CPU time a step, handing the arrays to Horovod over its backward).
    Returns (the wait for the sums after the compute, the helpers' CPU time while the compute
    ran, all ranks', and how long the compute lasted; seconds per step), each the geometric
    mean over the repeats."""
    import json
    plan, out = os.path.join(tmp, "exchange-%d.plan.json" % ranks), os.path.join(tmp, "exchange-%d.json" % ranks)
    with open(plan, "w") as f:
        json.dump(dict(shapes=[list(s) for s in shapes], compute_s=compute_s, steps=steps, repeats=repeats), f)
    argv = [sys.executable, "-m", "gluonperf.launch", "--engine", "horovod", "-n", str(ranks), "--timeout",
            str(timeout), "--", sys.executable, "-m", "gluonperf.workers.exchange", "--plan", plan, "--out", out]
    _run_train(argv, env, timeout + 30, "horovod exchange %d ranks" % ranks, kind="calibration run")
    try:
        with open(out) as f:
            found = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError("the Horovod calibration run wrote no timings to %s (%s)" % (out, e)) from None
    helpers = [max(h, 1e-9) for h in found["helper_cpu_s"]]  # geometric mean: no zeros
    return _mean_step(found["exchange_s"]), _mean_step(helpers), _mean_step(found["compute_s"])


def validate_horovod(model, per_worker_batch, ranks=(2,), steps=8, timeout=240, progress=None, repeats=5,
                     launches=VALIDATE_LAUNCHES, fusion_threshold=scaling_model.HOROVOD_FUSION_THRESHOLD,
                     cycle_time_s=scaling_model.HOROVOD_CYCLE_TIME_S):
    """Horovod on this machine: for each number of ranks in `ranks`, predict the step from a
    one-worker run of the same training command (kvstore device, the same threads per rank) and
    Horovod's exchange of the model's gradients measured with a stand-in for the compute
    (`horovod_exchange`: the arrays handed over during the backward, as in training; at the
    `fusion_threshold` and `cycle_time_s` the runs are given: HOROVOD_FUSION_THRESHOLD,
    HOROVOD_CYCLE_TIME): t2 is the wait for the sums after the compute; then run `gluonperf.launch
    --engine horovod -n N` over `gluonperf.train --kvstore horovod --ctx cpu0` and compare. As
    in `validate_dist`: ranks get the cores their background threads leave (`_threads`), they
    share the cores (compute_units), the compute lasts at least the CPU time of the ranks (each
    as measured alone) and of their background threads (while the stand-in computed) over the
    cores (`scaling_model.cores_bound_s`), and at least the ranks' compute side by side
    (`_corun_step`) on the cores the background threads leave (`scaling_model.helpers_share_s`,
    their share measured while the stand-in computed), compute and the exchange do not overlap,
    and each of `repeats` timed epochs (after an untimed one) of each of `launches` runs of the
    job is one sample of the step; every run follows a calibration of its own, and t2 and the
    helpers' share are the geometric means of those. The record keeps `modelled_t2_s`, the
    exchange as `scaling_model.horovod_allreduce_s` models it on the measured loopback link (Gloo's ring
    runs over TCP on loopback), beside the measured t2 it predicts with."""
    from ..runtime import guard, horovod_launcher
    from ..runtime.threads import physical_cores
    horovod_launcher.require("validating Horovod")
    if any(n < 2 for n in ranks):
        raise UserError("a Horovod validation needs at least 2 ranks a job (got %s)" % ",".join(map(str, ranks)))
    shapes = gradient_shapes(model)
    nbytes, keys, _ = gradient_bytes(model)
    lnk = loopback_link(nbytes)
    cores = physical_cores()
    base_env = dict(_job_env(), HOROVOD_FUSION_THRESHOLD=str(int(fusion_threshold)),
                    HOROVOD_CYCLE_TIME="%g" % (cycle_time_s * 1e3))
    out, singles, coruns = [], {}, {}
    with guard.temp_dir(prefix="gluonperf-predict-") as tmp:
        for n in ranks:
            threads = _threads(cores, n, n)
            if threads not in singles:  # the measured per-rank step at this thread count
                singles[threads] = _single_step(model, per_worker_batch, steps, base_env, tmp, timeout, threads,
                                                repeats)
            single, cpu = singles[threads]
            if (threads, n) not in coruns:
                coruns[threads, n] = _corun_step(model, per_worker_batch, steps, base_env, tmp, timeout, threads, n,
                                                 repeats)
            corun, corun_cpu = coruns[threads, n]
            measured, calibrations = [], []
            for launch in range(launches):  # each run of the job after a calibration of its own
                calibrations.append(horovod_exchange(shapes, n, single, dict(base_env, OMP_NUM_THREADS=str(threads)),
                                                     tmp, timeout))
                measured += _run_job(["--engine", "horovod", "-n", str(n)], model, per_worker_batch, steps, n,
                                     repeats, "horovod", dict(base_env, OMP_NUM_THREADS=str(threads)),
                                     os.path.join(tmp, "horovod-%d-%d.json" % (n, launch)), timeout,
                                     "horovod %d ranks" % n)
                if progress:  # one tick a run of a job
                    progress()
            t2, helpers, calibrated = (_mean_step([c[i] for c in calibrations]) for i in range(3))
            helper_cores = helpers / calibrated  # cores the background threads kept busy meanwhile
            units = max(1, cores // threads)
            bound = scaling_model.cores_bound_s(cpu, n, cores, helpers)
            shared = scaling_model.helpers_share_s(corun, helper_cores, cores)
            t1 = max(scaling_model.compute_s(single, n, units), bound, shared)
            backward = scaling_model.BACKWARD_SHARE * t1
            modelled = scaling_model.horovod_allreduce_s(nbytes, n, lnk, keys, fusion_threshold, cycle_time_s,
                                                         backward)
            buffers = scaling_model.fused_buffers(nbytes, keys, fusion_threshold, backward, cycle_time_s)
            predicted = scaling_model.step_s(t1, t2, 0.0, overlap=False)
            out.append(_check("horovod", predicted, measured, per_worker_batch * n, what=_launch_note(launches),
                              launches=launches,
                              devices=1, workers=n, servers=None, threads=threads,
                              per_device_batch=per_worker_batch, t1_s=t1, t2_s=t2, modelled_t2_s=modelled,
                              measured_single_s=single, worker_cpu_s=cpu, helper_cpu_s=helpers,
                              cores_bound_s=bound, corun_step_s=corun, corun_cpu_s=corun_cpu,
                              helper_cores=helper_cores, shared_compute_s=shared,
                              link_GBps=lnk.GBps, link_latency_s=lnk.latency_s, compute_units=units, keys=keys,
                              buffers=buffers, fusion_threshold_bytes=int(fusion_threshold),
                              cycle_time_s=cycle_time_s, processes=n,
                              **crowding(n, threads, {"Horovod background threads": n}, cores),
                              load=os.getloadavg()[0], model=model))
    return out

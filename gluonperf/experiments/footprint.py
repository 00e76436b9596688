"""The memory of a training step: where it goes, what each setting costs, how large a batch fits.

`footprint` runs each (configuration, batch size) of a model (hybridize none / hybrid / static,
gradient checkpointing with N segments or not) in a fresh Python process
(`run_step_footprint`); the worker (`step_footprint`) takes the process's memory as the
baseline after building the model, its gradients and the optimizer, and samples RSS (device
memory on GPU contexts) during timed training steps. With a `budget`, `largest_batch` predicts
the largest batch that fits and confirms it by runs (at most MAX_CONFIRM_RUNS).

The one thing to know: one process per run, so that no allocator state or cached graph
carries over; the runs are not interleaved, so memory figures are robust to load and times are
not. What each figure holds: docs/commands/bench.md, "python -m gluonperf.bench footprint".
"""
import gc
import math
import statistics
import subprocess
from dataclasses import dataclass

import mxnet as mx
import numpy as np

from .. import UserError
from .. import config
from ..runtime import precision, transport
from ..measure.harness import Benchmark, Measurement, ndarrays_in
from ..measure.memory import MemorySampler, device_memory_used, rss
from ..records import result

HYBRIDIZE = tuple(config.HYBRIDIZE)
MAX_CONFIRM_RUNS = 3


def config_name(hybridize, checkpoint):
    return hybridize + (" ckpt%d" % checkpoint if checkpoint else "")


# --- counting the model's bytes ------------------------------------------------------

def _nbytes(array):
    return array.size * np.dtype(array.dtype).itemsize


def model_bytes(net, trainer, contexts):
    """{'param_bytes', 'grad_bytes', 'state_bytes'} summed over every context's copy:
    parameters (aux states included), gradient buffers, and the optimizer states the
    trainer holds (created by its first update)."""
    params = list(net.collect_params().values())
    out = {"param_bytes": sum(_nbytes(p.data(c)) for p in params for c in contexts),
           "grad_bytes": sum(_nbytes(p.grad(c)) for p in params if p.grad_req != "null" for c in contexts)}
    states = 0
    for updater in getattr(trainer, "_updaters", None) or []:  # one per context
        for state in updater.states.values():
            states += sum(_nbytes(a) for a in ndarrays_in(state))
    out["state_bytes"] = states
    return out


def parameter_bytes(model, classes=10):
    """Bytes of one copy of `model`'s parameters (aux states included), from symbolic
    shape inference: nothing is allocated."""
    from ..training.model_spec import as_spec
    from ..training.models import get_model, input_shape
    spec = as_spec(model)
    net = get_model(spec, classes)
    out = net(mx.sym.var("data"))
    arg_shapes, _, aux_shapes = out.infer_shape(data=(1,) + tuple(input_shape(spec)))
    shapes = dict(zip(out.list_arguments(), arg_shapes))
    shapes.update(zip(out.list_auxiliary_states(), aux_shapes))
    total = 0
    for name, p in net.collect_params().items():
        total += int(np.prod(shapes[name])) * np.dtype(p.dtype).itemsize
    return total


# --- one configuration, in this process ----------------------------------------------------

def _memory_now(contexts):
    gpus = [c for c in contexts if c.device_type == "gpu"]
    if gpus:
        return sum(device_memory_used(c) for c in gpus)
    return rss()


def _peak(usage, contexts):
    """The peak a MemoryUsage saw: device memory summed over GPU contexts, else RSS."""
    if any(c.device_type == "gpu" for c in contexts):
        return sum(usage.device_peak.values())
    return usage.rss_peak


def check_dtype(dtype, contexts, checkpoint=(0,)):
    """UserError for a dtype the step cannot run here: unknown, bfloat16 off the CPU, or
    bfloat16 with checkpointing (MXNet 1.9.1's AMP breaks the recomputed segments' backward)."""
    if dtype == "bfloat16" and any(checkpoint):  # flags that conflict on any machine: said first
        raise UserError("checkpointing does not work with bfloat16 (MXNet 1.9.1's AMP breaks the recomputed "
                        "segments' backward); use --checkpoint 0")
    precision.check_flag(dtype, contexts)


@dataclass(frozen=True)
class StepSettings:
    """What every run of a footprint shares: the model (a ModelSpec, or its text), the contexts
    the batch is split over, `warmup` then `steps` training steps, the seed, the learning rate,
    the dtype ('bfloat16': mixed precision, as `train --dtype bfloat16` runs it) and the
    optimizer."""
    model: object
    contexts: list
    steps: int = 5
    warmup: int = 1
    seed: int = 0
    lr: float = 0.1
    dtype: str = "float32"
    optimizer: str = "sgd"


def step_footprint(settings, batch_size, hybridize="static", checkpoint=0):
    """Build the model of `settings`, run its warm-up then its training steps at `batch_size`
    (split over its contexts), hybridized as `hybridize` says and cut into `checkpoint`
    segments (0: none), and return a flat dict of what they used (its fields: docs/commands/bench.md,
    footprint's "How to read it").
    Meant to run alone in a fresh process (`run_step_footprint`)."""
    from mxnet import autograd, gluon
    from ..training.data import CLASSES
    from ..training.model_spec import as_spec
    from ..training.models import get_model, input_shape, loss_of, random_input
    from ..training.recompute import checkpointed
    from ..config import HYBRIDIZE, TrainConfig
    from ..training.steps import forward_backward
    from ..training.trainers import make_trainer
    contexts, spec = list(settings.contexts), as_spec(settings.model)
    steps, warmup, seed, lr, dtype, optimizer = (settings.steps, settings.warmup, settings.seed, settings.lr,
                                                 settings.dtype, settings.optimizer)
    if batch_size < len(contexts):
        raise UserError("batch %d is smaller than the %d contexts" % (batch_size, len(contexts)))
    check_dtype(dtype, contexts, [checkpoint])
    precision.enable(dtype, contexts)  # asks for AMX in this worker; the command set DNNL_MAX_CPU_ISA
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    shape = tuple(input_shape(spec))
    net = get_model(spec, CLASSES, contexts)
    net.initialize(mx.init.Xavier(), ctx=contexts)
    with autograd.pause():  # allocate the parameters (imperatively: no cached graph yet)
        for ctx in contexts:
            net(mx.nd.zeros((1,) + shape, ctx=ctx))
    flags = HYBRIDIZE[hybridize]
    if checkpoint:
        step_fn = checkpointed(net, checkpoint, shape, flags)
    else:
        step_fn = forward_backward
        if flags is not None:
            net.hybridize(**flags)
    x = mx.nd.array(random_input(spec, batch_size, rng), dtype=spec.input_dtype)
    y = mx.nd.array(rng.randint(0, CLASSES, size=batch_size))
    xs = gluon.utils.split_and_load(x, contexts, even_split=False)
    ys = gluon.utils.split_and_load(y, contexts, even_split=False)
    del x, y
    config = TrainConfig(model=spec, hybridize=hybridize, batch_size=batch_size, lr=lr, optimizer=optimizer)
    trainer = make_trainer(net, config, lr, kvstore=config.kvstore)
    loss_fn = loss_of(spec)

    def step():
        step_fn(net, loss_fn, xs, ys)
        trainer.step(batch_size)

    mx.nd.waitall()
    gc.collect()
    base = _memory_now(contexts)
    with Benchmark(memory=True, contexts=contexts) as first:
        for _ in range(warmup):
            step()
    counted = model_bytes(net, trainer, contexts)
    times, peaks = [], []
    for _ in range(steps):
        sampler = MemorySampler(contexts).start()
        try:
            with Benchmark() as b:
                step()
        finally:
            usage = sampler.stop()
        times.append(b.seconds)
        peaks.append(_peak(usage, contexts))
    on_device = any(c.device_type == "gpu" for c in contexts)
    peak, warm_peak = max(peaks), _peak(first.memory, contexts)
    above = peak - base - counted["state_bytes"]
    model_total = counted["param_bytes"] + counted["grad_bytes"] + counted["state_bytes"]
    m = Measurement("step", tuple(times))
    return dict(
        model=spec.text, batch_size=batch_size, hybridize=hybridize, checkpoint=checkpoint, dtype=dtype,
        optimizer=optimizer, contexts=",".join(str(c) for c in contexts), memory="device" if on_device else "rss",
        steps=steps, warmup=warmup, step_samples_s=list(times),
        base_bytes=base, peak_bytes=peak, warmup_peak_above_bytes=warm_peak - base - counted["state_bytes"],
        model_bytes=model_total, peak_above_bytes=above, needs_bytes=model_total + above,
        bytes_per_sample=above / batch_size, step_s=m.median, images_per_s=batch_size / m.median,
        step_peak_above_bytes=[p - base - counted["state_bytes"] for p in peaks], **counted)


def run_step_footprint(params, timeout=None):
    """`step_footprint` in a fresh Python process (in its own process group, stopped with the
    command on a signal or a stall) for `params`, the fields of a StepSettings ('contexts' a
    string), `batch_size`, `hybridize` and `checkpoint`; returns its dict, or raises
    RuntimeError with the worker's last line of error output."""
    what = "%s at batch %d" % (config_name(params["hybridize"], params.get("checkpoint", 0)), params["batch_size"])
    return transport.run_worker("gluonperf.workers.footprint", params, what, timeout=timeout)


# --- the sweep ----------------------------------------------------------------------------

def _run(params, timeout):
    try:
        return run_step_footprint(params, timeout)
    except (RuntimeError, subprocess.TimeoutExpired) as e:  # e.g. out of memory: keep the others
        return {"batch_size": params["batch_size"], "hybridize": params["hybridize"],
                "checkpoint": params["checkpoint"], "error": str(e).splitlines()[0]}


def _repeated(params, repeat, timeout, progress=None):
    """`repeat` fresh processes of one configuration, merged into one row: the median
    peak above the model (and `needs_bytes` from it), its min and max over the
    processes, the step times of all of them. glibc's malloc makes the peak RSS of the
    same run differ from process to process (by up to 20% for ResNet-18 hybridized),
    which one process cannot show."""
    rows = []
    for _ in range(repeat):
        rows.append(_run(params, timeout))
        if progress is not None:
            progress()
        if "error" in rows[-1]:
            return rows[-1]
    if repeat == 1:
        return rows[0]
    above = sorted(r["peak_above_bytes"] for r in rows)
    mid = statistics.median(above)
    row = dict(min(rows, key=lambda r: abs(r["peak_above_bytes"] - mid)))
    times = [t for r in rows for t in r["step_samples_s"]]
    row.update(peak_above_bytes=mid, needs_bytes=row["model_bytes"] + mid, bytes_per_sample=mid / row["batch_size"],
               peak_above_min_bytes=above[0], peak_above_max_bytes=above[-1], processes=repeat,
               step_samples_s=times, step_s=statistics.median(times),
               images_per_s=row["batch_size"] / statistics.median(times))
    return row


def _row(row):
    row = dict(row)
    name = config_name(row["hybridize"], row["checkpoint"])
    samples = row.pop("step_samples_s", None)
    if samples:
        return result("footprint", name, Measurement(name, tuple(samples)), **row)
    return result("footprint", name, **row)


def fit_line(points):
    """(intercept, slope) of needs_bytes against batch size: the line through the points
    of the smallest and the largest batch, or, for one batch, through it and the model's
    own bytes at batch 0."""
    a, b = min(points, key=lambda p: p["batch_size"]), max(points, key=lambda p: p["batch_size"])
    if a["batch_size"] != b["batch_size"]:
        slope = (b["needs_bytes"] - a["needs_bytes"]) / (b["batch_size"] - a["batch_size"])
        return float(a["needs_bytes"] - slope * a["batch_size"]), float(slope)
    p = points[0]
    return float(p["model_bytes"]), float(p["peak_above_bytes"]) / p["batch_size"]


def _nearest(points, budget):
    """The points the next prediction is drawn through: the largest batch that fits and
    the smallest that does not (the budget lies between them); else, on the one side
    there is, the smallest and the largest batch (the widest base: from one process to
    the next the peak varies by some per cent, which two close batches would turn into
    a wild slope); else the one point."""
    fit = sorted((p for p in points if p["needs_bytes"] <= budget), key=lambda p: p["batch_size"])
    over = sorted((p for p in points if p["needs_bytes"] > budget), key=lambda p: p["batch_size"])
    if fit and over:
        return [fit[-1], over[0]]
    side = fit or over
    return [side[0], side[-1]]


def largest_batch(points, budget, run, min_batch=1, max_runs=MAX_CONFIRM_RUNS):
    """The largest batch whose `needs_bytes` fits `budget`. Predicted from the line
    through the measured `points` around the budget (`_nearest`; dicts with batch_size,
    needs_bytes, model_bytes, peak_above_bytes; a point with 'error' counts as not
    fitting), then confirmed by `run(batch)`, which returns such a dict. Each run joins
    the points and the line is drawn again (a secant search: the per-sample cost often
    falls with the batch, so a first straight line tends to be cautious), until a
    prediction brings nothing new or `max_runs` runs were made; where the line points
    beyond a batch that did not fit (or failed), the gap is halved instead. Returns a dict for the
    budget row: the first prediction, the largest batch confirmed to fit (0: none), its
    needs and images/s, the smallest batch seen not to fit (`over_batch`; the answer
    lies below it), the runs made."""
    measured = [p for p in points if "error" not in p]
    failed = [p["batch_size"] for p in points if "error" in p]
    if not measured:
        return {"budget_bytes": budget, "error": "no batch size ran"}
    out = {"budget_bytes": budget, "confirm_runs": 0}
    while True:
        fitting = [p for p in measured if p["needs_bytes"] <= budget]
        best = max(fitting, key=lambda p: p["batch_size"]) if fitting else None
        low = best["batch_size"] if best else 0
        high = min([p["batch_size"] for p in measured if p["needs_bytes"] > budget] + failed + [2 ** 62])
        intercept, slope = fit_line(_nearest(measured, budget))
        if slope <= 0:
            out["error"] = "memory does not grow with the batch size here; cannot extrapolate"
            break
        batch = int(math.floor((budget - intercept) / slope + 1e-9))
        out.setdefault("predicted_batch", batch)
        out.update(fit_intercept_bytes=intercept, fit_bytes_per_sample=slope)
        if batch >= high:  # the line overshoots a batch that did not fit or did not run: halve the gap
            batch = (low + high) // 2
        if batch <= low or batch < min_batch or out["confirm_runs"] >= max_runs:
            break
        row = run(batch)
        out["confirm_runs"] += 1
        if "error" in row:
            failed.append(batch)
            out["error"] = row["error"]
        else:
            measured.append(row)
    high = min([p["batch_size"] for p in measured if p["needs_bytes"] > budget] + failed + [2 ** 62])
    out.update(largest_batch=low, over_batch=high if high < 2 ** 62 else None, fits=best is not None,
               needs_bytes=best["needs_bytes"] if best else None,
               images_per_s=best.get("images_per_s") if best else None)
    return out


def why_not_cut(model, n):
    """Why checkpointing cannot cut `model` into `n` segments ('' when it can)."""
    from ..training.model_spec import as_spec
    from ..training.models import get_model, input_shape
    from ..training.recompute import segments
    spec = as_spec(model)
    try:
        segments(get_model(spec), n, input_shape(spec))
    except ValueError as e:
        return str(e)
    return ""


def effective_configs(hybridize, checkpoint):
    """The (hybridize, segments) pairs to run, in order, without repeats: with
    checkpointing, 'static' runs as 'hybrid' (segments are never statically allocated,
    see gluonperf.training.recompute). An unknown setting or a negative count: UserError."""
    for h in hybridize:
        if h not in HYBRIDIZE:
            raise UserError("unknown hybridize setting %r; choose from %s" % (h, ",".join(HYBRIDIZE)))
    if any(c < 0 for c in checkpoint):
        raise UserError("checkpoint segments must be 0 (off) or more")
    out = []
    for h in hybridize:
        for c in checkpoint:
            pair = ("hybrid" if c and h == "static" else h, c)
            if pair not in out:
                out.append(pair)
    return out


def footprint(settings, batch_sizes, configs=tuple(effective_configs(HYBRIDIZE, (0,))), budgets=(), repeat=1,
              timeout=None, progress=None, runs=None):
    """`repeat` fresh processes per (hybridize, checkpoint) pair of `configs`
    (`effective_configs`) and batch size, each running the step as `settings` (a StepSettings)
    say and taking at most `timeout` seconds (None: no limit), merged by `_repeated` (the
    median peak, with its min and max); see the module's docstring. Returns one Result per run
    (bench 'footprint', name e.g. 'static ckpt4', metrics of `step_footprint`, plus
    `peak_vs_plain` and `time_vs_plain` against the same hybridize setting without
    checkpointing at the same batch; 'static' with checkpointing runs as 'hybrid', see
    `effective_configs`), then, for each of
    `budgets` (bytes), one Result per configuration (bench 'footprint-budget') with the
    largest batch that fits. A run that fails (e.g. out of memory) is a row with `error`.
    `progress()` is called after every process. `runs`, a dict given by the caller, is
    filled as the runs end ({(hybridize, checkpoint, batch): row}; `rows_of` makes them
    Results): what a command that is stopped still has."""
    from ..runtime.contexts import describe
    from ..training.model_spec import as_spec
    from ..training.models import get_model
    contexts, spec = list(settings.contexts), as_spec(settings.model)
    get_model(spec)  # an unknown name fails before any work
    checkpoint = [c for _, c in configs]
    check_dtype(settings.dtype, contexts, checkpoint)
    small = [b for b in batch_sizes if b < len(contexts)]
    if small:
        raise UserError("batch size %d is smaller than the %d contexts; every context needs a sample"
                        % (small[0], len(contexts)))
    if budgets:
        params = parameter_bytes(spec) * len(contexts)
    for budget in budgets:
        if budget < params:
            raise UserError("budget %.1f MiB is below the %.1f MiB that %s's parameters alone take (on %d "
                            "context%s); raise it" % (budget / 2 ** 20, params / 2 ** 20, spec.text, len(contexts),
                                                     "s" if len(contexts) > 1 else ""))
    if checkpoint and max(checkpoint) > 0:  # a model that cannot be cut fails here, before any work
        why = why_not_cut(spec, max(checkpoint))
        if why:
            raise UserError(why)
    ctx_text = describe(contexts)

    def params_for(h, c, batch):
        return {"model": spec.text, "batch_size": batch, "contexts": ctx_text, "hybridize": h, "checkpoint": c,
                "steps": settings.steps, "warmup": settings.warmup, "seed": settings.seed, "lr": settings.lr,
                "dtype": settings.dtype, "optimizer": settings.optimizer}

    runs = {} if runs is None else runs

    def run(h, c, batch):
        if (h, c, batch) not in runs:
            runs[h, c, batch] = _repeated(params_for(h, c, batch), repeat, timeout, progress)
        return runs[h, c, batch]

    for h, c in configs:
        for batch in batch_sizes:
            run(h, c, batch)
    budget_rows = []
    for budget in budgets:
        for h, c in configs:
            points = [row for (rh, rc, _), row in runs.items() if (rh, rc) == (h, c)]
            found = largest_batch(points, budget, lambda batch, h=h, c=c: run(h, c, batch),
                                  min_batch=len(contexts))
            budget_rows.append(result("footprint-budget", config_name(h, c), model=spec.text, hybridize=h,
                                      checkpoint=c, **found))
    return rows_of(runs, configs) + budget_rows


def rows_of(runs, configs):
    """Every finished run of `footprint` (the budgets' confirming runs too) as a Result, in the
    order of `configs` (`effective_configs`) and batch size, checkpointed runs with their ratios
    to the plain one."""
    rows = []
    for h, c, batch in sorted(runs, key=lambda k: (configs.index(k[:2]), k[2])):
        row = dict(runs[h, c, batch])
        plain = runs.get((h, 0, batch))
        if c and plain and "error" not in plain and "error" not in row:
            row["peak_vs_plain"] = row["peak_above_bytes"] / max(plain["peak_above_bytes"], 1)
            row["time_vs_plain"] = row["step_s"] / plain["step_s"]
        rows.append(_row(row))
    return rows

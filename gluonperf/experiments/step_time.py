"""Where a training step's time goes, held against the machine's ceiling.

Three measurements of one training configuration (`training.TrainConfig`, the same
model, data loader, Trainer and loop as `gluonperf.train`), each returning Results:

- `breakdown`: steps fenced by a sync after each part, so that the parts add up to the
  fenced step, interleaved with unfenced steps as `gluonperf.train` runs them; no profiler;
- `operator_table`: MXNet's profiler over steps as `gluonperf.train` runs them; it must run in
  a fresh process started with MXNET_EXEC_BULK_EXEC_TRAIN=0 (the command starts one);
- `verdict`: achieved training FLOP/s against the ceiling, and the largest losses.

FLOPs come from `flops.count_flops`, the ceiling from `ceiling.measure_ceiling`. What each
table holds, and why the operators need their own process: docs/commands/profile.md.
"""
import itertools
import os
import time
from dataclasses import dataclass

import mxnet as mx
from mxnet import autograd, gluon

from .. import UserError
from ..runtime import guard
from ..measure.harness import Measurement, sync
from ..runtime.contexts import describe
from ..training.data import load_for, loader, sample_shape
from ..runtime.precision import check_flag
from ..measure.operators import GAPS, WAITING, busy_seconds, context_waits, phase
from ..measure.trace import Trace, aggregate_stats
from ..records import result
from ..training.steps import EpochStats, as_float32, split, train_steps
from ..training.trainers import build_net, lr_for_devices, make_trainer, with_spec
from ..training.models import loss_of
from ..training.model_spec import text_of

PARTS = (
    ("load", "next batch (loader)"),
    ("copy", "copy to contexts"),
    ("forward", "forward"),
    ("backward", "backward"),
    ("allreduce", "allreduce_grads"),
    ("update", "optimizer update"),
    ("metrics", "loss + accuracy"),
)
REST = ("rest", "rest (Python between parts)")
RUN_TIMED = "timed"        # this process, no profiler, bulk execution as in training
RUN_PROFILED = "profiled"  # a process with MXNET_EXEC_BULK_EXEC_TRAIN=0 and the profiler on
BULK_VARIABLE = "MXNET_EXEC_BULK_EXEC_TRAIN"
SLOWER_PROFILED = 1.25  # a profiled step this much slower than the fenced one earns a caveat
SAMPLE_SHAPE = (1, 28, 28)  # every data set of gluonperf.training.data yields 1x28x28 images


@dataclass
class Setup:
    """What a training step needs: as `training.fit` builds it."""
    net: gluon.Block
    trainer: gluon.Trainer
    loss_fn: gluon.loss.Loss
    batches: object  # an endless iterator of (x, y) from the DataLoader
    contexts: list
    sample_shape: tuple
    stats: EpochStats


def update_operators(config, contexts):
    """'adam: adam_update': the optimizer and the operators its update runs (gluonperf.training.optimizers)."""
    from ..training.optimizers import update_operators
    return "%s: %s" % (config.optimizer, update_operators(config.optimizer, config.momentum, [c.device_type for c in contexts]))


def check_config(config, contexts):
    """UserError for a configuration this experiment cannot run."""
    if config.kvstore.startswith("dist"):
        raise UserError("--kvstore %s: profile runs on the contexts of one machine (it starts a second "
                        "process for the operator table); use --kvstore flat, device or local" % config.kvstore)
    if config.batch_size < len(contexts):
        raise UserError("--batch-size %d is smaller than the number of contexts (%d); every context "
                        "needs at least one sample per batch" % (config.batch_size, len(contexts)))
    check_flag(config.dtype, contexts)


def endless(data):
    """Batches of a DataLoader, epoch after epoch (reshuffled per epoch)."""
    for epoch in itertools.count():
        data.sampler.set_epoch(epoch)
        for batch in data:
            yield batch


def prepare(config, contexts):
    """Model on every context, Trainer over config.kvstore, loss, and an endless loader
    over the training set: the pieces `training.fit` uses (constant learning rate). `config.model`:
    a ModelSpec, or its text, parsed here once (`with_spec`)."""
    contexts, config = list(contexts), with_spec(config)
    check_config(config, contexts)
    train_set, _ = load_for(config)
    data = loader(train_set, config.batch_size, shuffle=True, workers=config.workers, last_batch="discard",
                  seed=config.seed)
    if len(data) == 0:
        raise UserError("--batch-size %d is larger than the %d training samples; lower it or raise --limit"
                        % (config.batch_size, len(train_set)))
    mx.random.seed(config.seed)
    net = build_net(config, contexts)
    trainer = make_trainer(net, config, lr_for_devices(config, len(contexts)), None, config.kvstore)
    return Setup(net, trainer, loss_of(config.model), endless(data), contexts,
                 tuple(train_set[0][0].shape), EpochStats())


def setup_blocks(setup, depth=2, repeat=10, warmup=1, peak_flops=None, progress=None):
    """`measure.blocks.block_profile` of a training setup (`prepare`'s Setup: the model as
    `gluonperf.train` builds it, its loss and loader) on the first context, with that context's
    part of the next batch."""
    from ..measure.blocks import Loss, block_profile
    from ..measure.timing import Timing
    x, y = next(setup.batches)
    ctx = setup.contexts[0]
    x, y = split(x, setup.contexts)[0], split(y, setup.contexts)[0]
    loss_fn = setup.loss_fn
    return block_profile(setup.net, [x], ctx, depth, Timing(repeat=repeat, warmup=warmup, progress=progress),
                         Loss(lambda out, labels: loss_fn(as_float32(out), labels), y), peak_flops)


def fenced_step(s):
    """One training step with a sync after each part; returns the clock after each
    (the first value is the start)."""
    marks = [time.perf_counter()]

    def fence():
        sync()
        marks.append(time.perf_counter())
    x, y = next(s.batches)
    fence()
    xs, ys = split(x, s.contexts), split(y, s.contexts)
    fence()
    with autograd.record():
        outputs = [as_float32(s.net(a)) for a in xs]
        losses = [s.loss_fn(o, b) for o, b in zip(outputs, ys)]
    fence()
    autograd.backward(losses)
    fence()
    s.trainer.allreduce_grads()
    fence()
    s.trainer.update(x.shape[0])
    fence()
    s.stats.add(x.shape[0], losses, outputs, ys)  # as gluonperf.train does, for its epoch figures
    fence()
    return marks


def unfenced_steps(s, steps, progress=None):
    """`steps` steps as `gluonperf.train` runs them (`steps.train_steps`, losses and
    accuracy read one batch late); seconds per step, timed to a sync."""
    stats = EpochStats()
    sync()
    start = time.perf_counter()
    for _, n, losses, outputs, labels in train_steps(s.net, s.trainer, s.loss_fn,
                                                     itertools.islice(s.batches, steps), s.contexts):
        stats.add(n, losses, outputs, labels)
        if progress:
            progress()
    sync()
    return (time.perf_counter() - start) / steps


def _fenced_run(s, steps, progress):
    """Per-step part times {key: [seconds]} and whole fenced steps (start to next start)."""
    marks = []
    for _ in range(steps):
        marks.append(fenced_step(s))
        if progress:
            progress()
    end = time.perf_counter()
    parts = {key: [m[i + 1] - m[i] for m in marks] for i, (key, _) in enumerate(PARTS)}
    starts = [m[0] for m in marks] + [end]
    whole = [b - a for a, b in zip(starts, starts[1:])]
    parts[REST[0]] = [w - (m[-1] - m[0]) for w, m in zip(whole, marks)]
    return parts, whole


def middle_half(samples):
    """Indices of the samples between the quartiles (at least one): the typical ones,
    over which a mean is as robust as a median and its parts still add up."""
    order = sorted(range(len(samples)), key=lambda i: samples[i])
    cut = len(samples) // 4
    return order[cut:len(samples) - cut] or order[:1]


def breakdown(config, contexts, steps=10, warmup=3, rounds=2, progress=None, setup=None):
    """The fenced step split into its parts, and the unfenced step beside it.

    `steps` fenced and `steps` unfenced steps after `warmup` of each, in `rounds`
    interleaved rounds (the order alternates). Returns Results (bench='breakdown'):
    one per part, then 'fenced step', 'unfenced step' (as gluonperf.train runs it, median
    of the rounds) and 'hidden by overlap' (their difference). The parts and the fenced
    step are means over the typical fenced steps (`middle_half` by step time: as robust
    as a median on a busy machine, and the parts add up to the step); each record also
    has the statistics of all its samples (median_s, iqr_s, ...).
    `progress()` is called after every step; `setup`: a `prepare(config, contexts)` made
    earlier (e.g. to refuse bad data settings before other work), else one is made here."""
    s = setup or prepare(config, contexts)
    for _ in range(warmup):  # deferred initialisation, graph building, kvstore set-up
        fenced_step(s)
        if progress:
            progress()
    if warmup:
        unfenced_steps(s, warmup, progress)
    rounds = max(1, min(rounds, steps))
    chunks = [steps // rounds + (1 if r < steps % rounds else 0) for r in range(rounds)]
    parts = {key: [] for key, _ in PARTS + (REST,)}
    whole, unfenced = [], []
    for r, n in enumerate(chunks):
        order = ("unfenced", "fenced") if r % 2 == 0 else ("fenced", "unfenced")
        for kind in order:
            if kind == "fenced":
                p, w = _fenced_run(s, n, progress)
                for key in parts:
                    parts[key].extend(p[key])
                whole.extend(w)
            else:
                unfenced.append(unfenced_steps(s, n, progress))
    step = Measurement("fenced step", tuple(whole))
    free = Measurement("unfenced step", tuple(unfenced), number=steps // len(unfenced))
    middle = middle_half(whole)
    typical = sum(whole[i] for i in middle) / len(middle)
    batch = config.batch_size
    common = dict(model=text_of(config.model), batch_size=batch, contexts=describe(s.contexts),
                  hybridize=config.hybridize, kvstore=config.kvstore, dataset=config.dataset, steps=steps, run=RUN_TIMED)
    out = []
    for key, label in PARTS + (REST,):
        seconds = sum(parts[key][i] for i in middle) / len(middle)
        part = label if key != "update" else "%s (%s)" % (label, update_operators(config, s.contexts))
        out.append(result("breakdown", label, Measurement(label, tuple(parts[key])), part=part, time_s=seconds,
                          share=seconds / typical, **common))
    out.append(result("breakdown", "fenced step", step, part="fenced step", time_s=typical, share=1.0,
                      images_per_s=batch / typical, typical_steps=len(middle), **common))
    out.append(result("breakdown", "unfenced step", free, part="unfenced step (as gluonperf.train)",
                      time_s=free.median, share=free.median / typical, images_per_s=batch / free.median,
                      **common))
    hidden = typical - free.median
    out.append(result("breakdown", "hidden by overlap", part="hidden by overlap (fenced - unfenced)",
                      time_s=hidden, share=hidden / typical, **common))
    return out


# --- the operator table ----------------------------------------------------------------

def operator_table(config, contexts, steps=10, warmup=3, trace_path=None, flops=None, progress=None):
    """MXNet's profiler over `steps` steps as `gluonperf.train` runs them (after `warmup`).

    Run it in a process started with MXNET_EXEC_BULK_EXEC_TRAIN=0 whose profiler was not
    used before (the records say which bulk setting was in force). `flops`: a
    flops.FlopCount of the model, to give each operator with a count its FLOPs per step.
    Returns Results (bench='operators'): one per operator (calls and seconds per step,
    share of the profiled step, phase, FLOPs per step), sorted by time, then
    'profiled step': its seconds, the operators' sum and the time at least one operator ran
    (busy), as shares of it. The Chrome trace is kept at `trace_path` if given."""
    s = prepare(config, contexts)
    if flops is None:
        flops = model_flops(config, contexts)
    unfenced_steps(s, max(1, warmup), progress)
    with guard.temp_dir(prefix="gluonperf-profile-") as tmp:
        trace = Trace(trace_path or os.path.join(tmp, "trace.json"), aggregate_stats=True,
                      profile_symbolic=True, profile_imperative=True)
        with trace:
            start = time.perf_counter()
            unfenced_steps(s, steps, progress)
            wall = time.perf_counter() - start
        stats = aggregate_stats()
        data = trace.dump()
    step = wall / steps
    busy = busy_seconds(data) / steps
    waits = context_waits(data, s.contexts)
    batch = config.batch_size
    bulk = os.environ.get(BULK_VARIABLE, "unset (bulk execution on)")
    common = dict(model=text_of(config.model), batch_size=batch, contexts=describe(s.contexts),
                  hybridize=config.hybridize, kvstore=config.kvstore, steps=steps, run=RUN_PROFILED, bulk_exec_train=bulk)
    rows = []
    for name, stat in stats.get("Time", {}).get("operator", {}).items():
        seconds = stat["Total"] / 1000.0 / steps
        per_image = flops.op_flops(name) if flops else None
        rows.append(result("operators", name, op=name, phase=phase(name), calls_per_step=stat["Count"] / steps,
                           time_s=seconds, share=seconds / step,
                           flops=None if per_image is None else per_image * batch, **common))
    for name, seconds in waits.items():
        rows.append(result("operators", WAITING % name, op=WAITING % name, phase="wait", time_s=seconds / steps,
                           share=seconds / steps / step, **common))
    rows.sort(key=lambda r: -r.metrics["time_s"])
    total = sum(r.metrics["time_s"] for r in rows if r.metrics["phase"] not in ("sync", "wait"))
    rows.append(result("operators", "profiled step", op="profiled step", step_s=step, time_s=step,
                       operators_s=total, operator_share=total / step, busy_s=busy, busy_share=min(1.0, busy / step),
                       unattributed_share=max(0.0, 1.0 - busy / step), **common))
    return rows


def gap_row(summary):
    """The operator table's row for the time no operator ran (from the 'profiled step' record)."""
    m = summary.metrics
    return result("operators", GAPS, op=GAPS, phase="-", time_s=m["step_s"] - m["busy_s"],
                  share=m["unattributed_share"], run=m["run"])


# --- the verdict ---------------------------------------------------------------------

def describe_op(name):
    """'Convolution forward', 'BatchNorm backward', 'multi_sgd_mom_update (update)'."""
    if name == GAPS:
        return "Python/engine gaps (no operator running)"
    if name.endswith(WAITING % ""):
        return "%s idle while other contexts worked" % name[:-len(WAITING % "")].strip()
    if name.startswith("_backward_"):
        return "%s backward" % name[len("_backward_"):]
    p = phase(name)
    return "%s %s" % (name, "forward" if p == "forward" else "(%s)" % p)


def verdict(flops, ceiling_results, breakdown_results, operator_results, contexts, top=3):
    """Achieved training FLOP/s against the ceiling, and the `top` largest losses.

    A loss is an operator's time per step beyond what its FLOPs would take at the ceiling
    (all of it for operators without a FLOP count), or the time no operator ran; the
    largest are named with their share of the (profiled) step. Returns Results
    (bench='verdict'): 'achieved', then 'loss 1'..'loss N', each with a `finding` sentence."""
    from ..measure.ceiling import ceiling_devices, ceiling_flops
    peak = ceiling_flops(ceiling_results) * ceiling_devices(contexts)
    by_name = {r.name: r.metrics for r in breakdown_results}
    unfenced = by_name["unfenced step"]
    images_per_s = unfenced["images_per_s"]
    if flops is None:
        out = [result("verdict", "achieved",
                      finding="training (as gluonperf.train runs it): %.4g images/s; its FLOPs are not known (they are "
                              "counted from the model's symbol graph, which a model that cannot be hybridized does "
                              "not have), so neither is its share of the ceiling" % images_per_s,
                      share=1.0, images_per_s=images_per_s, ceiling_gflop_per_s=peak / 1e9, run=RUN_TIMED)]
        achieved = 0.0
    else:
        achieved = flops.training * images_per_s
        out = [result("verdict", "achieved",
                      finding="training (as gluonperf.train runs it): %.4g images/s x %.4g GFLOP per image = "
                              "%.4g GFLOP/s, %.1f%% of the ceiling (%.4g GFLOP/s: at most %.4g images/s)"
                              % (images_per_s, flops.training / 1e9, achieved / 1e9, 100 * achieved / peak, peak / 1e9,
                                 peak / flops.training),
                      share=1.0, gflop_per_s=achieved / 1e9, of_ceiling=achieved / peak, images_per_s=images_per_s,
                      ceiling_images_per_s=peak / flops.training, training_flops_per_image=flops.training,
                      ceiling_gflop_per_s=peak / 1e9, run=RUN_TIMED)]
    summary = next(r for r in operator_results if r.name == "profiled step")
    ops = [r for r in operator_results if r.name != "profiled step" and r.metrics["phase"] != "sync"]
    ops.append(gap_row(summary))
    step = summary.metrics["step_s"]
    losses = []
    for r in ops:
        m = r.metrics
        ideal = (m.get("flops") or 0.0) / peak
        losses.append((m["time_s"] - ideal, r))
    losses.sort(key=lambda pair: -pair[0])
    for number, (lost, r) in enumerate(losses[:top], 1):
        m = r.metrics
        what = describe_op(r.name)
        if m.get("gflop_per_s"):
            text = "%s: %.0f%% of the step at %.3g GFLOP/s (%.0f%% of the ceiling)" % (
                what, 100 * m["share"], m["gflop_per_s"], 100 * m["of_ceiling"])
        elif r.name == GAPS or m.get("phase") == "wait":
            text = "%s: %.0f%% of the step" % (what, 100 * m["share"])
        else:
            text = "%s: %.0f%% of the step, no FLOPs counted" % (what, 100 * m["share"])
        out.append(result("verdict", "loss %d" % number, finding=text, share=m["share"],
                          gflop_per_s=m.get("gflop_per_s"), of_ceiling=m.get("of_ceiling"),
                          lost_s=lost, lost_share=lost / step, operator=r.name, run=RUN_PROFILED))
    fastest = max([achieved] + [r.metrics.get("gflop_per_s", 0) * 1e9 for r in ops])
    if fastest > peak:
        out.append(result("verdict", "caveat", finding=(
            "something ran at %.4g GFLOP/s, above the measured ceiling of %.4g: the peak was measured while other "
            "work slowed this machine (or with --ceiling quick); run again on a quieter machine"
            % (fastest / 1e9, peak / 1e9)), run=RUN_TIMED))
    fenced = by_name["fenced step"]["time_s"]
    if step > SLOWER_PROFILED * fenced:
        out.append(result("verdict", "caveat", finding=(
            "the profiled step took %.1fx the fenced one (%.4g vs %.4g ms): bulk execution off and the "
            "profiler cost that much here, so the losses' shares describe the profiled run"
            % (step / fenced, 1e3 * step, 1e3 * fenced)), ratio=step / fenced, run=RUN_PROFILED))
    return out


def work(flops, model, sample_shape, ceiling_results, contexts):
    """The model's FLOPs per training image by operator, and the ceiling in images/s.
    Returns Results (bench='work')."""
    from ..measure.ceiling import ceiling_devices, ceiling_flops
    peak = ceiling_flops(ceiling_results) * ceiling_devices(contexts)
    shape = "x".join(map(str, sample_shape))
    out = []
    if flops is None:  # a model that cannot be hybridized: no symbol graph to count
        return out
    for op in sorted(flops.forward_by_op, key=lambda k: -flops.forward_by_op[k]):
        fwd, bwd = flops.forward_by_op[op], flops.backward_by_op[op]
        out.append(result("work", op, op=op, layers=flops.layers_by_op[op], forward_gflop=fwd / 1e9,
                          backward_gflop=bwd / 1e9, training_gflop=(fwd + bwd) / 1e9, model=model, input=shape))
    out.append(result("work", "conv + dense multiply-adds", op="conv + dense multiply-adds (no bias)",
                      forward_gflop=flops.matmul_forward / 1e9, backward_gflop=2 * flops.matmul_forward / 1e9,
                      training_gflop=flops.matmul_training / 1e9, model=model, input=shape))
    out.append(result("work", "total", op="total", layers=sum(flops.layers_by_op.values()),
                      forward_gflop=flops.forward / 1e9, backward_gflop=flops.backward / 1e9,
                      training_gflop=flops.training / 1e9, ceiling_images_per_s=peak / flops.training,
                      ceiling_gflop_per_s=peak / 1e9, uncounted=",".join(flops.uncounted) or None,
                      model=model, input=shape))
    return out


def model_flops(config, contexts=None):
    """flops.FlopCount per training image of config.model on the data set's samples (1x28x28, or 3xSxS
    for image data at the model's input size S), as
    built for `contexts` (gluonperf.training.models fuses some operators on CPU contexts)."""
    from ..training.model_spec import as_spec
    from ..training.models import count_model_flops
    spec = as_spec(config.model)  # the command's ModelSpec, passed on; text (a library caller's) parsed
    if not spec.hybridizable:
        return None  # FLOPs are counted on the symbol graph, which such a model cannot give
    return count_model_flops(spec, sample_shape(config.dataset, spec), contexts=contexts)

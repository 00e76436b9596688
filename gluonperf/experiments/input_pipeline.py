"""The input pipeline: how fast images are loaded, and whether a training step waits for them.

- `bench_input` (python -m gluonperf.bench input): the loader alone, by source and number of
  workers, each stage's cost, and the training step's own rate, which its rates are set against;
- `input_bound` (python -m gluonperf.profile with --dataset PATH): the loop on the real loader
  against one batch held in memory, in alternating rounds: the share of each step spent waiting
  for data, with its interval and a verdict.

On CPU contexts the loader's workers and the step's operators share the same cores: the
loader's rate alone is then more than it delivers while training, and the records say so.
What each figure is, and how the interval is computed: docs/input.md.
Nothing here parses arguments or prints.
"""
import itertools
import math
import threading
import time
from dataclasses import dataclass
from typing import Optional

import mxnet as mx
import numpy as np
import psutil
from mxnet import gluon

from .. import UserError
from ..measure import stats
from ..runtime.contexts import describe
from ..records import result
from ..training.model_spec import text_of
from ..measure.timing import Timing

SOURCES = ("folder", "rec", "recorditer")


# --- memory of the process and its workers --------------------------------------------------

class TreeMemory:
    """Peak memory of this process plus its child processes (DataLoader workers), sampled every
    `interval` seconds on a background thread while the block runs. Each process counts its
    PSS (proportional set size: a page shared by k processes counts 1/k in each), so pages a
    forked worker shares with its parent count once; RSS where the system has no PSS."""

    def __init__(self, interval=0.05):
        self.interval, self.peak, self.before = interval, 0, 0
        self._stop = threading.Event()

    @staticmethod
    def _one(process):
        try:
            return getattr(process.memory_full_info(), "pss")
        except (AttributeError, psutil.AccessDenied):
            return process.memory_info().rss

    @classmethod
    def now(cls):
        me = psutil.Process()
        total = cls._one(me)
        for child in me.children(recursive=True):
            try:
                total += cls._one(child)
            except psutil.Error:
                pass
        return total

    def _run(self):
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.now())

    def __enter__(self):
        self.before = self.peak = self.now()
        self._thread = threading.Thread(target=self._run, name="gluonperf-tree-memory", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.now())
        return False


# --- pieces -------------------------------------------------------------------------------------

def _endless(data):
    for epoch in itertools.count():
        data.sampler.set_epoch(epoch)
        empty = True
        for batch in data:
            empty = False
            yield batch
        if empty:
            raise UserError("the data set has fewer images than one batch; lower --batch-size")


def _interval_fields(key, values, scale=1.0):
    """An Interval over positive per-repeat `values` (geometric mean, t on logs), as fields."""
    interval = stats.ratio_interval([v * scale for v in values])
    return interval, interval.fields(key)


def prefetch_depth(loader, workers):
    """How many batches a loader holds ready ahead of the loop (drained before timing)."""
    if hasattr(loader, "threads"):  # ImageRecordIter: its prefetch buffer (MXNet's default, 4)
        return 4
    return 2 * workers if workers else 0


def time_loader(batches, depth, count):
    """Seconds to take `count` batches from the iterator `batches`, after draining `depth`."""
    for _ in range(depth):
        next(batches)
    start = time.perf_counter()
    for _ in range(count):
        x, y = next(batches)
        x.wait_to_read()
    return time.perf_counter() - start


def image_sets(path, model, source, bad_images="stop"):
    """The training ImageSet of `path` for `source` (folder, rec or recorditer)."""
    from ..training import image_data
    spec = image_data.source(path)
    if source == "folder" and spec["kind"] != "folder" or source in ("rec", "recorditer") and spec["kind"] != "rec":
        raise UserError("--sources %s does not fit --dataset %s (a %s)" % (source, path, spec["kind"]))
    return image_data.load_images(path, model, bad_images=bad_images,
                                  loader="recorditer" if source == "recorditer" else "dataloader")


def sources_of(path):
    """The sources that can read `path`: folder for a folder, rec and recorditer for a .rec."""
    from ..training import image_data
    return ("folder",) if image_data.source(path)["kind"] == "folder" else ("rec", "recorditer")


def step_rate(model, ctx, batch_size, shape, classes, timing=Timing(repeat=5, warmup=2, number=3),
              hybridize="static"):
    """Images/s a training step consumes on `ctx` (forward, backward, Trainer.step, to a sync)
    on a batch of `shape` held in memory: after `timing.warmup` steps, `timing.repeat` repeats of
    `timing.number` steps each; returns the per-repeat rates."""
    from ..config import TrainConfig
    from ..training.steps import forward_backward
    from ..training.trainers import build_net, make_trainer
    config = TrainConfig(model=model, hybridize=hybridize, batch_size=batch_size)
    mx.random.seed(0)
    net = build_net(config, [ctx])
    trainer = make_trainer(net, config, config.learning_rate)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = mx.nd.random.uniform(shape=(batch_size,) + tuple(shape), ctx=ctx)
    y = mx.nd.array(np.arange(batch_size) % classes, ctx=ctx)

    def step():
        forward_backward(net, loss_fn, [x], [y])
        trainer.step(batch_size)
    for _ in range(timing.warmup):
        step()
    mx.nd.waitall()
    rates = []
    for _ in range(timing.repeat):
        start = time.perf_counter()
        for _ in range(timing.number):
            step()
        mx.nd.waitall()
        rates.append(batch_size * timing.number / (time.perf_counter() - start))
        if timing.progress:
            timing.progress()
    return rates


# --- bench input ------------------------------------------------------------------------------

def stage_costs(dataset, ctx, batch_size, sample=16, repeat=5, progress=None):
    """Seconds per image of each stage of the Python pipeline, each timed on its own over
    `sample` images, `repeat` times: read (the file's or record's bytes), decode (imdecode),
    augment (the training transforms), batchify (stacking `batch_size` samples), copy to
    `ctx`. Returns {stage: [seconds per image per repeat]}."""
    from mxnet.gluon.data.dataloader import default_batchify_fn
    idx = list(range(min(sample, len(dataset))))
    out = {k: [] for k in ("read", "decode", "augment", "batchify", "copy to context")}
    for r in range(repeat + 1):  # the first pass warms up (graphs of the transforms, the file cache)
        start = time.perf_counter()
        raws = [dataset.read(i) for i in idx]
        out["read"].append((time.perf_counter() - start) / len(idx))
        start = time.perf_counter()
        images = [dataset.decode(r) for r in raws]
        for im in images:
            im.wait_to_read()
        out["decode"].append((time.perf_counter() - start) / len(idx))
        start = time.perf_counter()
        tensors = [dataset.augment(im) for im in images]
        for t in tensors:
            t.wait_to_read()
        out["augment"].append((time.perf_counter() - start) / len(idx))
        samples = [(tensors[k % len(tensors)], np.int32(0)) for k in range(batch_size)]
        start = time.perf_counter()
        x, _ = default_batchify_fn(samples)
        x.wait_to_read()
        out["batchify"].append((time.perf_counter() - start) / batch_size)
        start = time.perf_counter()
        x.as_in_context(ctx).wait_to_read() if ctx != x.context else x.copyto(ctx).wait_to_read()
        out["copy to context"].append((time.perf_counter() - start) / batch_size)
        if r == 0:
            for values in out.values():
                values.pop()
        elif progress:
            progress()
    return out


@dataclass(frozen=True)
class Loaders:
    """The loaders `bench_input` times: the images at `path` (a folder of class folders, or a
    .rec) as `model` takes them (its image size), in batches of `batch_size`, through each of
    `sources` (default: every one that reads `path`, `sources_of`) with each number of
    `workers`. `model`: a ModelSpec, or its text."""
    path: str
    model: object
    batch_size: int = 32
    workers: tuple = (0, 1, 2)
    sources: Optional[tuple] = None


def bench_input(loaders, ctx, repeat=5, batches=4, sample=16, step_repeat=5, threshold=stats.THRESHOLD,
                progress=None):
    """The input pipeline alone, against the training step. Returns Results:
    bench='input' per (source, workers): images/s with its 95% interval over `repeat` repeats
    of `batches` batches, the peak PSS of the process and its workers, and the loader's rate
    over the step's (a Welch interval on the logs: the two ran apart) with a verdict
    (keeps up / too slow); bench='input-stage' per stage of the Python pipeline (seconds per
    image, interval, and the images/s one core would reach on that stage alone);
    bench='input-step': the step's consumption rate on `ctx`, over `step_repeat` repeats. The
    model of `loaders` is parsed here once and passed on."""
    from ..training.image_data import image_size
    from ..training.model_spec import as_spec
    path, batch_size, workers, sources = loaders.path, loaders.batch_size, loaders.workers, loaders.sources
    model = as_spec(loaders.model)
    size = image_size(model)
    shape = (3, size, size)
    sources = list(sources or sources_of(path))
    out = []
    train_sets = {}
    for src in sources:
        train_sets[src] = image_sets(path, model, src)[0]
        if len(train_sets[src]) < batch_size:
            raise UserError("--dataset %s has %d training images, fewer than one batch (--batch-size %d)"
                            % (path, len(train_sets[src]), batch_size))
    classes = next(iter(train_sets.values())).classes
    rates_step = step_rate(model, ctx, batch_size, shape, classes,
                           Timing(repeat=step_repeat, warmup=2, number=3, progress=progress))
    _, step_fields = _interval_fields("images_per_s", rates_step)
    common = dict(model=model.text, batch_size=batch_size, image_size=size, dataset=path, context=describe([ctx]))
    out.append(result("input-step", "training step (batch in memory)", source="step on %s" % describe([ctx]),
                      step_repeats=step_repeat, **step_fields, **common))
    for src in sources:
        ds = train_sets[src]
        for w in workers:
            if src == "recorditer" and w == 0:
                continue  # ImageRecordIter has at least one thread; workers=1 is that
            loader = ds.make_loader(batch_size, True, workers=w, last_batch="discard")
            it = _endless(loader)
            with TreeMemory() as mem:
                time_loader(it, prefetch_depth(loader, w) + 1, 1)  # warm-up: workers start, first batches
                seconds = []
                for _ in range(repeat):
                    seconds.append(time_loader(it, 0, batches))
                    if progress:
                        progress()
            rates = [batch_size * batches / s for s in seconds]
            _, fields = _interval_fields("images_per_s", rates)
            vs = stats.two_sample_interval(rates_step, rates, noise_floor=0, higher_is_better=True)
            judged = stats.verdict(vs, threshold, words=("keeps up", "too slow"), what="repeats")
            what = ("ImageRecordIter, %d preprocess thread(s)" % loader.threads if src == "recorditer"
                    else "DataLoader over %s, %s" % ("the folder" if src == "folder" else "the .rec",
                                                     "%d worker process(es)" % w if w else "in the main thread"))
            del it, loader
            out.append(result("input", "%s, workers %d" % (src, w), source=src, workers=w, loader=what,
                              repeats=repeat, batches_per_repeat=batches, memory_peak_bytes=mem.peak,
                              memory_growth_bytes=mem.peak - mem.before, memory_measure="PSS of the process and "
                              "its workers", **fields, **vs.fields("vs_step"),
                              **judged.fields(), skipped_images=ds.skipped.value, **common))
    for src in sources:
        if src == "recorditer":
            continue  # its stages run inside MXNet's C++ iterator: not separable from Python
        costs = stage_costs(train_sets[src], ctx, batch_size, sample, repeat, progress)
        total = [sum(v[i] for v in costs.values()) for i in range(repeat)]
        for stage, seconds in list(costs.items()) + [("all stages", total)]:
            interval, fields = _interval_fields("images_per_s", [1.0 / v for v in seconds])
            out.append(result("input-stage", "%s: %s" % (src, stage), source=src, stage=stage, sample=sample,
                              repeats=repeat, per_image_s=1.0 / interval.estimate, **fields, **common))
    return out


# --- is the step waiting for its input? ---------------------------------------------------------

class _Timed:
    """Batches of an iterator, with the seconds the loop blocked in next() for each."""

    def __init__(self, batches, count):
        self.batches, self.count, self.waits = batches, count, []

    def __iter__(self):
        for _ in range(self.count):
            start = time.perf_counter()
            batch = next(self.batches)
            self.waits.append(time.perf_counter() - start)
            yield batch


def _loop(s, batches, steps):
    """`steps` steps as gluonperf.train runs them (steps.train_steps, loss read one batch
    late) over `batches`; (seconds per step to a sync, seconds blocked in next() per step)."""
    from ..measure.harness import sync
    from ..training.steps import EpochStats, train_steps
    timed = _Timed(batches, steps)
    epoch = EpochStats()
    sync()
    start = time.perf_counter()
    for _, n, losses, outputs, labels in train_steps(s.net, s.trainer, s.loss_fn, timed, s.contexts):
        epoch.add(n, losses, outputs, labels)
    sync()
    return (time.perf_counter() - start) / steps, sum(timed.waits) / steps


def input_bound(config, contexts, steps=10, rounds=5, warmup=3, threshold=stats.THRESHOLD, progress=None,
                setup=None):
    """Is the training step waiting for its input? In `rounds` rounds (order alternating), the
    loop as gluonperf.train runs it for `steps` steps on the real loader (prefetching workers;
    the batches it holds ready are drained first, so the steps see its steady rate), for
    `steps` steps on one batch held in memory, and the loader alone for `steps` batches.
    Returns Results (bench='input-bound'): 'real data', 'batch in memory', 'loader alone'
    (seconds per step, images/s, each with its interval) and 'verdict' (the share of the step
    spent waiting with its 95% interval, the verdict and a `finding` sentence)."""
    from .step_time import prepare
    s = setup or prepare(config, contexts)
    batch = config.batch_size
    first = next(s.batches)
    cached = itertools.repeat(first)
    depth = 2 * config.workers if config.loader != "recorditer" else 4
    for _ in range(warmup):  # deferred init, graph building; the workers start
        _loop(s, cached, 1)
        _loop(s, s.batches, 1)
    real, memory, alone, waits = [], [], [], []
    for r in range(rounds):
        order = ("real", "memory", "alone") if r % 2 == 0 else ("alone", "memory", "real")
        for kind in order:
            if kind == "memory":
                memory.append(_loop(s, cached, steps)[0])
            elif kind == "real":
                for _ in range(depth):  # what the workers prepared while the other phases ran
                    next(s.batches)
                t, w = _loop(s, s.batches, steps)
                real.append(t)
                waits.append(w / t)
            else:
                alone.append(time_loader(s.batches, depth, steps) / steps)
            if progress:
                progress()
    slowdown = stats.ratio_interval(stats.paired_ratios(real, memory))  # t(real) / t(memory) per round
    share, share_low, share_high = _waiting_share(slowdown)
    wait_mean = float(np.mean(waits))
    wait_ci = _t_interval(waits)
    rate = lambda seconds: [batch / t for t in seconds]  # noqa: E731
    real_i, mem_i, alone_i = (stats.ratio_interval(rate(v)) for v in (real, memory, alone))
    common = dict(model=text_of(config.model), batch_size=batch, contexts=describe(s.contexts), dataset=config.dataset,
                  loader=config.loader, workers=config.workers, steps=steps, rounds=rounds)
    judged = stats.verdict(slowdown, threshold, words=("input-bound", "faster on real data"), what="rounds")
    cpu = all(c.device_type == "cpu" for c in s.contexts)
    finding = _finding(judged, slowdown, real_i, mem_i, alone_i, config, cpu)
    out = [
        result("input-bound", "real data", time_s=float(np.median(real)), **real_i.fields("images_per_s"),
               wait_share=wait_mean, **common),
        result("input-bound", "batch in memory", time_s=float(np.median(memory)), **mem_i.fields("images_per_s"),
               **common),
        result("input-bound", "loader alone", time_s=float(np.median(alone)), **alone_i.fields("images_per_s"),
               **common),
        result("input-bound", "verdict", share=share, share_ci_low=share_low, share_ci_high=share_high,
               share_n=slowdown.n, share_level=slowdown.level,
               share_method="t interval on log(t real / t memory) per round = -log(1 - share)",
               wait_share=wait_mean, wait_share_ci_low=wait_ci[0], wait_share_ci_high=wait_ci[1],
               **slowdown.fields("slowdown"), **judged.fields(), input_bound=judged.word == "input-bound",
               finding=finding, cpu_shared=cpu, real_samples_s=list(real), memory_samples_s=list(memory),
               alone_samples_s=list(alone), **common),
    ]
    return out


def _t_interval(values, level=stats.LEVEL):
    n = len(values)
    mean = float(np.mean(values))
    if n < 2:
        return (-math.inf, math.inf)
    half = stats.t_quantile(0.5 + level / 2, n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)
    return (mean - half, mean + half)


def _pct(x):
    return "%.0f%%" % (100 * x)


def _waiting_share(slowdown):
    """(share, low, high): the share of a step spent waiting for data, 1 - t(memory) / t(real),
    with its interval, from the interval of t(real) / t(memory)."""
    high = 1 - 1 / slowdown.high if math.isfinite(slowdown.high) else 1.0
    return 1 - 1 / slowdown.estimate, 1 - 1 / slowdown.low, high


def _finding(judged, slowdown, real_i, mem_i, alone_i, config, cpu):
    share, low, high = _waiting_share(slowdown)
    rates = ("the loader alone delivers %.4g images/s (95%% CI %.4g-%.4g) with %s, the step consumes %.4g "
             "(on a batch in memory; with the real loader it ran at %.4g)"
             % (alone_i.estimate, alone_i.low, alone_i.high,
                "%d preprocess thread(s)" % max(1, config.workers) if config.loader == "recorditer"
                else "%d worker(s)" % config.workers if config.workers else "no workers (the main thread)",
                mem_i.estimate, real_i.estimate))
    ci = "95%% CI %s to %s, %d rounds" % (_pct(max(low, -9.99)), _pct(high), slowdown.n)
    shared = ("; the loader's workers and the step share this machine's CPU cores, so while training the loader "
              "delivers less than alone" if cpu else "")
    if judged.word == "input-bound":
        recordio = "" if config.loader == "recorditer" else "RecordIO (--loader recorditer on a .rec)"
        if cpu and alone_i.low > mem_i.high:
            # the loader alone outpaces the step: what the step waits for is the cores the loader takes
            advice = ("the loader alone is %.3gx faster than the step needs, so the wait is the loader's CPU time taken "
                      "from the step on the same cores: a loader that costs less CPU per image helps (%s), more "
                      "workers will not" % (alone_i.estimate / mem_i.estimate,
                                            recordio or "smaller images stored, or fewer --workers"))
        else:
            more = (config.workers or 0) + max(1, config.workers or 1)
            advice = "try --workers %d%s" % (more, " or " + recordio if recordio else "")
            if cpu:
                advice += " (more workers pay only while cores are free)"
        return "input-bound: %s of each step waits for data (%s); %s; %s%s" % (_pct(share), ci, rates, advice, shared)
    if judged.word == "same":
        return ("not input-bound: the step on real data is as fast as on a batch in memory within +-%g%% (waiting "
                "share %s, %s); %s%s" % (100 * judged.threshold, _pct(share), ci, rates, shared))
    if judged.word == "faster on real data":
        return ("not input-bound: the step on real data ran faster than on a batch in memory (share %s, %s); %s%s"
                % (_pct(share), ci, rates, shared))
    need = ("; about %d rounds would settle it (--rounds)" % judged.rounds_needed if judged.rounds_needed
            else "; more rounds (--rounds) would settle it")
    return "inconclusive: %s of each step may wait for data (%s)%s; %s%s" % (_pct(share), ci, need, rates, shared)

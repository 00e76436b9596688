"""Trainer-based data-parallel training on several contexts (the chapter's concise version).

Each batch is split over the contexts with `split_and_load`; every context runs
forward and backward on its slice; `gluon.Trainer` sums the gradients over the
kvstore and updates the parameters. `fit` trains and evaluates, epoch by epoch,
with checkpoints that a later run can resume from (`training.checkpoints`), from the pieces
of `training.trainers` (the model, the learning rate, the kvstore and the Trainer) and
`training.steps` (a step, an epoch's steps); `scaling` (`training.device_scaling`) times fixed
steps on 1, 2, ... N contexts and splits each step into compute (t1) and gradient
communication (t2). Neither parses arguments nor prints: they return Results.
"""
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Callable, Optional

import mxnet as mx
import numpy as np

from .. import UserError
from ..measure.harness import sync
# TrainConfig lives in gluonperf.config (no MXNet: the CLIs parse with it); callers of fit/scaling take it here too
from ..config import HYBRIDIZE, TrainConfig  # noqa: F401
from ..runtime.contexts import describe
from .data import CLASSES, Part, load_for, loader  # noqa: F401 (CLASSES: callers import it from here)
from .models import loss_of
from . import optimizers
from .horovod import Job
from ..records import Result, result
from .checkpoints import CheckpointDir, check_resumable, read_checkpoint, replanned_note
from .steps import EpochStats, evaluate, forward_backward, param_checksums, train_steps
from .model_spec import text_of
from .trainers import (build_net, create_kvstore, lr_for_devices, lr_schedule, make_trainer, sync_initial_weights,
                       with_spec)


class Diverged(UserError):
    """The loss became NaN or infinite."""


def _epoch_seed(seed, epoch):
    return seed * 100003 + epoch + 1


@dataclass(frozen=True)
class _Worker:
    """Where this process trains: its contexts, its kvstore (a name, a kvstore or a Horovod Job),
    its rank among `num_workers`."""
    contexts: list
    kvstore: object
    rank: int
    num_workers: int

    @property
    def job(self):
        """The Horovod Job this process is a rank of, or None."""
        return self.kvstore if isinstance(self.kvstore, Job) else None


@dataclass(frozen=True)
class _Hooks:
    """What `fit` calls back (see its docstring): `progress`, `log`, `epoch_done`, `trained`, and
    `memory`, the StepMemory sampled at every step."""
    progress: Optional[Callable] = None
    log: Optional[Callable] = None
    epoch_done: Optional[Callable] = None
    trained: Optional[Callable] = None
    memory: object = None


@dataclass(frozen=True)
class _Saved:
    """The checkpoints of a run: the one it resumes from (`checkpoint`, its `meta`; None: a fresh
    start), the folder it saves into (`save_dir`) and, on rank 0, its CheckpointDir (`saver`)."""
    checkpoint: Optional[str]
    meta: Optional[dict]
    save_dir: Optional[str]
    saver: object


@dataclass(frozen=True)
class _Training:
    """What the epochs train: the network, its Trainer, the loss, the step (forward and backward,
    recomputed or not), the data, and the learning rate's plan (`lr`, `schedule` over `batches`
    batches an epoch)."""
    net: object
    trainer: object
    loss_fn: object
    step: Callable
    train_data: object
    test_data: object
    lr: float
    schedule: object

    @property
    def batches(self):
        return len(self.train_data)


@dataclass(frozen=True)
class _Timed:
    """A trained epoch's times: its EpochStats, when it started (time.time), its start
    (perf_counter), its training seconds and CPU seconds."""
    stats: EpochStats
    started_at: float
    start: float
    train_s: float
    train_cpu_s: float


# --- the training loop -----------------------------------------------------------

def fit(config, contexts, progress=None, log=None, epoch_done=None, trained=None, memory=None):
    """Train `config.model` on `contexts` for `config.epochs` epochs.

    Returns one Result per epoch (bench='train', name='epoch N') with loss, train
    and test top-1/top-5, epoch time and training images/s (timed to a sync point,
    evaluation excluded). `progress(epoch, batch, batches, loss)` is called after
    every training batch, `log(message)` every `log_interval` batches and after
    each epoch, `epoch_done(results)` with the Results so far after each epoch (and its
    checkpoint): what a command that is stopped still has; `trained(net)` with the model
    once training has ended (on worker 0 only: train --export). Raises `Diverged` (a
    UserError) when the loss becomes NaN or infinite, leaving the last good checkpoint
    in place. `memory`: a measure.memory.StepMemory, sampled at every training step (its
    `warmup`: the steps of the first epoch this run trains), for the growth verdict.
    `config.model`: a ModelSpec, or its text, parsed here once (`trainers.with_spec`).
    """
    contexts, config = list(contexts), with_spec(config)
    kvstore = create_kvstore(config)  # before data loading: dist workers need their rank
    if isinstance(kvstore, Job) and len(contexts) > 1:
        raise ValueError("a Horovod job runs one process per device; this process got %d contexts (%s)"
                         % (len(contexts), describe(contexts)))
    rank, num_workers = (kvstore.rank, kvstore.num_workers) if not isinstance(kvstore, str) else (0, 1)
    if config.batch_size < len(contexts):
        raise UserError("--batch-size %d is smaller than the number of contexts (%d); every context "
                        "needs at least one sample per batch" % (config.batch_size, len(contexts)))
    checkpoint, meta = (read_checkpoint(config.resume) if config.resume else (None, None))
    if meta:
        check_resumable(config, meta, config.resume)
    save_dir = config.save or config.resume
    saver = (CheckpointDir(save_dir, resuming=os.path.abspath(save_dir) == os.path.abspath(config.resume or ""))
             if save_dir and rank == 0 else None)
    try:
        return _fit(config, _Worker(contexts, kvstore, rank, num_workers), _Saved(checkpoint, meta, save_dir, saver),
                    _Hooks(progress, log, epoch_done, trained, memory))
    finally:
        if saver:
            saver.close()


def _fit(config, worker, saved, hooks):
    contexts, rank, num_workers = worker.contexts, worker.rank, worker.num_workers
    train_set, test_set = load_for(config)
    train_data = loader(train_set, config.batch_size, shuffle=True, workers=config.workers,
                        part=Part(rank, num_workers), last_batch="discard", seed=config.seed)
    test_data = loader(test_set, config.batch_size, shuffle=False, workers=config.workers)
    batches = len(train_data)
    if batches == 0:
        raise UserError("--batch-size %d is larger than this worker's %d training samples; lower it "
                        "or raise --limit" % (config.batch_size, len(train_data.sampler)))

    mx.random.seed(config.seed)
    np.random.seed(config.seed)
    net = build_net(config, contexts)
    step = forward_backward
    if config.checkpoint_segments:  # gradient checkpointing: recompute activations in the backward
        from .recompute import checkpointed
        step = checkpointed(net, config.checkpoint_segments, train_set[0][0].shape, HYBRIDIZE[config.hybridize])
    lr = lr_for_devices(config, len(contexts), num_workers)
    schedule = lr_schedule(config, lr, batches)
    trainer = make_trainer(net, config, lr, schedule, worker.kvstore)
    training = _Training(net, trainer, loss_of(config.model), step, train_data, test_data, lr, schedule)
    first, history = 0, []
    if saved.checkpoint:
        first, history = _resume(config, training, worker, saved, hooks.log)

    job = worker.job
    if num_workers > 1 or not isinstance(worker.kvstore, str):
        sync_initial_weights(net, trainer, contexts, train_set[0][0].shape, job)
    common = dict(model=config.model.text, dataset=config.dataset, batch_size=config.batch_size,
                  contexts=describe(contexts), devices=len(contexts), num_workers=num_workers, rank=rank,
                  hybridize=config.hybridize, kvstore=config.kvstore, workers=config.workers, dtype=config.dtype,
                  optimizer=config.optimizer)
    memory, log = hooks.memory, hooks.log
    for epoch in range(first, config.epochs):
        timed = _train_epoch(config, epoch, training, worker, saved.save_dir, hooks)
        if memory is not None and epoch == first:
            memory.warmup = memory.steps  # the first epoch: graphs built, pools and caches filled
        record = _epoch_record(epoch, training, worker, common, timed)
        if hasattr(train_set, "skipped"):  # image data with --bad-images skip
            record.metrics["skipped_images"] = train_set.skipped.value
        history.append(record)
        reached = config.target_top1 is not None and record.metrics["test_top1"] >= config.target_top1
        if config.target_top1 is not None:
            record.metrics.update(time_to_target(history, config.target_top1, reached))
        if hooks.epoch_done:  # before the epoch's line: a Ctrl-C right after it keeps the epoch it names
            hooks.epoch_done(list(history))
        if log:  # dist workers compare the weights' checksum: their BatchNorm statistics are their own
            log("epoch %d: loss %.4f, train top-1 %.4f, test top-1 %.4f, %.1f s, %.1f images/s, "
                "param checksum %.10g%s" % (epoch + 1, record.metrics["loss"], record.metrics["train_top1"],
                                            record.metrics["test_top1"], record.metrics["epoch_s"],
                                            record.metrics["train_images_per_s"], record.metrics["param_checksum"],
                                            ", weights checksum %.10g" % record.metrics["weights_checksum"]
                                            if num_workers > 1 else ""))
        if saved.saver:
            saved.saver.save(epoch + 1, net, trainer, {"epoch": epoch + 1, "config": _saved(config),
                                                       "history": [r.row() for r in history]})
        if reached:
            break
    if hooks.trained and rank == 0:
        hooks.trained(net)
    return history


def _saved(config):
    """`config` as a checkpoint keeps it: its fields, the model as the spec's text."""
    return dict(asdict(config), model=text_of(config.model))


def _resume(config, training, worker, saved, log):
    """Load a checkpoint's weights and trainer states into the network and Trainer of `training`;
    returns (the epochs it finished, its epochs' records)."""
    net, trainer, checkpoint, meta = training.net, training.trainer, saved.checkpoint, saved.meta
    net.load_parameters(os.path.join(checkpoint, "params"), ctx=worker.contexts)
    trainer.load_states(os.path.join(checkpoint, "states"))
    optimizer = optimizers.upgrade(trainer.optimizer)  # unpickled from the states: give it this run's settings
    optimizer.lr_scheduler, optimizer.wd = training.schedule, config.wd
    first = meta["epoch"]
    history = [Result(r["bench"], r["name"], {k: v for k, v in r.items() if k not in ("bench", "name")})
               for r in meta.get("history", [])]
    if log:
        log("resumed from %s after epoch %d" % (checkpoint, first))
        replanned = (replanned_note(config, meta, config.resume, training.lr, training.batches, training.schedule)
                     if worker.rank == 0 else None)
        if replanned:
            log(replanned)
    return first, history


def _train_epoch(config, epoch, training, worker, save_dir, hooks):
    """Train one epoch, timed to a sync; returns its _Timed. Raises Diverged when a batch's loss
    is not finite. `hooks.memory` (a StepMemory) is sampled at every step."""
    net, trainer, train_data, batches = training.net, training.trainer, training.train_data, training.batches
    num_workers, memory, progress, log = worker.num_workers, hooks.memory, hooks.progress, hooks.log
    mx.random.seed(_epoch_seed(config.seed, epoch))
    train_data.sampler.set_epoch(epoch)
    stats = EpochStats()
    sync()
    started_at, start, cpu_start = time.time(), time.perf_counter(), time.process_time()
    for i, n, losses, outputs, labels in train_steps(net, trainer, training.loss_fn, train_data, worker.contexts,
                                                      num_workers, training.step):
        batch_loss = stats.add(n, losses, outputs, labels)
        if not math.isfinite(batch_loss):
            kept = (" (last good checkpoint: %s, epoch %d)" % (save_dir, epoch)
                    if save_dir and epoch > 0 and worker.rank == 0 else "")
            raise Diverged("loss became %s at epoch %d, batch %d of %d (learning rate %.4g); lower "
                           "--lr%s" % (batch_loss, epoch + 1, i + 1, batches, trainer.learning_rate, kept))
        if memory is not None:
            memory.sample(memory.steps + 1)
        if progress:
            progress(epoch + 1, i + 1, batches, batch_loss)
        if log and config.log_interval and (i + 1) % config.log_interval == 0:
            log("epoch %d batch %d/%d: loss %.4f, train top-1 %.4f, %.1f images/s"
                % (epoch + 1, i + 1, batches, stats.loss, stats.top1,
                   stats.images * num_workers / (time.perf_counter() - start)))
    sync()
    return _Timed(stats, started_at, start, time.perf_counter() - start, time.process_time() - cpu_start)


def _epoch_record(epoch, training, worker, common, timed):
    """The record of a trained epoch (bench 'train'), after its evaluation on the test data, with
    the weights' checksums (checked equal on every rank of a Horovod job)."""
    net, contexts, num_workers, job = training.net, worker.contexts, worker.num_workers, worker.job
    stats, train_s = timed.stats, timed.train_s
    test_top1, test_top5 = evaluate(net, training.test_data, contexts)
    epoch_s = time.perf_counter() - timed.start
    every, weights = param_checksums(net, contexts[0])
    checked = {}
    if job is not None:  # fails loudly, on every rank, when the workers trained apart
        checked["weights_max_rel_diff"] = job.check_equal(net, contexts[0], "after epoch %d" % (epoch + 1))
    return result("train", "epoch %d" % (epoch + 1), epoch=epoch + 1, loss=stats.loss,
                  train_top1=stats.top1, train_top5=stats.top5,
                  test_top1=test_top1, test_top5=test_top5, epoch_s=epoch_s, train_s=train_s,
                  train_cpu_s=timed.train_cpu_s, train_started_at=timed.started_at,
                  train_images_per_s=stats.images * num_workers / train_s, lr=training.trainer.learning_rate,
                  images=stats.images * num_workers, param_checksum=every, weights_checksum=weights, **common, **checked)


def time_to_target(history, target, reached):
    """Time to accuracy (DAWNBench's and MLPerf Training's metric) after the last epoch of
    `history`: whether the test top-1 reached `target`, and if so the wall time (every epoch's
    training and evaluation; not the process's start nor the checkpoints), the epochs and the
    training images it took; None for those when it was not reached."""
    m = [r.metrics for r in history]
    return {"target_top1": target, "target_reached": reached,
            "time_to_target_s": sum(r["epoch_s"] for r in m) if reached else None,
            "epochs_to_target": m[-1]["epoch"] if reached else None,
            "images_to_target": sum(r.get("images", 0) for r in m) if reached else None,
            "best_test_top1": max(r["test_top1"] for r in m)}

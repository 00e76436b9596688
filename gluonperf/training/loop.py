"""Trainer-based data-parallel training on several contexts (the chapter's concise version).

Each batch is split over the contexts with `split_and_load`; every context runs
forward and backward on its slice; `gluon.Trainer` sums the gradients over the
kvstore and updates the parameters. `fit` trains and evaluates, epoch by epoch,
with checkpoints that a later run can resume from; `scaling` times fixed steps
on 1, 2, ... N contexts and splits each step into compute (t1) and gradient
communication (t2). Neither parses arguments nor prints: they return Results.
"""
import errno
import json
import math
import os
import shutil
import tempfile
import time
from dataclasses import asdict, replace

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from .. import UserError, error_line
from ..measure import stats
from ..measure.harness import Benchmark, Measurement, sync
# TrainConfig lives in gluonperf.config (no MXNet: the CLIs parse with it); callers of fit/scaling take it here too
from ..config import HYBRIDIZE, JOB_KVSTORES, TrainConfig  # noqa: F401
from ..runtime.contexts import describe
from .data import CLASSES, classes, load_for, loader  # noqa: F401 (CLASSES: callers import it from here)
from .models import get_model, loss_of
from . import optimizers
from .horovod import Job
from ..runtime import precision
from ..records import Result, result
from ..runtime.outputs import umask_mode, write_output

# Fields a resumed run must share with the checkpoint it continues. The learning-rate
# settings may change (e.g. resume with a lower --lr after the loss became NaN).
# The optimizer's hyper-parameters come back with its state (pickled in the trainer states), so
# they may not change either.
RESUME_KEYS = ("model", "dataset", "limit", "batch_size", "seed", "optimizer", "momentum", "beta1", "beta2",
               "epsilon")
LATEST = "latest"
DMLC_ENV = ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER")


class Diverged(UserError):
    """The loss became NaN or infinite."""


# --- pieces --------------------------------------------------------------------

def create_kvstore(config):
    """A dist kvstore object or a Horovod job (`horovod.Job`), created before data is loaded,
    so rank and number of workers are known, or the kvstore name for gluon.Trainer to create
    locally."""
    if config.kvstore == "horovod":
        return Job()
    if config.kvstore.startswith("dist"):
        missing = [v for v in DMLC_ENV if v not in os.environ]
        if missing:
            raise UserError("--kvstore %s needs the DMLC_* environment of a distributed job (%s not set); "
                            "start it with python -m gluonperf.launch -n 2 -- python -m gluonperf.train "
                            "--kvstore %s ..." % (config.kvstore, ", ".join(missing), config.kvstore))
        return mx.kv.create(config.kvstore)
    return config.kvstore


def build_net(config, contexts):
    """The model, initialised on every context with the same (seeded) weights, in
    bfloat16 mixed precision with --dtype bfloat16 (gluonperf.runtime.precision)."""
    precision.enable(config.dtype, contexts)
    net = get_model(config.model, classes(config.dataset), contexts)
    net.initialize(mx.init.Xavier(), ctx=contexts)
    flags = HYBRIDIZE[config.hybridize]
    if flags is not None:
        net.hybridize(**flags)
    return net


def lr_for_devices(config, devices, num_workers=1):
    """--lr, times the number of devices (x workers) with --lr-scale linear."""
    lr = config.learning_rate  # --lr, or the optimizer's default
    return lr * devices * num_workers if config.lr_scale == "linear" else lr


def lr_schedule(config, lr, iters_per_epoch):
    """Linear warm-up over --warmup-epochs, then cosine / step (x0.1 at 50% and 75%) /
    constant: GluonCV's LRScheduler pieces joined by LRSequential."""
    from gluoncv.utils import LRScheduler, LRSequential
    warmup = min(config.warmup_epochs, config.epochs)
    rest = config.epochs - warmup
    parts = []
    if warmup * iters_per_epoch > 1:
        parts.append(LRScheduler("linear", base_lr=0.0, target_lr=lr, nepochs=warmup,
                                 iters_per_epoch=iters_per_epoch))
    if rest > 0 or not parts:
        nepochs = max(rest, 1)
        mode = config.lr_decay if nepochs * iters_per_epoch > 1 else "none"
        if mode == "cosine":
            parts.append(LRScheduler("cosine", base_lr=lr, target_lr=0.0, nepochs=nepochs,
                                     iters_per_epoch=iters_per_epoch))
        elif mode == "step":
            parts.append(LRScheduler("step", base_lr=lr, nepochs=nepochs, iters_per_epoch=iters_per_epoch,
                                     step_epoch=[nepochs * 0.5, nepochs * 0.75], step_factor=0.1))
        else:
            parts.append(LRScheduler("constant", base_lr=lr, nepochs=nepochs, iters_per_epoch=iters_per_epoch))
    schedule = LRSequential(parts)
    schedule.base_lr = lr  # what the optimizer compares --lr with
    return schedule


def default_kvstore(contexts):
    """flat on several CPU contexts (gluonperf.training.flat: measured faster than device there,
    docs/levers.md), MXNet's device kvstore otherwise."""
    contexts = list(contexts)
    return "flat" if len(contexts) > 1 and all(c.device_type == "cpu" for c in contexts) else "device"


def make_trainer(net, config, lr, schedule=None, kvstore="device"):
    """gluon.Trainer over `kvstore`. update_on_kvstore=False: gradients are all-reduced
    over the kvstore and every context applies the update, which lets `scaling` time
    allreduce_grads() and update() apart and keeps trainer states savable in dist runs.
    kvstore 'flat' (several contexts): gluonperf.training.flat.FlatTrainer, which sums each
    context's share of one flat gradient array and updates each parameter once.
    The optimizer is gluonperf.training.optimizers': SGD updates each parameter with its own
    operator on CPU."""
    params = {"learning_rate": lr, "wd": config.wd, "momentum": config.momentum, "beta1": config.beta1,
              "beta2": config.beta2, "epsilon": config.epsilon}
    if schedule is not None:
        params["lr_scheduler"] = schedule
    optimizer = optimizers.create(config.optimizer, **params)
    if isinstance(kvstore, Job):
        return kvstore.trainer(net.collect_params(), optimizer)
    if kvstore == "flat":
        from .flat import FlatTrainer
        return FlatTrainer(net, optimizer)
    return gluon.Trainer(net.collect_params(), optimizer, kvstore=kvstore, update_on_kvstore=False)


def sync_initial_weights(net, trainer, contexts, sample_shape, job=None):
    """For dist kvstores: put rank 0's weights on the servers and pull them to every
    worker before the first gradient is pushed; for a Horovod `job`, broadcast rank 0's
    weights to every worker.

    MXNet 1.9.1 otherwise does this lazily inside the first `Trainer.step`, where the
    pull of the initial weights and the push of the first gradients (same key, with
    update_on_kvstore=False) are independent operations: when the gradients reach the
    server first, a worker receives the gradient sum as its weights and the workers
    diverge. Seen in 4 of 9 two-worker runs under load; 0 of 6 with this fix.

    The forward that finishes deferred initialisation runs in inference mode, where MXNet's
    oneDNN convolutions turn their weight arrays into oneDNN's blocked layout in place, which
    the dist kvstore cannot send ("kvstore doesn't handle MKLDNN correctly", MXNet's
    mkldnn_convolution.cc): rank 0's init failed in the engine and the server aborted on the
    first pull ("init 5 first" with ResNet-18). `reset_ctx` gives every parameter a copy in
    MXNet's own layout, with the same values (a forward in training mode did not turn them back).
    """
    for ctx in contexts:  # finish deferred initialisation, so every parameter is known
        net(mx.nd.zeros((1,) + tuple(sample_shape), ctx=ctx))
    for p in net.collect_params().values():
        p.reset_ctx(p.list_ctx())
    if job is not None:
        job.broadcast(net)
    else:
        trainer._init_kvstore()   # private, but the only way to order init before the first push
        trainer._init_params()
    mx.nd.waitall()


def split(batch, contexts):
    """split_and_load that never hands a context an empty slice (a last batch smaller
    than the number of contexts goes to the first contexts only)."""
    use = contexts[:min(len(contexts), batch.shape[0])]
    return gluon.utils.split_and_load(batch, use, even_split=False)


def as_float32(output):
    """A model's output in float32 (under bfloat16 AMP the last dense layer gives bfloat16,
    which numpy, and so the top-k metrics, cannot order)."""
    return output if output.dtype == np.float32 else output.astype("float32")


def forward_backward(net, loss_fn, xs, ys):
    """Forward and backward on every context's slice; returns outputs and losses."""
    with autograd.record():
        outputs = [as_float32(net(x)) for x in xs]
        losses = [loss_fn(o, y) for o, y in zip(outputs, ys)]
    autograd.backward(losses)
    return outputs, losses


def hits(outputs, labels, k=5):
    """(top-1, top-k) hits of a batch's outputs against its labels (one NDArray of each
    per context), counted in numpy as MXNet's Accuracy and TopKAccuracy count them.
    Not with those metrics: their argmax (like a loss's sum()) is an engine operator,
    queued with the training's own; with two CPU contexts these reads made one context
    wait for work queued on the other and cost `--ctx cpu0,cpu1` a few per cent of its
    throughput (docs/levers.md, "Two CPU contexts")."""
    top1 = topk = 0
    for output, label in zip(outputs, labels):
        output, label = output.asnumpy(), label.asnumpy().astype(np.int64).ravel()
        best = np.argpartition(output, -min(k, output.shape[1]), axis=1)[:, -k:]
        top1 += int((output.argmax(axis=1) == label).sum())
        topk += int((best == label[:, None]).any(axis=1).sum())
    return top1, topk


def evaluate(net, data, contexts):
    """Top-1 and top-5 accuracy of `net` on a DataLoader."""
    top1 = top5 = count = 0
    for x, y in data:
        xs, ys = split(x, contexts), split(y, contexts)
        h1, h5 = hits([as_float32(net(part)) for part in xs], ys)
        top1, top5, count = top1 + h1, top5 + h5, count + x.shape[0]
    return (top1 / count, top5 / count) if count else (float("nan"), float("nan"))


# --- checkpoints ---------------------------------------------------------------

# errors of a write that more space or another place would fix (as gluonperf.cli.common.run lists them)
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)


def _nearly_full(directory, margin=1 << 20):
    """Whether the file system of `directory` has less than `margin` bytes left for this user."""
    try:
        st = os.statvfs(directory)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < margin


class CheckpointDir:
    """A --save directory, written by one run at a time.

    Opening it takes an exclusive lock (`DIR/.lock`, released by the kernel when the
    process dies, even by kill -9): a second run saving into it is refused with one line.
    A directory that already holds checkpoints is refused too, unless this run resumes
    from it, so saving never replaces or prunes another run's checkpoints.

    `save` writes parameters, trainer states and meta.json for an epoch into
    DIR/epoch-NNNN: every file goes into a temporary directory that is renamed into place,
    and `latest` is replaced (atomically) last, so a kill at any moment leaves `latest`
    naming a complete checkpoint. Then all but the `keep` highest epochs are removed,
    never the one `latest` names."""

    def __init__(self, directory, resuming=False, keep=2):
        import fcntl
        self.directory, self.keep = directory, keep
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise UserError("--save %s is a file; give a directory" % directory)
        try:
            os.makedirs(directory, exist_ok=True)
            self._lock = open(os.path.join(directory, ".lock"), "a+")
        except OSError as e:
            raise UserError("--save %s cannot be written (%s); give a writable directory"
                            % (directory, e.strerror or e)) from None
        try:
            fcntl.flock(self._lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.seek(0)
            holder = self._lock.read().strip() or "unknown"
            self._lock.close()
            raise UserError("--save %s is being written by another run (pid %s); wait for it to finish or "
                            "give another directory" % (directory, holder))
        epochs = self.epochs()
        if epochs and not resuming:
            self.close()
            raise UserError("--save %s already holds checkpoints of another run (%s); continue that run with "
                            "--resume %s, or give an empty directory" % (directory, ", ".join(epochs), directory))
        self._lock.seek(0)
        self._lock.truncate()
        self._lock.write("%d\n" % os.getpid())
        self._lock.flush()
        self._remove_leftovers()  # temporary directories of a run that was killed while saving

    def epochs(self):
        """Names of the checkpoints in the directory, oldest epoch first."""
        return sorted(d for d in os.listdir(self.directory)
                      if d.startswith("epoch-") and os.path.isdir(os.path.join(self.directory, d)))

    def _remove_leftovers(self):
        for d in os.listdir(self.directory):
            if d.startswith((".tmp-", ".old-")):
                shutil.rmtree(os.path.join(self.directory, d), ignore_errors=True)

    def save(self, epoch, net, trainer, meta):
        """Write epoch `epoch`'s checkpoint; returns its path. A full disk (or a file too large,
        or a read-only file system) raises OSError whose message names the checkpoint that was
        not written and the one `latest` still names, intact: cli.run makes it one line."""
        try:
            return self._save(epoch, net, trainer, meta)
        except Exception as e:
            failure = self._write_failure(epoch, e)
            if failure is e:
                raise
            raise failure from e

    def _write_failure(self, epoch, error):
        """The OSError to raise for `error` (an OSError, or MXNet's 'FileStream.Write incomplete',
        which says no more) while writing epoch `epoch`, or `error` itself when it is neither."""
        text = error_line(error)
        if isinstance(error, OSError) and error.errno in WRITE_ERRNOS:
            code, why = error.errno, error.strerror or os.strerror(error.errno)
        elif "Write incomplete" in text or "No space left" in text:  # MXNet's dmlc stream: no errno
            full = _nearly_full(self.directory)
            code = errno.ENOSPC if full else errno.EIO
            why = ("the device is full (MXNet's write was cut short)" if full else
                   "MXNet's write was cut short (a full device, a quota or a file-size limit)")
        else:
            return error
        try:
            with open(os.path.join(self.directory, LATEST)) as f:
                intact = "%s (named by %s) is intact" % (os.path.join(self.directory, f.read().strip()),
                                                         os.path.join(self.directory, LATEST))
        except OSError:
            intact = "no earlier checkpoint exists"
        return OSError(code, "%s: the checkpoint of epoch %d was not written; %s" % (why, epoch, intact),
                       os.path.join(self.directory, "epoch-%04d" % epoch))

    def _save(self, epoch, net, trainer, meta):
        directory = self.directory
        name = "epoch-%04d" % epoch
        tmp = tempfile.mkdtemp(dir=directory, prefix=".tmp-" + name)
        try:
            os.chmod(tmp, umask_mode(0o777))  # mkdtemp makes it private
            net.save_parameters(os.path.join(tmp, "params"))
            trainer.save_states(os.path.join(tmp, "states"))
            with open(os.path.join(tmp, "meta.json"), "w") as f:
                json.dump(meta, f, indent=1, default=str)
            for part in ("params", "states", "meta.json"):
                os.chmod(os.path.join(tmp, part), umask_mode())
            final = os.path.join(directory, name)
            if os.path.exists(final):  # this run's epoch written before a kill, never pointed at: replace it
                os.replace(final, tempfile.mkdtemp(dir=directory, prefix=".old-") + "/x")
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        write_output(os.path.join(directory, LATEST), (name + "\n").encode("utf-8"))
        for old in self.epochs()[:-self.keep]:
            if old != name:
                shutil.rmtree(os.path.join(directory, old), ignore_errors=True)
        self._remove_leftovers()
        return final

    def close(self):
        if not self._lock.closed:
            self._lock.close()  # releases the lock

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def read_checkpoint(directory):
    """(path of the latest checkpoint in `directory`, its meta dict); UserError if there is none."""
    pointer = os.path.join(directory, LATEST)
    if not os.path.isdir(directory):
        raise UserError("--resume %s is not a directory; give the --save directory of an earlier run" % directory)
    if not os.path.isfile(pointer):
        raise UserError("--resume %s holds no checkpoint (no '%s' file); give the --save directory "
                        "of an earlier run" % (directory, LATEST))
    with open(pointer) as f:
        path = os.path.join(directory, f.read().strip())
    try:
        with open(os.path.join(path, "meta.json")) as f:
            meta = json.load(f)
        for part in ("params", "states"):
            if not os.path.isfile(os.path.join(path, part)):
                raise OSError("no %s file" % part)
    except (OSError, ValueError) as e:
        raise UserError("--resume %s: checkpoint %s is unreadable (%s)" % (directory, path, e))
    return path, meta


def check_resumable(config, meta, directory):
    saved = meta.get("config", {})
    for key in RESUME_KEYS:
        if key in saved and saved[key] != getattr(config, key):
            def shown(value):  # an optimizer's hyper-parameter left unset took the optimizer's default
                return "unset (the optimizer's default)" if value is None else value
            raise UserError("--resume %s was trained with --%s %s, not %s; use the same settings to continue"
                            % (directory, key.replace("_", "-"), shown(saved[key]), shown(getattr(config, key))))
    if meta["epoch"] >= config.epochs:
        raise UserError("--resume %s already finished %d epochs; pass --epochs above %d to train on"
                        % (directory, meta["epoch"], meta["epoch"]))


def replanned_note(config, meta, directory, lr, iters_per_epoch, schedule):
    """A `note:` line when the run saved in checkpoint `meta` planned another number of epochs
    (its config's `epochs`) than `config` and the learning-rate schedule depends on the total
    (cosine or step decay, a warm-up that --epochs cuts short), else None. The resumed epochs
    then follow `schedule` (`lr_schedule` re-planned for config.epochs) while the finished ones
    followed the old plan: the result is neither run. An old checkpoint whose config lacks
    `epochs` gets no note."""
    planned, first = meta.get("config", {}).get("epochs"), meta["epoch"]
    if not isinstance(planned, int) or planned == config.epochs:
        return None
    old = lr_schedule(replace(config, epochs=planned), lr, iters_per_epoch)
    done = first * iters_per_epoch  # the optimizer's updates so far (its num_update)
    stride = max(1, done // 10000)
    if all(math.isclose(old(i), schedule(i), rel_tol=1e-9, abs_tol=1e-12 * abs(lr))
           for i in range(1, done + 1, stride)):
        return None  # e.g. --lr-decay none after a finished warm-up: resuming is exact
    ran = "epoch 1" if first == 1 else "epochs 1-%d" % first
    none = ("" if config.lr_decay == "none" else
            "; with --lr-decay none the rate after the warm-up does not depend on the total")
    return ("note: %s was saved by a run planned for %d epochs, and its learning-rate schedule (--lr-decay %s, "
            "--warmup-epochs %d) depends on the total: re-planned for %d, epoch %d starts at lr %.3g, while %s ran "
            "the %d-epoch plan (lr %.3g at the end of epoch %d); the result is neither a %d-epoch run nor a %d-epoch "
            "one (train that from the start%s)"
            % (directory, planned, config.lr_decay, config.warmup_epochs, config.epochs, first + 1,
               schedule(done + 1), ran, planned, old(done), first, planned, config.epochs, none))


class EpochStats:
    """Running loss and train top-1/top-5 of one epoch, read in numpy (see `hits`)."""

    def __init__(self):
        self.loss_sum, self.images, self.top1_hits, self.top5_hits = 0.0, 0, 0, 0

    def _per_image(self, total):
        return total / self.images if self.images else float("nan")

    @property
    def loss(self):
        return self._per_image(self.loss_sum)

    @property
    def top1(self):
        return self._per_image(self.top1_hits)

    @property
    def top5(self):
        return self._per_image(self.top5_hits)

    def add(self, n, losses, outputs, labels):
        """Add one batch of `n` samples; returns its mean loss (this waits for the batch)."""
        batch_loss = sum(float(l.asnumpy().sum(dtype=np.float64)) for l in losses) / n
        if math.isfinite(batch_loss):
            top1, top5 = hits(outputs, labels)
            self.loss_sum += batch_loss * n
            self.images += n
            self.top1_hits += top1
            self.top5_hits += top5
        return batch_loss


def train_step(net, trainer, loss_fn, x, y, contexts, num_workers=1, step=forward_backward):
    """One training step on the batch (x, y): split over the contexts, `step` on every slice
    (`forward_backward` or one with its signature, `recompute.checkpointed`), then the
    Trainer's update. Returns (outputs, losses, labels per context); nothing here waits for
    the step to finish."""
    xs, ys = split(x, contexts), split(y, contexts)
    outputs, losses = step(net, loss_fn, xs, ys)
    trainer.step(x.shape[0] * num_workers)  # gradients are summed over all workers' samples
    return outputs, losses, ys


def train_steps(net, trainer, loss_fn, data, contexts, num_workers=1, step=forward_backward):
    """Run one epoch's training steps (`train_step`); yield (index, size, losses, outputs,
    labels) of each batch one batch late, so that reading a loss (which waits for its batch)
    happens while the next batch is already queued: the devices never wait for
    Python, and a NaN is still pinned to the batch that produced it. `step` is
    `forward_backward` or one with its signature (`recompute.checkpointed`)."""
    pending = None
    for i, (x, y) in enumerate(data):
        outputs, losses, ys = train_step(net, trainer, loss_fn, x, y, contexts, num_workers, step)
        if pending:
            yield pending
        pending = (i, x.shape[0], losses, outputs, ys)
    if pending:
        yield pending


def param_checksums(net, ctx):
    """(sum of |w| over every parameter on `ctx`, the same over those with gradients), in one
    pass: the second covers the weights data parallelism keeps equal on every worker.
    BatchNorm's running statistics, in the first sum only, are each worker's own (from its own
    batches: the kvstore sums gradients only), so for a model with BatchNorm only the second is
    equal across workers."""
    sums = [(p.data(ctx).abs().sum().asscalar(), p.grad_req != "null") for p in net.collect_params().values()]
    return float(sum(v for v, _ in sums)), float(sum(v for v, trained in sums if trained))


def _epoch_seed(seed, epoch):
    return seed * 100003 + epoch + 1


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
    """
    contexts = list(contexts)
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
        return _fit(config, contexts, kvstore, rank, num_workers, checkpoint, meta, save_dir, saver,
                    progress, log, epoch_done, trained, memory)
    finally:
        if saver:
            saver.close()


def _fit(config, contexts, kvstore, rank, num_workers, checkpoint, meta, save_dir, saver, progress, log,
         epoch_done=None, trained=None, memory=None):
    train_set, test_set = load_for(config)
    train_data = loader(train_set, config.batch_size, shuffle=True, workers=config.workers,
                        num_parts=num_workers, part_index=rank, last_batch="discard", seed=config.seed)
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
    trainer = make_trainer(net, config, lr, schedule, kvstore)
    loss_fn = loss_of(config.model)
    first, history = 0, []
    if checkpoint:
        net.load_parameters(os.path.join(checkpoint, "params"), ctx=contexts)
        trainer.load_states(os.path.join(checkpoint, "states"))
        optimizer = optimizers.upgrade(trainer.optimizer)  # unpickled from the states: give it this run's settings
        optimizer.lr_scheduler, optimizer.wd = schedule, config.wd
        first = meta["epoch"]
        history = [Result(r["bench"], r["name"], {k: v for k, v in r.items() if k not in ("bench", "name")})
                   for r in meta.get("history", [])]
        if log:
            log("resumed from %s after epoch %d" % (checkpoint, first))
            replanned = replanned_note(config, meta, config.resume, lr, batches, schedule) if rank == 0 else None
            if replanned:
                log(replanned)

    job = kvstore if isinstance(kvstore, Job) else None
    if num_workers > 1 or not isinstance(kvstore, str):
        sync_initial_weights(net, trainer, contexts, train_set[0][0].shape, job)
    common = dict(model=config.model, dataset=config.dataset, batch_size=config.batch_size,
                  contexts=describe(contexts), devices=len(contexts), num_workers=num_workers, rank=rank,
                  hybridize=config.hybridize, kvstore=config.kvstore, workers=config.workers, dtype=config.dtype,
                  optimizer=config.optimizer)
    for epoch in range(first, config.epochs):
        mx.random.seed(_epoch_seed(config.seed, epoch))
        train_data.sampler.set_epoch(epoch)
        stats = EpochStats()
        sync()
        started_at, start, cpu_start = time.time(), time.perf_counter(), time.process_time()
        for i, n, losses, outputs, labels in train_steps(net, trainer, loss_fn, train_data, contexts,
                                                          num_workers, step):
            batch_loss = stats.add(n, losses, outputs, labels)
            if not math.isfinite(batch_loss):
                kept = (" (last good checkpoint: %s, epoch %d)" % (save_dir, epoch)
                        if save_dir and epoch > 0 and rank == 0 else "")
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
        train_s, train_cpu_s = time.perf_counter() - start, time.process_time() - cpu_start
        if memory is not None and epoch == first:
            memory.warmup = memory.steps  # the first epoch: graphs built, pools and caches filled
        test_top1, test_top5 = evaluate(net, test_data, contexts)
        epoch_s = time.perf_counter() - start
        every, weights = param_checksums(net, contexts[0])
        checked = {}
        if job is not None:  # fails loudly, on every rank, when the workers trained apart
            checked["weights_max_rel_diff"] = job.check_equal(net, contexts[0], "after epoch %d" % (epoch + 1))
        record = result("train", "epoch %d" % (epoch + 1), epoch=epoch + 1, loss=stats.loss,
                        train_top1=stats.top1, train_top5=stats.top5,
                        test_top1=test_top1, test_top5=test_top5, epoch_s=epoch_s, train_s=train_s, train_cpu_s=train_cpu_s,
                        train_started_at=started_at,
                        train_images_per_s=stats.images * num_workers / train_s, lr=trainer.learning_rate,
                        images=stats.images * num_workers, param_checksum=every, weights_checksum=weights, **common, **checked)
        if hasattr(train_set, "skipped"):  # image data with --bad-images skip
            record.metrics["skipped_images"] = train_set.skipped.value
        history.append(record)
        reached = config.target_top1 is not None and test_top1 >= config.target_top1
        if config.target_top1 is not None:
            record.metrics.update(time_to_target(history, config.target_top1, reached))
        if log:  # dist workers compare the weights' checksum: their BatchNorm statistics are their own
            log("epoch %d: loss %.4f, train top-1 %.4f, test top-1 %.4f, %.1f s, %.1f images/s, "
                "param checksum %.10g%s" % (epoch + 1, record.metrics["loss"], record.metrics["train_top1"],
                                            test_top1, epoch_s, record.metrics["train_images_per_s"],
                                            record.metrics["param_checksum"],
                                            ", weights checksum %.10g" % record.metrics["weights_checksum"]
                                            if num_workers > 1 else ""))
        if saver:
            saver.save(epoch + 1, net, trainer, {"epoch": epoch + 1, "config": asdict(config),
                                                 "history": [r.row() for r in history]})
        if epoch_done:
            epoch_done(list(history))
        if reached:
            break
    if trained and rank == 0:
        trained(net)
    return history


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


# --- scaling ------------------------------------------------------------------

def scaling(config, contexts, steps=None, progress=None):
    """Fixed training steps on 1, 2, ... N of `contexts` with the same per-device batch.

    Per device count: the measured step time (forward, backward, Trainer.step, to a
    sync), and the step split into t1 = compute (forward + backward, to a sync),
    t2 = gradient communication (trainer.allreduce_grads(), to a sync) and the
    update; the book's model says a step costs about max(t1, t2) when
    communication overlaps compute and t1 + t2 when it does not. Speedup (with its 95%
    interval from the step times of the two phases) and parallel efficiency are relative
    to one device. Returns Results, bench='scaling'.
    """
    contexts = list(contexts)
    steps = steps or config.steps
    per_device = config.batch_size // len(contexts)
    if per_device < 1:
        raise UserError("--batch-size %d is smaller than the number of contexts (%d)"
                        % (config.batch_size, len(contexts)))
    if config.kvstore in JOB_KVSTORES:
        raise UserError("--scaling runs on the contexts of one machine; use --kvstore flat, device or local")
    train_set, _ = load_for(config)
    need = per_device * len(contexts)
    index = np.arange(need) % len(train_set)
    samples = [train_set[i][0] for i in index]  # numpy (named sets) or NDArray (image data)
    x_all = mx.nd.array(np.stack([x.asnumpy() if isinstance(x, mx.nd.NDArray) else x for x in samples]))
    y_all = mx.nd.array(np.array([train_set[i][1] for i in index]))
    loss_fn = loss_of(config.model)
    results, one = [], None
    for n in range(1, len(contexts) + 1):
        ctxs = contexts[:n]
        mx.random.seed(config.seed)
        net = build_net(config, ctxs)
        trainer = make_trainer(net, config, lr_for_devices(config, n), kvstore=config.kvstore)
        batch = per_device * n
        xs = gluon.utils.split_and_load(x_all[:batch], ctxs)
        ys = gluon.utils.split_and_load(y_all[:batch], ctxs)

        def step():
            forward_backward(net, loss_fn, xs, ys)
            trainer.step(batch)
        for _ in range(2):  # warm-up: deferred init, graph building, kvstore init
            step()
        samples = {"step": [], "t1": [], "t2": [], "update": [], "cpu": []}
        for _ in range(steps):
            cpu = time.process_time()
            with Benchmark() as b:
                step()
            samples["cpu"].append(time.process_time() - cpu)  # every thread of this process, to the sync
            samples["step"].append(b.seconds)
            with Benchmark() as b:
                forward_backward(net, loss_fn, xs, ys)
            samples["t1"].append(b.seconds)
            with Benchmark() as b:
                trainer.allreduce_grads()
            samples["t2"].append(b.seconds)
            with Benchmark() as b:
                trainer.update(batch)
            samples["update"].append(b.seconds)
            if progress:
                progress()
        m = {k: Measurement(k, tuple(v)) for k, v in samples.items()}
        t1, t2, upd = m["t1"].median, m["t2"].median, m["update"].median
        rate = batch / m["step"].median
        one = one or m["step"].samples
        # against one device: the step times of the two phases, measured one after the other
        # (Welch's t on their logs), times the larger batch
        ratio = stats.two_sample_interval(one, m["step"].samples, noise_floor=0) if n > 1 else None
        speedup = {"speedup": 1.0} if ratio is None else dict(
            stats.Interval(n * ratio.estimate, n * ratio.low, n * ratio.high, ratio.n, ratio.level,
                           ratio.method).fields("speedup"))
        results.append(result(
            "scaling", "%d device%s" % (n, "s" if n > 1 else ""), m["step"],
            devices=n, contexts=describe(ctxs), per_device_batch=per_device, batch_size=batch,
            model=config.model, kvstore=config.kvstore, steps=steps,
            step_s=m["step"].median, t1_s=t1, t2_s=t2, update_s=upd, cpu_s=m["cpu"].median,
            overlap_model_s=max(t1, t2) + upd, serial_model_s=t1 + t2 + upd,
            images_per_s=rate, efficiency=speedup["speedup"] / n, **speedup))
    return results

"""The checkpoints of a training run (train --save, --resume).

`CheckpointDir` writes them, one run at a time, each complete or not at all;
`read_checkpoint` finds the latest one, `check_resumable` refuses to continue it with other
settings, and `replanned_note` says when the resumed epochs follow another learning-rate plan
than the finished ones.
"""
import errno
import json
import math
import os
import shutil
import tempfile
from dataclasses import replace

from .. import UserError, error_line
from .model_spec import text_of
from .trainers import lr_schedule
from ..runtime.outputs import umask_mode, write_output

# Fields a resumed run must share with the checkpoint it continues. The learning-rate
# settings may change (e.g. resume with a lower --lr after the loss became NaN).
# The optimizer's hyper-parameters come back with its state (pickled in the trainer states), so
# they may not change either.
RESUME_KEYS = ("model", "dataset", "limit", "batch_size", "seed", "optimizer", "momentum", "beta1", "beta2",
               "epsilon")
LATEST = "latest"

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
    """UserError when `config` may not continue the run checkpointed in `meta` (other RESUME_KEYS,
    or its epochs done). The model is compared as the text the checkpoint keeps (`text_of`:
    config.model may be a ModelSpec), so a checkpoint of any version is read as it was written."""
    saved = meta.get("config", {})
    for key in RESUME_KEYS:
        value = text_of(config.model) if key == "model" else getattr(config, key)
        if key in saved and saved[key] != value:
            def shown(value):  # an optimizer's hyper-parameter left unset took the optimizer's default
                return "unset (the optimizer's default)" if value is None else value
            raise UserError("--resume %s was trained with --%s %s, not %s; use the same settings to continue"
                            % (directory, key.replace("_", "-"), shown(saved[key]), shown(value)))
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

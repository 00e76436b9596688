"""One training step and one epoch's steps on several contexts, and what is read off them.

`split` hands each context its slice of a batch, `forward_backward` runs forward and backward
on every slice, `train_step` adds the Trainer's update, `train_steps` runs an epoch's steps
reading each batch's loss one batch late (`EpochStats`: loss and top-1/top-5, counted in numpy
by `hits`); `evaluate` is the test accuracy and `param_checksums` the weights' sums that the
workers of a job compare. Nothing here waits for a step that it does not read.
"""
import math

import numpy as np
from mxnet import autograd, gluon


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

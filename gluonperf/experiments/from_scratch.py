"""Data parallelism from scratch, as in the chapter's multi-GPU section.

Every context keeps a full copy of the parameters (`get_params`); a minibatch is split over the
contexts (`split_and_load`, also for batches that do not divide evenly); each computes the
gradient of its shard; the gradients are summed and the sum left on every context
(`allreduce`); then every context applies the same update (`sgd`). `train_batch` is one such
step for the book's NDArray LeNet (`lenet`); `train` runs epochs, one record per epoch.

The one thing to know: `allreduce` has three schedules (`method=`: ``book``, the chapter's
code; ``ring``; ``tree``), each a plain list of steps ``(kind, src, dst, lo, hi)`` from which
`received_bytes` reads the traffic; `experiments.allreduce_bandwidth` times them. How each
moves the data and what it costs: docs/commands/bench.md, "python -m gluonperf.bench allreduce".
"""
import math

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

from .. import UserError
from ..measure.harness import Benchmark
from ..runtime.blas import check_concurrent_products, matmul
from ..records import Result

# --- the model: the book's LeNet on NDArrays ---------------------------------


def init_params(scale=0.01, classes=10, seed=0, ctx=None):
    """The book's LeNet parameters [W1, b1, W2, b2, W3, b3, W4, b4] (normal(0, scale) weights, zero biases)."""
    rng = np.random.RandomState(seed)
    ctx = ctx or mx.cpu()

    def normal(*shape):
        return nd.array(rng.normal(scale=scale, size=shape), ctx=ctx, dtype="float32")

    W1, b1 = normal(20, 1, 3, 3), nd.zeros(20, ctx=ctx)
    W2, b2 = normal(50, 20, 5, 5), nd.zeros(50, ctx=ctx)
    W3, b3 = normal(800, 128), nd.zeros(128, ctx=ctx)
    W4, b4 = normal(128, classes), nd.zeros(classes, ctx=ctx)
    return [W1, b1, W2, b2, W3, b3, W4, b4]


def lenet(X, params):
    """The chapter's LeNet: X (batch, 1, 28, 28) -> logits (batch, classes)."""
    h1_conv = nd.Convolution(data=X, weight=params[0], bias=params[1], kernel=(3, 3), num_filter=params[0].shape[0])
    h1_activation = nd.relu(h1_conv)
    h1 = nd.Pooling(data=h1_activation, pool_type="avg", kernel=(2, 2), stride=(2, 2))
    h2_conv = nd.Convolution(data=h1, weight=params[2], bias=params[3], kernel=(5, 5), num_filter=params[2].shape[0])
    h2_activation = nd.relu(h2_conv)
    h2 = nd.Pooling(data=h2_activation, pool_type="avg", kernel=(2, 2), stride=(2, 2))
    h2 = nd.flatten(h2)
    # the book's nd.dot, through oneDNN: MXNet's OpenBLAS hangs when two contexts run it at once
    h3_linear = matmul(h2, params[4]) + params[5]
    h3 = nd.relu(h3_linear)
    y_hat = matmul(h3, params[6]) + params[7]
    return y_hat


loss = gluon.loss.SoftmaxCrossEntropyLoss()


def get_params(params, ctx):
    """Copy the parameters to `ctx` and attach a gradient to each copy."""
    new_params = [p.copyto(ctx) for p in params]
    for p in new_params:
        p.attach_grad()
    return new_params


def sgd(params, lr, batch_size):
    """Minibatch SGD in place (d2l.sgd): the gradients are sums over `batch_size` samples."""
    for param in params:
        param[:] = param - lr * param.grad / batch_size


# --- allreduce ---------------------------------------------------------------


def book_schedule(k, n):
    """The book's allreduce: add every array into the first, then copy the sum back.

        for i in range(1, len(data)):
            data[0][:] += data[i].copyto(data[0].context)
        for i in range(1, len(data)):
            data[0].copyto(data[i])
    """
    return ([("add", i, 0, 0, n) for i in range(1, k)] +
            [("copy", 0, i, 0, n) for i in range(1, k)])


def ring_schedule(k, n):
    """Reduce-scatter then all-gather around the ring 0 -> 1 -> ... -> k-1 -> 0."""
    bounds = [j * n // k for j in range(k + 1)]

    def chunk(j):
        j %= k
        return bounds[j], bounds[j + 1]

    steps = []
    for s in range(k - 1):  # reduce-scatter: afterwards context i holds the sum of chunk i+1
        steps += [("add", i, (i + 1) % k) + chunk(i - s) for i in range(k)]
    for s in range(k - 1):  # all-gather: pass the summed chunks on around the ring
        steps += [("copy", i, (i + 1) % k) + chunk(i + 1 - s) for i in range(k)]
    return [step for step in steps if step[4] > step[3]]  # fewer elements than contexts: skip empty chunks


def tree_schedule(k, n):
    """Binomial tree: sum pairs, then pairs of pairs, into context 0; copy back down the tree."""
    distances = []
    d = 1
    while d < k:
        distances.append(d)
        d *= 2
    reduce = [("add", i + d, i, 0, n) for d in distances for i in range(0, k - d, 2 * d)]
    broadcast = [("copy", i, i + d, 0, n) for d in reversed(distances) for i in range(0, k - d, 2 * d)]
    return reduce + broadcast


SCHEDULES = {"book": book_schedule, "ring": ring_schedule, "tree": tree_schedule}
METHODS = list(SCHEDULES)


def check_method(method):
    if method not in SCHEDULES:
        raise UserError("unknown allreduce method %r; choose one of %s" % (method, ", ".join(METHODS)))
    return SCHEDULES[method]


def allreduce(arrays, method="book", buffers=None):
    """Sum `arrays` (one per context, same shape) and leave the sum in every one of them, in place.

    `method` is 'book' (reduce onto the first context, then broadcast), 'ring'
    (reduce-scatter + all-gather) or 'tree' (binomial tree). Returns `arrays`.

    A context that adds what it receives needs it in its own memory first. By
    default each transfer goes to a fresh temporary, as in the book. Pass a dict as
    `buffers` to keep one receive buffer per context in it and reuse it on later
    calls (as kvstore keeps its merge buffers): on CPU, MXNet takes every temporary
    from malloc, and from 32 MiB up glibc maps fresh pages for each one, which makes
    a copy into a new array about ten times slower than into an existing one.
    """
    schedule = check_method(method)
    if not arrays:
        raise UserError("allreduce needs at least one array")
    shape = arrays[0].shape
    for a in arrays[1:]:
        if a.shape != shape:
            raise UserError("allreduce needs arrays of one shape; got %s and %s" % (shape, a.shape))
    flats = [a if a.ndim == 1 else a.reshape(-1) for a in arrays]  # views: writing them writes the arrays
    n = flats[0].shape[0]

    def part(i, lo, hi):
        return flats[i] if (lo, hi) == (0, n) else flats[i][lo:hi]

    def receive(source, ctx):
        if buffers is None:
            return source.copyto(ctx)
        key = (ctx, source.dtype)
        if key not in buffers or buffers[key].shape[0] < n:
            buffers[key] = nd.empty(n, ctx=ctx, dtype=source.dtype)
        size = source.shape[0]
        buffer = buffers[key] if size == buffers[key].shape[0] else buffers[key][:size]
        source.copyto(buffer)
        return buffer

    for kind, src, dst, lo, hi in schedule(len(arrays), n):
        target = part(dst, lo, hi)
        if kind == "add":
            target += receive(part(src, lo, hi), target.context)
        else:
            part(src, lo, hi).copyto(target)
    return arrays


def received_bytes(method, k, nbytes):
    """Bytes each of `k` contexts receives during one allreduce of an `nbytes` array (a list of k)."""
    received = [0] * k
    for kind, src, dst, lo, hi in check_method(method)(k, nbytes):
        received[dst] += hi - lo
    return received


# --- split_and_load ----------------------------------------------------------


def split_and_load(data, ctx_list, even_split=True):
    """Split `data` along axis 0 into one shard per context and copy each shard there.

    With `even_split=True` the batch must divide evenly (as the book assumes). With
    `even_split=False` shards differ in size by at most one, e.g. 7 samples over 3
    contexts gives 2, 2, 3. Either way every context gets at least one sample.
    """
    if not isinstance(data, nd.NDArray):
        data = nd.array(data)
    n, k = data.shape[0], len(ctx_list)
    if k == 0:
        raise UserError("split_and_load needs at least one context")
    if n < k:
        raise UserError("a batch of %d samples cannot be split over %d contexts (each needs at least one); "
                        "use a larger batch or fewer contexts" % (n, k))
    if even_split and n % k:
        raise UserError("a batch of %d samples does not divide evenly over %d contexts; use a batch size "
                        "that is a multiple of %d, or even_split=False" % (n, k, k))
    bounds = [i * n // k for i in range(k + 1)]
    return [data[bounds[i]:bounds[i + 1]].as_in_context(ctx_list[i]) for i in range(k)]


# --- training ----------------------------------------------------------------


def train_batch(X, y, device_params, ctx, lr, method="book"):
    """One data-parallel SGD step on the whole minibatch (X, y); returns the per-context losses.

    Shards may differ in size by one; gradients are sums, and the update divides by
    the full batch size, so the step equals the same step on one context.
    """
    device_Xs = split_and_load(X, ctx, even_split=False)
    device_ys = split_and_load(y, ctx, even_split=False)
    with autograd.record():  # each context computes the loss of its shard
        ls = [loss(lenet(device_X, device_W), device_y)
              for device_X, device_y, device_W in zip(device_Xs, device_ys, device_params)]
    for l in ls:  # backward on each context
        l.backward()
    # sum the gradients over the contexts and leave the sum on each of them
    for i in range(len(device_params[0])):
        allreduce([device_params[c][i].grad for c in range(len(ctx))], method)
    for param in device_params:  # every context applies the same update
        sgd(param, lr, X.shape[0])  # the full batch size
    return ls


def evaluate_accuracy(data_iter, params, ctx):
    """Fraction of samples whose arg-max logit is the label, computed on one context."""
    correct, total = nd.zeros(1, ctx=ctx), 0
    for X, y in data_iter:
        X, y = X.as_in_context(ctx), y.as_in_context(ctx).astype("float32")
        correct += (lenet(X, params).argmax(axis=1) == y).sum()
        total += y.shape[0]
    return correct.asscalar() / max(total, 1)


def train(ctx, train_iter, test_iter, epochs=4, lr=0.2, method="book", params=None, progress=None):
    """Train the book's LeNet data-parallel over `ctx`; one Result per epoch.

    `train_iter`/`test_iter` yield (X, y) batches, e.g. gluon DataLoaders. Each epoch's
    time covers the training batches only (each ends in a sync, as in the book);
    test accuracy is computed on the first context afterwards. `progress`, if given,
    is called after every batch.
    """
    ctx = list(ctx)
    check_method(method)
    if not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
        raise ValueError("lr must be a positive number, got %r" % (lr,))
    check_concurrent_products(ctx)
    params = params if params is not None else init_params()
    device_params = [get_params(params, c) for c in ctx]
    records = []
    for epoch in range(1, epochs + 1):
        images, loss_sum = 0, nd.zeros(1, ctx=ctx[0])
        with Benchmark("epoch %d" % epoch) as b:
            for X, y in train_iter:
                ls = train_batch(X, y.astype("float32"), device_params, ctx, lr, method)
                for l in ls:
                    loss_sum += l.sum().as_in_context(ctx[0])
                images += X.shape[0]
                nd.waitall()
                if progress is not None:
                    progress()
        train_loss = loss_sum.asscalar() / max(images, 1)
        if not math.isfinite(train_loss):
            from ..training.loop import Diverged
            raise Diverged("loss became %s in epoch %d (learning rate %g); lower --lr" % (train_loss, epoch, lr))
        test_acc = evaluate_accuracy(test_iter, device_params[0], ctx[0])
        records.append(Result("scratch", "epoch %d" % epoch, {
            "epoch": epoch, "time_s": b.seconds, "images_per_s": images / b.seconds,
            "train_loss": train_loss, "test_acc": test_acc,
            "images": images, "contexts": ",".join(str(c) for c in ctx), "method": method, "lr": lr}))
    return records


# --- synthetic Fashion-MNIST-shaped data ---------------------------------------


class Shuffled(gluon.data.Sampler):
    """Indices 0..n-1 in a new random order every epoch, from a generator of its own (seeded)."""

    def __init__(self, length, seed=0):
        self._length = length
        self._rng = np.random.RandomState(seed)

    def __iter__(self):
        return iter(self._rng.permutation(self._length).tolist())

    def __len__(self):
        return self._length


def loaders(train_set, test_set, batch_size, num_contexts=1, seed=0):
    """DataLoaders over the sets, the training one shuffled reproducibly from `seed`. The last,
    short training batch is dropped if it has fewer samples than contexts (it could not give
    each context one)."""
    rest = len(train_set) % batch_size
    last = "discard" if 0 < rest < num_contexts else "keep"
    return (gluon.data.DataLoader(train_set, batch_size, sampler=Shuffled(len(train_set), seed), last_batch=last),
            gluon.data.DataLoader(test_set, batch_size, shuffle=False))

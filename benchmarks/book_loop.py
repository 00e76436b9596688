"""The yardstick: the chapter's concise ResNet-18 training loop, as the book writes it.

From "8.5 多GPU计算的简洁实现" (the MXNet chapter): ResNet-18 for 28x28 inputs, run
imperatively (not hybridized), initialised with Normal(0.01) on the contexts,
`gluon.Trainer(..., 'sgd', {'learning_rate': lr})`, a DataLoader the way
`d2l.load_data_fashion_mnist` builds it (shuffle, 4 worker processes on Linux),
`split_and_load` of each batch, one `backward()` per context, `trainer.step`,
and no sync inside the loop: the only `nd.waitall()` is after it, before the
clock stops. The default environment is left alone (no OMP_NUM_THREADS etc.):
this is what a reader of the chapter runs.

    python benchmarks/book_loop.py --batch-size 64 --steps 20

prints one line with images/s (gluonperf's wire: {"wire": 1, "answer": {...}}).
benchmarks/train_throughput.py runs it side by side with `python -m gluonperf.train`, each in a
fresh process.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gluonperf  # noqa: E402,F401  before MXNet: keeps scikit-learn out of MXNet's start-up (gluonperf/__init__.py)
import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import autograd, gluon, init, nd  # noqa: E402
from mxnet.gluon import data as gdata, loss as gloss, utils as gutils  # noqa: E402

from gluonperf.runtime import wire  # noqa: E402
from gluonperf.runtime.worker_temp import share_with_workers  # noqa: E402
from gluonperf.training.models import get_model, resnet18  # noqa: E402


def book_model(name):
    """The book's network as the book writes it: its 28x28 ResNet-18 (with `F.relu`) by
    default, run imperatively; other names come from gluonperf.training.models."""
    return resnet18(10, book_relu=True) if name == "resnet18" else get_model(name, 10)


def synthetic_dataset(size, seed=0, classes=10):
    """Random 28x28 grey images with labels, the shape of Fashion-MNIST samples after ToTensor.

    Uses gluonperf.training.data's synthetic set when it exists (the same data
    `gluonperf.train --dataset synthetic` trains on), else an equivalent array set."""
    try:
        from gluonperf.training.data import load_dataset
        train_set, _ = load_dataset("synthetic", limit=size, seed=seed)
        return train_set
    except ImportError:
        rng = np.random.RandomState(seed)
        x = rng.uniform(size=(size, 1, 28, 28)).astype("float32")
        y = rng.randint(0, classes, size=size).astype("int32")
        return gdata.ArrayDataset(x, y)


def load_data(dataset, batch_size, num_workers=None):
    """As d2l.load_data_fashion_mnist: shuffled DataLoader, 4 workers except on Windows."""
    if num_workers is None:
        num_workers = 0 if sys.platform.startswith("win32") else 4
    if num_workers:  # not the book's: its workers, ended mid-batch, would leave pymp-* folders (runtime.worker_temp)
        share_with_workers()
    return gdata.DataLoader(dataset, batch_size, shuffle=True, num_workers=num_workers)


def train_step(net, trainer, loss, X, y, ctx, batch_size):
    """The body of the book's training loop: split the batch over the contexts, one
    backward per context, one trainer step. No sync: the book's loop runs ahead."""
    gpu_Xs = gutils.split_and_load(X, ctx)
    gpu_ys = gutils.split_and_load(y, ctx)
    with autograd.record():
        ls = [loss(net(gpu_X), gpu_y) for gpu_X, gpu_y in zip(gpu_Xs, gpu_ys)]
    for l in ls:
        l.backward()
    trainer.step(batch_size)


def train(net, train_iter, ctx, batch_size, lr, warmup_steps=0):
    """The book's `train` body for one pass over train_iter.

    The first `warmup_steps` batches (graph building, first allocations) are run
    and synced before the clock starts; returns (images timed, seconds)."""
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    loss = gloss.SoftmaxCrossEntropyLoss()
    images, start = 0, None
    for i, (X, y) in enumerate(train_iter):
        if i == warmup_steps:
            nd.waitall()
            start = time.time()
        train_step(net, trainer, loss, X, y, ctx, batch_size)
        if i >= warmup_steps:
            images += X.shape[0]
    nd.waitall()
    return images, time.time() - start


def serve(batch_size=64, warmup_steps=2, contexts=None, lr=0.1, workers=None, seed=0, model="resnet18"):
    """Warm up, then answer each request on stdin ({"steps": N}, gluonperf's wire: `wire.serve`)
    with one line: the book's loop body over the next N batches of an endless DataLoader, ended
    by nd.waitall() (as gluonperf.workers.steprate --serve does, so tune can interleave them)."""
    ctx = contexts or [mx.cpu()]
    mx.random.seed(seed)
    net = book_model(model)
    net.initialize(init=init.Normal(sigma=0.01), ctx=ctx, force_reinit=True)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
    loss = gloss.SoftmaxCrossEntropyLoss()
    train_iter = load_data(synthetic_dataset(batch_size * 16, seed), batch_size, workers)

    def batches():
        while True:
            for batch in train_iter:
                yield batch
    source = batches()

    def steps(n):
        for _ in range(n):
            X, y = next(source)
            train_step(net, trainer, loss, X, y, ctx, batch_size)
        nd.waitall()
    steps(warmup_steps)

    def timed(settings):
        n = int(settings["steps"])
        start = time.time()
        steps(n)
        seconds = time.time() - start
        return {"images_per_s": batch_size * n / seconds, "seconds": seconds, "images": batch_size * n}
    wire.serve(timed)


def run(batch_size=64, steps=20, warmup_steps=2, contexts=None, lr=0.1, workers=None, seed=0, model="resnet18"):
    ctx = contexts or [mx.cpu()]
    mx.random.seed(seed)
    net = book_model(model)
    net.initialize(init=init.Normal(sigma=0.01), ctx=ctx, force_reinit=True)
    dataset = synthetic_dataset(batch_size * (steps + warmup_steps), seed)
    train_iter = load_data(dataset, batch_size, workers)
    images, seconds = train(net, train_iter, ctx, batch_size, lr, warmup_steps)
    return {"images_per_s": images / seconds, "seconds": seconds, "images": images,
            "batch_size": batch_size, "steps": steps, "contexts": ",".join(str(c) for c in ctx)}


def main(argv=None):
    p = argparse.ArgumentParser(description="The book's concise ResNet-18 loop; prints one line (gluonperf's wire).")
    p.add_argument("--batch-size", type=int, default=64, help="global batch size (default: %(default)s)")
    p.add_argument("--model", default="resnet18", help="a gluonperf model name (default: %(default)s, the book's)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default: %(default)s)")
    p.add_argument("--gpus", type=int, default=0, help="0: one CPU context as in the book's single-device run; "
                                                      "N>0: cpu(0)..cpu(N-1) standing in for N GPUs")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default: the book's 4)")
    p.add_argument("--serve", action="store_true",
                   help="after warm-up, answer each request on stdin ({\"steps\": N}) with one line (for tune/levers)")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 0:
        p.error("--batch-size and --steps must be >= 1, --warmup >= 0")
    ctx = [mx.cpu(i) for i in range(args.gpus)] if args.gpus else [mx.cpu()]
    if args.serve:
        return serve(args.batch_size, args.warmup, ctx, workers=args.workers, model=args.model)
    print(wire.say(run(args.batch_size, args.steps, args.warmup, ctx, workers=args.workers, model=args.model)))


if __name__ == "__main__":
    main()

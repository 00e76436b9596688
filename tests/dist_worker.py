"""A tiny dist_sync worker for the launcher tests (run by `python -m gluonperf.launch`).

Every worker starts from DIFFERENT random weights (seeded by its rank) and trains on its
own part of a small synthetic regression set; with `gluon.Trainer(kvstore='dist_sync')`
the parameter server makes them agree, so after the last step every worker holds the same
parameters. Each saves them to OUTDIR/params-rank<kv.rank>.npz, with the losses it saw.

    python tests/dist_worker.py OUTDIR [--steps N] [--kvstore dist_sync]
                                       [--crash-rank R [--crash-how exit|raise] [--exit-code C]]
"""
import argparse
import os
import sys

import gluonperf  # noqa: F401  before MXNet: keeps scikit-learn out of MXNet's start-up (the tests' PYTHONPATH)
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon


def synthetic(n=256, features=8, seed=0):
    rs = np.random.RandomState(seed)
    x = rs.rand(n, features).astype("float32")
    w = rs.randn(features, 1).astype("float32")
    return x, x @ w + 0.5


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--kvstore", default="dist_sync")
    p.add_argument("--crash-rank", type=int, default=None,
                   help="this rank exits with --exit-code after the first step")
    p.add_argument("--exit-code", type=int, default=3)
    p.add_argument("--crash-how", choices=["exit", "raise"], default="exit",
                   help="crash with sys.exit(--exit-code) or an uncaught exception")
    args = p.parse_args()
    os.makedirs(args.outdir, exist_ok=True)  # both workers may create it; a fresh machine has none

    kv = mx.kv.create(args.kvstore)
    rank, workers = kv.rank, kv.num_workers
    print("rank %d of %d workers" % (rank, workers), flush=True)

    mx.random.seed(100 + rank)  # different initial weights on every worker
    net = gluon.nn.Dense(1)
    net.initialize(mx.init.Normal(1.0))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kv)
    loss_fn = gluon.loss.L2Loss()

    x, y = synthetic()
    part = len(x) // workers  # every worker the same number of batches
    x, y = x[rank * part:(rank + 1) * part], y[rank * part:(rank + 1) * part]
    losses = []
    for step in range(args.steps):
        i = (step * args.batch_size) % (part - args.batch_size + 1)
        xb, yb = mx.nd.array(x[i:i + args.batch_size]), mx.nd.array(y[i:i + args.batch_size])
        with autograd.record():
            loss = loss_fn(net(xb), yb)
        loss.backward()
        trainer.step(args.batch_size)
        losses.append(float(loss.mean().asscalar()))
        print("step %d loss %.4f" % (step, losses[-1]), flush=True)
        if args.crash_rank == rank:
            print("rank %d crashing on purpose (%s)" % (rank, args.crash_how), flush=True)
            if args.crash_how == "raise":
                raise RuntimeError("worker %d crashed on purpose" % rank)
            sys.exit(args.exit_code)

    arrays = {name: p.data().asnumpy() for name, p in net.collect_params().items()}
    arrays["losses"] = np.array(losses)
    np.savez(os.path.join(args.outdir, "params-rank%d.npz" % rank), **arrays)
    print("saved", flush=True)


if __name__ == "__main__":
    main()

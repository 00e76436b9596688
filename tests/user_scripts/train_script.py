"""A plain Gluon training script, as a user writes one, that knows nothing of gluonperf: the
tests run it under `python -m gluonperf.profile -- python tests/user_scripts/train_script.py`.

--data slow: a dataset that sleeps in every sample (--delay seconds per batch in all), read in
the script's own thread: the step waits for its data. --data memory: the same samples from
arrays in memory. --ctx cpu0,cpu1: the batch split over two contexts. --fail-at N: raise in
step N. --no-trainer: an update by hand, no gluon.Trainer.
"""
import argparse
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("--data", choices=["memory", "slow"], default="memory")
p.add_argument("--delay", type=float, default=0.02, help="seconds per batch of --data slow")
p.add_argument("--steps", type=int, default=40, help="steps in all (over as many epochs as that takes)")
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--ctx", default="cpu0")
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--workers", type=int, default=0)
p.add_argument("--hybridize", action="store_true")
p.add_argument("--fail-at", type=int, default=None)
p.add_argument("--no-trainer", action="store_true")
p.add_argument("--kvstore", default="device")
args = p.parse_args()


class SlowDataset(gluon.data.Dataset):
    """Samples that take time to make (a decode, a remote read), one by one."""

    def __init__(self, x, y, delay):
        self.x, self.y, self.delay = x, y, delay

    def __getitem__(self, i):
        time.sleep(self.delay)
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


ctx = [mx.cpu(int(c[3:] or 0)) for c in args.ctx.split(",")]
rng = np.random.RandomState(0)
x = rng.uniform(size=(16 * args.batch_size, 784)).astype("float32")
y = rng.randint(0, 10, size=len(x)).astype("float32")
if args.data == "slow":
    dataset = SlowDataset(x, y, args.delay / args.batch_size)
else:
    dataset = gluon.data.ArrayDataset(x, y)
loader = gluon.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, last_batch="discard",
                               num_workers=args.workers)

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(args.hidden, activation="relu"), gluon.nn.Dense(args.hidden, activation="relu"),
        gluon.nn.Dense(10))
net.initialize(mx.init.Xavier(), ctx=ctx)
if args.hybridize:
    net.hybridize(static_alloc=True, static_shape=True)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = None if args.no_trainer else gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05},
                                                      kvstore=args.kvstore)

step = 0
while step < args.steps:
    total = 0.0
    for data, label in loader:
        xs = gluon.utils.split_and_load(data, ctx)
        ys = gluon.utils.split_and_load(label, ctx)
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
        for l in losses:
            l.backward()
        if trainer is not None:
            trainer.step(args.batch_size)
        else:
            for param in net.collect_params().values():
                for w, g in zip(param.list_data(), param.list_grad()):
                    w[:] = w - 0.05 / args.batch_size * g
        total += sum(l.sum().asscalar() for l in losses)
        step += 1
        if args.fail_at is not None and step == args.fail_at:
            raise RuntimeError("the script's own failure at step %d" % step)
        if step == args.steps:
            break
    print("epoch done: %d steps, loss %.4f" % (step, total / (args.batch_size * len(loader))))
print("training finished")

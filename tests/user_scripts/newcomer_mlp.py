"""A newcomer's training script, as the tutorials write one, that knows nothing of gluonperf:
the tests run it under `python -m gluonperf.tune -- python tests/user_scripts/newcomer_mlp.py`.

The model is a deep, narrow `nn.Sequential` of Dense layers, never hybridized (so hybridize,
after turning it into a HybridSequential, pays: Python's dispatch of many small layers is
most of the step). Flags change one thing each:
--hybridize: the model is a HybridSequential, hybridized static (already tuned);
--loader: a gluon DataLoader over an ArrayDataset (else batches sliced from NDArrays);
--slow-in-workers K: each batch costs K times the script's last step in a DataLoader worker (process
  or thread; not in the script's own process), the workers taking turns, and the script waits for
  each step so that its step is known: workers make this script about K times slower on any machine,
  by construction;
--read-loss: read the loss (asscalar) every step, after a model heavy enough that Python waits;
--wide N: the layers' width; --fail: raise at the third step; --no-trainer: update by hand.
"""
import argparse
import multiprocessing
import os
import threading
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

p = argparse.ArgumentParser()
p.add_argument("--hybridize", action="store_true")
p.add_argument("--loader", action="store_true")
p.add_argument("--slow-in-workers", type=float, default=0.0)
p.add_argument("--read-loss", action="store_true")
p.add_argument("--layers", type=int, default=24)
p.add_argument("--wide", type=int, default=16)
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--epochs", type=int, default=1000)
p.add_argument("--fail", action="store_true")
p.add_argument("--no-trainer", action="store_true")
args = p.parse_args()

MAIN = os.getpid()
LAST_STEP = multiprocessing.Value("d", 0.0, lock=False)  # seconds, written by the script's own loop
TURNS = multiprocessing.Lock()  # the workers, processes or threads, take turns


class Samples(gluon.data.ArrayDataset):
    def __getitem__(self, i):
        if args.slow_in_workers and (os.getpid() != MAIN or threading.current_thread() is not threading.main_thread()):
            with TURNS:
                time.sleep(args.slow_in_workers * LAST_STEP.value / args.batch_size)
        return super().__getitem__(i)


rng = np.random.RandomState(0)
x = rng.uniform(size=(32 * args.batch_size, 32)).astype("float32")
y = rng.randint(0, 2, size=len(x)).astype("float32")
if args.loader:
    batches = gluon.data.DataLoader(Samples(x, y), batch_size=args.batch_size, shuffle=True, last_batch="discard")
else:
    xs, ys = mx.nd.array(x), mx.nd.array(y)
    batches = [(xs[i:i + args.batch_size], ys[i:i + args.batch_size]) for i in range(0, len(x), args.batch_size)]

net = nn.HybridSequential() if args.hybridize else nn.Sequential()
for _ in range(args.layers):
    net.add(nn.Dense(args.wide, activation="relu"))
net.add(nn.Dense(2))
net.initialize(mx.init.Xavier())
if args.hybridize:
    net.hybridize(static_alloc=True, static_shape=True)
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = None if args.no_trainer else gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

step = 0
for epoch in range(args.epochs):
    total = mx.nd.zeros(1)
    for data, label in batches:
        started = time.perf_counter()
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        if trainer is not None:
            trainer.step(data.shape[0])
        else:
            for param in net.collect_params().values():
                param.data()[:] -= 0.01 / args.batch_size * param.grad()
        if args.slow_in_workers:
            mx.nd.waitall()
            LAST_STEP.value = time.perf_counter() - started
        step += 1
        if args.fail and step == 3:
            raise RuntimeError("the script's own failure at step 3")
        if args.read_loss:
            print("loss %.4f" % loss.mean().asscalar())
        else:
            total += loss.sum()
    if epoch % 100 == 0:
        print("epoch %d: loss %.4f" % (epoch, total.asscalar() / len(x)))

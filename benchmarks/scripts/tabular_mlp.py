"""A newcomer's tabular classifier, written the way the tutorials write one (benchmarks/advice.py
tunes it with `python -m gluonperf.tune -- python benchmarks/scripts/tabular_mlp.py`).

As written: a deep, narrow `nn.Sequential` never hybridized, a per-sample feature transform
in a DataLoader without workers, and the loss read (`asscalar`) after every batch.
The flags apply the changes a recipe can name, by hand, as their author would edit the
script (benchmarks/advice.py passes them): --hybridize {hybrid,static} (the model built as a
HybridSequential and hybridized), --num-workers N and --thread-pool (the DataLoader),
--amp (bfloat16 AMP before the model is built), --read-every N (the loss added up on the device
and read every N batches).
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=20)
p.add_argument("--hybridize", choices=["none", "hybrid", "static"], default="none")
p.add_argument("--num-workers", type=int, default=0)
p.add_argument("--thread-pool", action="store_true")
p.add_argument("--amp", action="store_true")
p.add_argument("--read-every", type=int, default=1)
args = p.parse_args()

FEATURES, CLASSES, SAMPLES = 48, 4, 16384
rng = np.random.RandomState(0)
X = rng.normal(size=(SAMPLES, FEATURES)).astype("float32") * rng.uniform(0.5, 4, size=FEATURES).astype("float32")
Y = (X[:, :CLASSES].argmax(axis=1)).astype("float32")
MEAN, STD = X.mean(axis=0), X.std(axis=0)


def standardize(features, label):
    """Per-sample feature transform, as a tutorial writes it."""
    return (features - MEAN) / STD, label


dataset = gluon.data.ArrayDataset(X, Y).transform(standardize)
train_data = gluon.data.DataLoader(dataset, batch_size=128, shuffle=True, num_workers=args.num_workers,
                                   thread_pool=args.thread_pool)

if args.amp:
    from mxnet.contrib import amp
    amp.init(target_dtype="bfloat16")
net = nn.HybridSequential() if args.hybridize != "none" else nn.Sequential()
for width in (256, 256, 128, 128, 128, 64, 64, 64, 32, 32):
    net.add(nn.Dense(width, activation="relu"))
net.add(nn.Dense(CLASSES))
net.initialize(mx.init.Xavier())
if args.hybridize != "none":
    net.hybridize(static_alloc=args.hybridize == "static", static_shape=args.hybridize == "static")
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})

for epoch in range(args.epochs):
    running, seen = mx.nd.zeros(1), 0
    for i, (data, label) in enumerate(train_data):
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(data.shape[0])
        running = running + loss.mean()
        seen += 1
        if (i + 1) % args.read_every == 0:
            print("epoch %d batch %d loss %.4f" % (epoch, i, running.asscalar() / seen), end="\r")
            running, seen = mx.nd.zeros(1), 0
    print()

"""The twin of epoch_outputs_kept.py that scores each epoch without keeping its outputs: the
correct count is added up on the device, step by step, and read once at the epoch's end. Its
memory stays flat after the warm-up: the tests run it under `python -m gluonperf.profile --`,
which must call it `flat`. cache_filled_once.py is this script with a cache filled once.

The loss is printed every --log-every steps (a read that waits for the engine), as training
scripts do: Python never runs more than that many steps ahead of the engine, on any machine.
--steps: the steps of the epoch (one epoch).
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=400)
p.add_argument("--log-every", type=int, default=10)
args = p.parse_args()

rng = np.random.RandomState(0)
batches = [(mx.nd.array(rng.uniform(size=(64, 32))), mx.nd.array(rng.randint(0, 1000, size=64)))
           for _ in range(16)]
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(32, activation="relu"), gluon.nn.Dense(1000))
net.initialize(mx.init.Xavier())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

correct = mx.nd.zeros(1)
for step in range(args.steps):
    data, label = batches[step % len(batches)]
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, label)
    loss.backward()
    trainer.step(data.shape[0])
    correct = correct + (out.argmax(axis=1) == label).sum()
    if (step + 1) % args.log_every == 0:
        print("step %d: loss %.4f" % (step + 1, loss.mean().asscalar()))
print("epoch done: accuracy %.4f" % (correct.asscalar() / (64 * args.steps)))

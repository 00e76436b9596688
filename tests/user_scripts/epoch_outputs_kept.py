"""A training script that scores each epoch at its end from the outputs it kept: every step's
output NDArray goes into a list until the epoch ends. Memory grows by one output a step
(64 x 1000 float32, 250 KiB: the scores of 1000 classes) for as long as the epoch lasts,
which here is the whole run: the tests run it under `python -m gluonperf.profile --`, which
must call it `grows` and name the line that makes the held outputs. Its twin,
epoch_correct_on_device.py, adds the correct count up on the device instead.

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

outputs, labels = [], []
for step in range(args.steps):
    data, label = batches[step % len(batches)]
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, label)
    loss.backward()
    trainer.step(data.shape[0])
    outputs.append(out)
    labels.append(label)
    if (step + 1) % args.log_every == 0:
        print("step %d: loss %.4f" % (step + 1, loss.mean().asscalar()))
correct = sum(float((o.argmax(axis=1) == l).sum().asscalar()) for o, l in zip(outputs, labels))
print("epoch done: accuracy %.4f" % (correct / (64 * args.steps)))

"""A training script that scores each epoch at its end: it keeps every step's output to compute
the epoch's accuracy once the epoch is over (1000 classes, batch 64: 250 KiB a step, held until
the epoch ends). --on-device adds the correct count up on the device instead, step by step, and
reads it once at the epoch's end: nothing is held. The loss is printed every 10 steps."""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=400, help="steps of the epoch")
p.add_argument("--on-device", action="store_true", help="add the correct count up on the device")
args = p.parse_args()

rng = np.random.RandomState(0)
batches = [(mx.nd.array(rng.uniform(size=(64, 32))), mx.nd.array(rng.randint(0, 1000, size=64)))
           for _ in range(16)]
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(32, activation="relu"), gluon.nn.Dense(1000))
net.initialize(mx.init.Xavier())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

outputs, labels, correct = [], [], mx.nd.zeros(1)
for step in range(args.steps):
    data, label = batches[step % len(batches)]
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, label)
    loss.backward()
    trainer.step(data.shape[0])
    if args.on_device:
        correct = correct + (out.argmax(axis=1) == label).sum()
    else:
        outputs.append(out)
        labels.append(label)
    if (step + 1) % 10 == 0:  # the loss read every 10 steps, printed every 100
        value = loss.mean().asscalar()
        if (step + 1) % 100 == 0:
            print("step %d: loss %.4f" % (step + 1, value))
if not args.on_device:
    correct = sum((o.argmax(axis=1) == l).sum() for o, l in zip(outputs, labels))
print("epoch done: accuracy %.4f" % (correct.asscalar() / (64 * args.steps)))

"""epoch_correct_on_device.py with a cache filled once: at steps --cache-at to --cache-at + 4
(after the warm-up) it puts 16 MiB a step into a dict it keeps to the end (80 MiB in all), then
nothing more. Its memory steps up once and stays: the tests run it under
`python -m gluonperf.profile --`, which must not call that a leak.

The loss is printed every --log-every steps (a read that waits for the engine), as training
scripts do: Python never runs more than that many steps ahead of the engine, on any machine.
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=400)
p.add_argument("--log-every", type=int, default=10)
p.add_argument("--cache-at", type=int, default=150)
args = p.parse_args()

rng = np.random.RandomState(0)
batches = [(mx.nd.array(rng.uniform(size=(64, 32))), mx.nd.array(rng.randint(0, 1000, size=64)))
           for _ in range(16)]
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(32, activation="relu"), gluon.nn.Dense(1000))
net.initialize(mx.init.Xavier())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

cache = {}
correct = mx.nd.zeros(1)
for step in range(args.steps):
    data, label = batches[step % len(batches)]
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, label)
    loss.backward()
    trainer.step(data.shape[0])
    correct = correct + (out.argmax(axis=1) == label).sum()
    if args.cache_at <= step < args.cache_at + 5:  # e.g. embeddings or decoded images kept for later epochs
        cache[step] = mx.nd.ones((4 * 2 ** 20,))  # 16 MiB, written: resident
    if (step + 1) % args.log_every == 0:
        print("step %d: loss %.4f" % (step + 1, loss.mean().asscalar()))
print("epoch done: accuracy %.4f, %d MiB cached" % (correct.asscalar() / (64 * args.steps),
                                                   sum(a.size * 4 for a in cache.values()) // 2 ** 20))

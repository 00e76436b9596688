"""A tabular MLP as the tutorials write it, knowing nothing of gluonperf: a deep, narrow
`nn.Sequential` of Dense layers, never hybridized, and the loss read back every batch
(`loss.mean().asscalar()`, a wait for MXNet's engine in each step). The tests run it under
`python -m gluonperf.profile -- python tests/user_scripts/mlp_script.py`.
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=30, help="steps in all (over as many epochs as that takes)")
p.add_argument("--batch-size", type=int, default=64)
p.add_argument("--layers", type=int, default=8)
p.add_argument("--hidden", type=int, default=64)
args = p.parse_args()

rng = np.random.RandomState(0)
x = rng.uniform(size=(16 * args.batch_size, 32)).astype("float32")
y = rng.randint(0, 2, size=len(x)).astype("float32")
loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=args.batch_size, shuffle=True,
                               last_batch="discard")

net = gluon.nn.Sequential()
for _ in range(args.layers):
    net.add(gluon.nn.Dense(args.hidden, activation="relu"))
net.add(gluon.nn.Dense(2))
net.initialize(mx.init.Xavier())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})

step = 0
while step < args.steps:
    for data, label in loader:
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(args.batch_size)
        running = loss.mean().asscalar()
        step += 1
        if step == args.steps:
            break
    print("epoch done: %d steps, loss %.4f" % (step, running))
print("training finished")

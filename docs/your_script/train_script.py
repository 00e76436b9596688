"""A plain Gluon training script, as you might have one: nothing in it knows gluonperf.

    python train_script.py               # images in memory
    python train_script.py --slow-data   # each image decoded as it is read (1 ms each)
"""
import argparse
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

parser = argparse.ArgumentParser()
parser.add_argument("--slow-data", action="store_true")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()


class DecodedImages(gluon.data.Dataset):
    """Images that take a millisecond each to decode (a JPEG read from disk, say)."""

    def __init__(self, images, labels):
        self.images, self.labels = images, labels

    def __getitem__(self, i):
        time.sleep(0.001)
        return self.images[i], self.labels[i]

    def __len__(self):
        return len(self.images)


rng = np.random.RandomState(0)
images = rng.uniform(size=(1024, 3, 32, 32)).astype("float32")
labels = rng.randint(0, 10, size=1024).astype("float32")
dataset = DecodedImages(images, labels) if args.slow_data else gluon.data.ArrayDataset(images, labels)
train_data = gluon.data.DataLoader(dataset, batch_size=args.batch_size, shuffle=True, last_batch="discard")

net = nn.HybridSequential()
net.add(nn.Conv2D(64, 3, padding=1, activation="relu"), nn.MaxPool2D(2),
        nn.Conv2D(128, 3, padding=1, activation="relu"), nn.MaxPool2D(2),
        nn.Dense(128, activation="relu"), nn.Dense(10))
net.initialize(mx.init.Xavier())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.9})

for epoch in range(args.epochs):
    start, total = time.time(), 0.0
    for x, y in train_data:
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(args.batch_size)
        total += loss.mean().asscalar()
    print("epoch %d: loss %.3f, %.1f s" % (epoch, total / len(train_data), time.time() - start))

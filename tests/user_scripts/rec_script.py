"""A Gluon loop over MXNet's own image pipeline, mx.io.ImageRecordIter on a .rec file (JPEGs
decoded and resized in its C++ threads): python rec_script.py FILE.rec [--steps N]."""
import argparse

import mxnet as mx
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("rec")
p.add_argument("--steps", type=int, default=30)
args = p.parse_args()
it = mx.io.ImageRecordIter(path_imgrec=args.rec, data_shape=(3, 32, 32), batch_size=16, shuffle=True,
                           preprocess_threads=1, resize=32)
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Conv2D(8, 3, activation="relu"), gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(10))
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
loss = gluon.loss.SoftmaxCrossEntropyLoss()
done = 0
while done < args.steps:
    it.reset()
    for batch in it:
        with autograd.record():
            l = loss(net(batch.data[0]), batch.label[0])
        l.backward()
        trainer.step(batch.data[0].shape[0])
        done += 1
        if done == args.steps:
            break
print("trained %d steps" % done)

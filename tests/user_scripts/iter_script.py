"""A Gluon loop over an MXNet data iterator (mx.io.NDArrayIter) whose next() takes 10 ms: the
step waits for it, and the time inside DataIter.__next__ is what profile -- counts."""
import time, mxnet as mx, numpy as np
from mxnet import gluon, autograd
class Slow(mx.io.NDArrayIter):
    def next(self):
        time.sleep(0.01)
        return super().next()
it = Slow(np.random.uniform(size=(640, 20)).astype("float32"), np.zeros(640, "float32"), batch_size=32)
net = gluon.nn.Dense(10); net.initialize()
tr = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
L = gluon.loss.SoftmaxCrossEntropyLoss()
for epoch in range(3):
    it.reset()
    for batch in it:
        with autograd.record():
            l = L(net(batch.data[0]), batch.label[0])
        l.backward(); tr.step(32)
print("done")

"""A Gluon loop that marks its own steps with gluonperf's StepProfiler (the Python API of
`profile --`), then prints the report."""
import sys

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from gluonperf.script.tables import report
from gluonperf.measure.steps import StepProfiler

x = np.random.RandomState(0).uniform(size=(512, 100)).astype("float32")
y = np.zeros(len(x), "float32")
loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=32, shuffle=True)
net = gluon.nn.Dense(10)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

with StepProfiler(warmup=2, active=8, profiled=2) as prof:
    for data, label in loader:
        with autograd.record():
            loss = loss_fn(net(data), label)
        loss.backward()
        trainer.step(data.shape[0])
        prof.step(data.shape[0])
print("phase after the loop:", prof.phase, "kept steps:", len(prof.steps))
print(report(prof))
sys.exit(0 if prof.phase == "done" else 1)

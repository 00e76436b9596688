"""A small network of one's own: two convolution branches over the input, added, then a
classifier. gluonperf has never seen this file; --model mynet.py:build runs it."""
from mxnet.gluon import nn


class TwoBranch(nn.HybridBlock):
    def __init__(self, classes=10, width=32, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.stem = nn.HybridSequential()
            self.stem.add(nn.Conv2D(width, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"))
            self.wide = nn.HybridSequential()
            self.wide.add(nn.Conv2D(width, 5, padding=2), nn.BatchNorm(), nn.Activation("relu"))
            self.narrow = nn.Conv2D(width, 1, activation="relu")
            self.pool = nn.GlobalAvgPool2D()
            self.head = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        x = self.stem(x)
        return self.head(self.pool(self.wide(x) + self.narrow(x)))


def build(classes=10, width=32):
    """The factory gluonperf calls: classes= from the data, width= from --model-args."""
    return TwoBranch(classes, width)

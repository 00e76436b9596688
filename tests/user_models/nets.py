"""Models written for the tests, as a user writes them: gluonperf has never seen this file."""
import mxnet as mx
from mxnet.gluon import nn, rnn


class Branchy(nn.HybridBlock):
    """Two branches over the same input, added: a multi-branch HybridBlock."""

    def __init__(self, classes=10, width=8, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.left = nn.HybridSequential()
            self.left.add(nn.Conv2D(width, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"))
            self.right = nn.Conv2D(width, 1, activation="relu")
            self.pool = nn.GlobalAvgPool2D()
            self.head = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.head(self.pool(self.left(x) + self.right(x)))


def branchy(classes=10, width=8):
    return Branchy(classes, width)


class SequenceClassifier(nn.HybridBlock):
    """Token ids -> Embedding -> LSTM -> Dense over the last step."""

    def __init__(self, classes=10, vocab=50, hidden=16, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.embed = nn.Embedding(vocab, hidden)
            self.lstm = rnn.LSTM(hidden, layout="NTC")
            self.head = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        h = self.lstm(self.embed(x))
        return self.head(F.slice_axis(h, axis=1, begin=-1, end=None))


def lstm(classes=10, vocab=50):
    return SequenceClassifier(classes, vocab)


class Gated(nn.HybridBlock):
    """Python control flow on a value: runs imperatively, fails when hybridized."""

    def __init__(self, classes=10, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = nn.Dense(16, activation="relu")
            self.head = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        h = self.body(x)
        if h.mean().asscalar() > 0:
            h = h * 0.5
        return self.head(h)


def gated(classes=10):
    return Gated(classes)


def not_a_block():
    return "a string"


def regression():
    """One output, for a loss of one's own (L2 against the label)."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(8, activation="relu"), nn.Dense(1))
    return net


def l2():
    return mx.gluon.loss.L2Loss()


class TwoInputs(nn.HybridBlock):
    def __init__(self, classes=10, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.head = nn.Dense(classes)

    def hybrid_forward(self, F, x, y):
        return self.head(F.concat(x, F.flatten(y), dim=1))


def two_inputs(classes=10):
    return TwoInputs(classes)


class TwoHeads(nn.HybridBlock):
    """A main head and an auxiliary one: two outputs, for a loss of one's own."""

    def __init__(self, classes=10, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = nn.Dense(16, activation="relu")
            self.main = nn.Dense(classes)
            self.aux = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        h = self.body(x)
        return self.main(h), self.aux(h)


def two_heads(classes=10):
    return TwoHeads(classes)


class MainAndAux(mx.gluon.loss.Loss):
    def __init__(self, **kwargs):
        super().__init__(None, 0, **kwargs)
        self.ce = mx.gluon.loss.SoftmaxCrossEntropyLoss()

    def hybrid_forward(self, F, main, aux, label):
        return self.ce(main, label) + 0.3 * self.ce(aux, label)


def main_and_aux():
    return MainAndAux()

"""The optimizers gluonperf trains with: MXNet's, with SGD's update made cheaper on CPU.

MXNet 1.9.1's `SGD` updates every dense parameter through a multi-tensor operator
(`multi_sgd_mom_update`; groups of MXNET_OPTIMIZER_AGGREGATION_SIZE parameters, 4 unless
set, and a group of one when it is 1 or 0). On CPU that operator's kernel runs one loop
over the longest array of its group and, at every index, visits each array of the group
that is that long: the arrays are read element by element side by side rather than one
after the other, and a short array costs as many loop steps as the longest. For
ResNet-18's 11.2 million parameters it took 26 ms a step where one `sgd_mom_update` per
parameter took 13 ms, and training at batch 64 ran 1.025x faster with the latter
(benchmarks/LEVERS.md, ninth session).

`SGD` here is MXNet's SGD, updating each parameter with momentum by its own
`sgd_mom_update` on CPU: the same arithmetic to the bit (tests/test_optimizers.py). It
keeps MXNet's multi-tensor path without momentum (`sgd_update` rounds differently from
`multi_sgd_update`), on other devices (a GPU launches one kernel per group), for float16
weights with multi_precision, for sparse arrays, and whenever the user sets
MXNET_OPTIMIZER_AGGREGATION_SIZE: that variable is the override, as OMP_NUM_THREADS is
for the thread default.
"""
import os

import mxnet as mx
from mxnet import nd

AGGREGATION = "MXNET_OPTIMIZER_AGGREGATION_SIZE"


def per_array(momentum, device_types, environ=None):
    """Whether SGD updates each parameter on its own (with momentum, on CPU devices only,
    MXNET_OPTIMIZER_AGGREGATION_SIZE unset): the rule `SGD` follows and `note` reports."""
    environ = os.environ if environ is None else environ
    return AGGREGATION not in environ and momentum > 0 and all(d == "cpu" for d in device_types)


class SGD(mx.optimizer.SGD):
    """mxnet.optimizer.SGD whose update with momentum on CPU is one sgd_mom_update per
    parameter, unless MXNET_OPTIMIZER_AGGREGATION_SIZE is set (looked up
    at every update, so a resumed run follows its own environment). Takes SGD's
    arguments; pickles (in Trainer states) as itself."""

    def _update_impl(self, indices, weights, grads, states, multi_precision=False):
        if not isinstance(indices, (tuple, list)):
            indices, weights, grads, states = [indices], [weights], [grads], [states]
        if not self._updates_per_array(weights, grads, multi_precision):  # MXNet's way
            return super()._update_impl(indices, weights, grads, states, multi_precision)
        self._update_count(indices)
        kwargs = {"rescale_grad": self.rescale_grad}
        if self.clip_gradient:
            kwargs["clip_gradient"] = self.clip_gradient
        for weight, grad, state, lr, wd in zip(weights, grads, states, self._get_lrs(indices),
                                               self._get_wds(indices)):
            nd.sgd_mom_update(weight, grad, state, out=weight, lr=lr, wd=wd, momentum=self.momentum, **kwargs)
        return None

    def _updates_per_array(self, weights, grads, multi_precision):
        return (per_array(self.momentum, [w.context.device_type for w in weights]) and not multi_precision
                and all(w.stype == "default" and g.stype == "default" for w, g in zip(weights, grads)))


OPTIMIZERS = {"sgd": SGD, "nag": mx.optimizer.NAG}
NAMES = tuple(OPTIMIZERS)


def create(name, **params):
    """The optimizer `name` (one of NAMES) with `params` (SGD's or NAG's arguments), for
    gluon.Trainer. Raises ValueError for another name."""
    if name not in OPTIMIZERS:
        raise ValueError("unknown optimizer %r; choose from %s" % (name, ", ".join(NAMES)))
    return OPTIMIZERS[name](**params)


def upgrade(optimizer):
    """An optimizer read back from a checkpoint: MXNet's own SGD (written before gluonperf
    had its SGD) becomes gluonperf's, with the same state. Returns it."""
    if type(optimizer) is mx.optimizer.SGD:
        optimizer.__class__ = SGD  # a subclass with no state of its own: the same object, updated per array
    return optimizer


def note(optimizer, momentum, contexts, environ=None):
    """The line telling the user about the per-array update when it applies, else None."""
    if optimizer != "sgd" or not per_array(momentum, [c.device_type for c in contexts], environ):
        return None
    return ("%s unset, so SGD updates each parameter with its own sgd_mom_update (MXNet's multi-tensor kernel "
            "took twice as long on CPU for ResNet-18, benchmarks/LEVERS.md); set it (MXNet's default: 4) for MXNet's"
            % AGGREGATION)

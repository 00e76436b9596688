"""The optimizers gluonperf trains with: MXNet's, with SGD's update made cheaper on CPU.

`SGD` is MXNet's SGD, but with momentum on CPU it updates each parameter by its own
`sgd_mom_update` instead of MXNet's multi-tensor `multi_sgd_mom_update`: the same weights to
the bit (tests/test_optimizers.py). `AdamW` runs MXNet's `contrib.adamw_update` operators;
NAG, AdaGrad, RMSProp and Adam are MXNet's own. `create` maps gluonperf's flags to each
class's arguments and refuses a value outside its range (ValueError).

The one thing to know: setting MXNET_OPTIMIZER_AGGREGATION_SIZE gives MXNet's multi-tensor
update back (SGD and AdamW alike). Why the multi-tensor kernel is slow on CPU, and where MXNet's
path is kept: docs/levers.md, "The optimizer update"; flags and defaults: docs/optimizers.md.
"""
import math
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


class AdamW(mx.optimizer.Optimizer):
    """Adam with decoupled weight decay (Loshchilov and Hutter), on MXNet's fused operators:
    w -= lr * (sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon) + wd * w), the
    bias correction and weight decay as in Adam and PyTorch's AdamW. One
    `contrib.adamw_update` per parameter, or `contrib.multi_adamw_update` over groups of
    MXNET_OPTIMIZER_AGGREGATION_SIZE parameters when that is set (the same arithmetic;
    tests/test_optimizers.py). State: (mean, variance) per parameter."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.aggregate_num = max(0, int(os.environ.get(AGGREGATION, "0")))

    def create_state(self, index, weight):
        return (nd.zeros(weight.shape, weight.context, dtype=weight.dtype),
                nd.zeros(weight.shape, weight.context, dtype=weight.dtype))

    def _rescale_array(self, ctx):
        """rescale_grad as the one-element array the operators take, made once per context and value
        (Trainer sets rescale_grad before every update)."""
        cache = self.__dict__.setdefault("_rescale_arrays", {})
        key = (ctx, self.rescale_grad)
        if key not in cache:
            if len(cache) > 16:  # the batch size changed (a last, smaller batch): keep it small
                cache.clear()
            cache[key] = nd.full((1,), self.rescale_grad, ctx=ctx)
        return cache[key]

    def __getstate__(self):  # pickled in trainer states without the cached arrays
        state = dict(mx.optimizer.Optimizer.__getstate__(self))
        state.pop("_rescale_arrays", None)
        return state

    def __setstate__(self, state):  # read back from a checkpoint: this run's environment decides the grouping
        mx.optimizer.Optimizer.__setstate__(self, state)
        self.aggregate_num = max(0, int(os.environ.get(AGGREGATION, "0")))

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state)

    def update_multi_precision(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state)

    def _update_impl(self, indices, weights, grads, states):
        if not isinstance(indices, (tuple, list)):
            indices, weights, grads, states = [indices], [weights], [grads], [states]
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        scale = [math.sqrt(1 - self.beta2 ** t) / (1 - self.beta1 ** t)
                 for t in (self._index_update_count[i] for i in indices)]
        kwargs = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
                  "clip_gradient": self.clip_gradient or -1}
        rescale = self._rescale_array(weights[0].context)
        if len(indices) > 1:
            nd.contrib.multi_adamw_update(weights, grads, [s[0] for s in states], [s[1] for s in states], rescale,
                                          lrs=scale, wds=wds, etas=lrs, out=weights, **kwargs)
            return
        mean, var = states[0]
        nd.contrib.adamw_update(weights[0], grads[0], mean, var, rescale, out=weights[0], lr=scale[0], wd=wds[0],
                                eta=lrs[0], **kwargs)


OPTIMIZERS = {"sgd": SGD, "nag": mx.optimizer.NAG, "adagrad": mx.optimizer.AdaGrad,
              "rmsprop": mx.optimizer.RMSProp, "adam": mx.optimizer.Adam, "adamw": AdamW}
NAMES = tuple(OPTIMIZERS)
# gluonperf's hyper-parameter names -> each class's argument (RMSProp's gamma1 is the decay of
# the squared gradient's average, the role beta2 has in Adam and gamma in the book's RMSProp)
ARGUMENTS = {"sgd": {"momentum": "momentum"}, "nag": {"momentum": "momentum"}, "adagrad": {"epsilon": "eps"},
             "rmsprop": {"beta2": "gamma1", "epsilon": "epsilon"},
             "adam": {"beta1": "beta1", "beta2": "beta2", "epsilon": "epsilon"},
             "adamw": {"beta1": "beta1", "beta2": "beta2", "epsilon": "epsilon"}}


def check_hyper(momentum=None, wd=None, beta1=None, beta2=None, epsilon=None, learning_rate=None):
    """ValueError naming the first hyper-parameter outside its range (None: not given)."""
    for name, value in (("momentum", momentum), ("beta1", beta1), ("beta2", beta2)):
        if value is not None and not 0 <= value < 1:
            raise ValueError("%s %r must be at least 0 and below 1 (e.g. 0.9)" % (name, value))
    if epsilon is not None and not (math.isfinite(epsilon) and epsilon > 0):
        raise ValueError("epsilon %r must be above 0 (e.g. 1e-8)" % epsilon)
    if wd is not None and not (math.isfinite(wd) and wd >= 0):
        raise ValueError("wd %r must be 0 or more (e.g. 5e-4)" % wd)
    if learning_rate is not None and not (math.isfinite(learning_rate) and learning_rate > 0):
        raise ValueError("learning rate %r must be above 0" % learning_rate)


def create(name, momentum=None, beta1=None, beta2=None, epsilon=None, **params):
    """The optimizer `name` (one of NAMES) for gluon.Trainer, with gluonperf's hyper-parameters
    (None: the class's default; those `name` does not take are ignored) and the class's other
    arguments in `params` (learning_rate, wd, lr_scheduler, ...). Raises ValueError for
    another name or a value out of range."""
    if name not in OPTIMIZERS:
        raise ValueError("unknown optimizer %r; choose from %s" % (name, ", ".join(NAMES)))
    given = {"momentum": momentum, "beta1": beta1, "beta2": beta2, "epsilon": epsilon}
    check_hyper(wd=params.get("wd"), learning_rate=params.get("learning_rate"), **given)
    for ours, theirs in ARGUMENTS[name].items():
        if given[ours] is not None:
            params[theirs] = given[ours]
    return OPTIMIZERS[name](**params)


def update_operators(name, momentum, device_types, environ=None):
    """The MXNet operators the update of optimizer `name` runs on devices `device_types`
    (the names MXNet's profiler gives them), as a phrase."""
    environ = os.environ if environ is None else environ
    grouped = AGGREGATION in environ
    if name == "sgd":
        if per_array(momentum, device_types, environ):
            return "sgd_mom_update"
        return "multi_sgd_mom_update" if momentum > 0 else "multi_sgd_update"
    if name == "adamw":
        return "_multi_adamw_update" if grouped and int(environ[AGGREGATION]) > 1 else "_adamw_update"
    if name == "adagrad":
        return ("_mul_scalar, square, _plus_scalar, sqrt, elemwise_div, elemwise_add (NDArray arithmetic: MXNet "
                "has no dense AdaGrad operator, so the operator table counts them with the forward)")
    return {"nag": "nag_mom_update", "rmsprop": "rmsprop_update", "adam": "adam_update"}[name]


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
            "took twice as long on CPU for ResNet-18, docs/levers.md); set it (MXNet's default: 4) for MXNet's"
            % AGGREGATION)

"""What an optimizer's update costs: the book's from-scratch NDArray updates against MXNet's
fused operators (`python -m gluonperf.bench optimizers`).

Per optimizer (SGD with momentum, AdaGrad, RMSProp, Adam), on a model's real parameters and
gradients, up to three implementations of the same update: `scratch` (the book's loop),
`fused` (one MXNet operator per parameter; AdaGrad has none in MXNet 1.9.1, so there it is
MXNet's own `AdaGrad.update`) and `multi` (MXNet's multi-tensor operator over groups of
MULTI_GROUP parameters, where one exists). `optimizer_cost` times them and a forward-backward
step in one interleaved run, after `check_agreement` has made every one give the scratch one's
weights (`Disagreement` otherwise). What each does and how to read the table:
docs/optimizers.md, "bench optimizers".
Nothing here parses arguments or prints.
"""
import math

import mxnet as mx
import numpy as np
from mxnet import autograd, nd

from ..measure.harness import measure_interleaved
from ..config import UPDATE_OPTIMIZERS
from ..records import result
from ..measure.stats import paired_ratios, ratio_interval, verdict

OPTIMIZERS = UPDATE_OPTIMIZERS
IMPLEMENTATIONS = ("scratch", "fused", "multi")
HYPER = {"lr": 0.01, "momentum": 0.9, "gamma": 0.9, "beta1": 0.9, "beta2": 0.999, "eps": 1e-6}
MULTI_GROUP = 4        # MXNet's MXNET_OPTIMIZER_AGGREGATION_SIZE default
CHECK_STEPS = 3
# Agreement: every parameter's change over the check's steps must equal the scratch one's within
# STEP_RTOL of that change's largest element (plus ATOL): float32 arithmetic in another order (MXNet's
# multi_adamw_update differs from adamw_update by ~5e-5 of a step), where a wrong coefficient (a
# missing bias correction, a misplaced epsilon, another momentum) is off by percents
STEP_RTOL, ATOL = 1e-3, 1e-7
STEP = "forward-backward"


class Disagreement(RuntimeError):
    """Two implementations of one update gave different weights: a bug, not a measurement."""


def state_arrays(optimizer, weight):
    """The state one parameter needs under `optimizer`: momentum (SGD), the sum or average of
    squared gradients (AdaGrad, RMSProp), or both moments (Adam)."""
    count = 2 if optimizer == "adam" else 1
    return [nd.zeros(weight.shape, weight.context, dtype=weight.dtype) for _ in range(count)]


# --- the book's updates, from scratch -----------------------------------------------

def scratch(optimizer, hp):
    """The book's update of `optimizer` as a function (weights, grads, states, t)."""
    def sgd_momentum(params, grads, states, t):
        for p, g, (v,) in zip(params, grads, states):
            v[:] = hp["momentum"] * v + g
            p[:] -= hp["lr"] * v

    def adagrad(params, grads, states, t):
        for p, g, (s,) in zip(params, grads, states):
            s[:] += nd.square(g)
            p[:] -= hp["lr"] * g / nd.sqrt(s + hp["eps"])

    def rmsprop(params, grads, states, t):
        for p, g, (s,) in zip(params, grads, states):
            s[:] = hp["gamma"] * s + (1 - hp["gamma"]) * nd.square(g)
            p[:] -= hp["lr"] * g / nd.sqrt(s + hp["eps"])

    def adam(params, grads, states, t):
        beta1, beta2, eps = hp["beta1"], hp["beta2"], hp["eps"]
        for p, g, (v, s) in zip(params, grads, states):
            v[:] = beta1 * v + (1 - beta1) * g
            s[:] = beta2 * s + (1 - beta2) * nd.square(g)
            v_bias_corr = v / (1 - beta1 ** t)
            s_bias_corr = s / (1 - beta2 ** t)
            p[:] -= hp["lr"] * v_bias_corr / (nd.sqrt(s_bias_corr) + eps)
    return {"sgd": sgd_momentum, "adagrad": adagrad, "rmsprop": rmsprop, "adam": adam}[optimizer]


# --- MXNet's operators ------------------------------------------------------------------

def _adam_lr(hp, t):
    """Adam's bias correction folded into the step size, as mxnet.optimizer.Adam does."""
    return hp["lr"] * math.sqrt(1 - hp["beta2"] ** t) / (1 - hp["beta1"] ** t)


def _adam_eps(hp, t):
    """The book's epsilon, added to sqrt(s / (1 - beta2^t)), as MXNet's operators take it (added
    to sqrt(s)): the same update to rounding (mxnet.optimizer.Adam passes epsilon unscaled, which
    differs where a gradient is as small as epsilon)."""
    return hp["eps"] * math.sqrt(1 - hp["beta2"] ** t)


def fused(optimizer, hp):
    """One MXNet operator per parameter (AdaGrad: MXNet's optimizer, see the module)."""
    if optimizer == "adagrad":
        mxnet_adagrad = mx.optimizer.AdaGrad(learning_rate=hp["lr"], eps=hp["eps"], wd=0.0)

        def adagrad(params, grads, states, t):
            for i, (p, g, (s,)) in enumerate(zip(params, grads, states)):
                mxnet_adagrad.update(i, p, g, s)
        return adagrad

    def update(params, grads, states, t):
        for p, g, state in zip(params, grads, states):
            if optimizer == "sgd":  # MXNet keeps -lr * the book's v as its momentum: the same weights
                nd.sgd_mom_update(p, g, state[0], out=p, lr=hp["lr"], momentum=hp["momentum"], wd=0.0)
            elif optimizer == "rmsprop":
                nd.rmsprop_update(p, g, state[0], out=p, lr=hp["lr"], gamma1=hp["gamma"], epsilon=hp["eps"], wd=0.0)
            else:
                nd.adam_update(p, g, state[0], state[1], out=p, lr=_adam_lr(hp, t), beta1=hp["beta1"],
                               beta2=hp["beta2"], epsilon=_adam_eps(hp, t), wd=0.0)
    return update


def multi(optimizer, hp, group=MULTI_GROUP):
    """MXNet's multi-tensor operator over groups of `group` parameters, or None where MXNet
    1.9.1 has none for `optimizer`."""
    if optimizer not in ("sgd", "adam"):
        return None

    def update(params, grads, states, t):
        for a in range(0, len(params), group):
            ps, gs, ss = params[a:a + group], grads[a:a + group], states[a:a + group]
            n = len(ps)
            if optimizer == "sgd":
                nd.multi_sgd_mom_update(*[x for p, g, s in zip(ps, gs, ss) for x in (p, g, s[0])], out=ps,
                                        lrs=[hp["lr"]] * n, wds=[0.0] * n, momentum=hp["momentum"], num_weights=n)
            else:
                nd.contrib.multi_adamw_update(ps, gs, [s[0] for s in ss], [s[1] for s in ss], 1.0, out=ps,
                                              lrs=[_adam_lr(hp, t) / hp["lr"]] * n, wds=[0.0] * n,
                                              etas=[hp["lr"]] * n, beta1=hp["beta1"], beta2=hp["beta2"],
                                              epsilon=_adam_eps(hp, t))
    return update


OPERATORS = {
    ("sgd", "scratch"): "NDArray: v = momentum*v + g; w -= lr*v",
    ("adagrad", "scratch"): "NDArray: s += g^2; w -= lr*g/sqrt(s+eps)",
    ("rmsprop", "scratch"): "NDArray: s = gamma*s + (1-gamma)*g^2; w -= lr*g/sqrt(s+eps)",
    ("adam", "scratch"): "NDArray: v, s, bias corrections, w -= lr*v'/(sqrt(s')+eps)",
    ("sgd", "fused"): "sgd_mom_update",
    ("adagrad", "fused"): "mx.optimizer.AdaGrad.update (NDArray: no dense adagrad operator)",
    ("rmsprop", "fused"): "rmsprop_update",
    ("adam", "fused"): "adam_update",
    ("sgd", "multi"): "multi_sgd_mom_update (groups of %d)" % MULTI_GROUP,
    ("adam", "multi"): "contrib.multi_adamw_update, wd 0 (groups of %d)" % MULTI_GROUP,
}


def implementations(optimizer, hp=None):
    """{implementation name: update function} of `optimizer`, those MXNet 1.9.1 has."""
    hp = dict(HYPER, **(hp or {}))
    ways = {"scratch": scratch(optimizer, hp), "fused": fused(optimizer, hp), "multi": multi(optimizer, hp)}
    return {k: v for k, v in ways.items() if v is not None}


# --- the model's parameters and gradients ---------------------------------------------

def model_gradients(model, ctx, batch_size, seed=0):
    """(net, the trainable weights, their gradients, the forward-backward step): one forward
    and backward of a seeded synthetic batch through `model`, hybridized static as train runs it."""
    from ..training.data import CLASSES
    from ..training.model_spec import as_spec
    from ..training.models import get_model, loss_of, random_input
    spec = as_spec(model)
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    net = get_model(spec, CLASSES, [ctx])
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net.hybridize(static_alloc=True, static_shape=True)
    x = nd.array(random_input(spec, batch_size, rng), ctx=ctx, dtype=spec.input_dtype)
    y = nd.array(rng.randint(0, CLASSES, batch_size), ctx=ctx)
    loss_fn = loss_of(spec)

    def step():
        with autograd.record():
            loss = loss_fn(net(x), y).mean()
        loss.backward()
    step()
    mx.nd.waitall()
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    return net, [p.data(ctx) for p in params], [p.grad(ctx).copy() for p in params], step


def check_agreement(optimizer, weights, grads, hp=None, steps=CHECK_STEPS):
    """Run every implementation of `optimizer` for `steps` updates from copies of `weights`,
    with the gradients `grads` scaled differently at each step; returns {implementation: max
    abs difference of its weights from the scratch one's}. Raises Disagreement where a
    parameter's difference is above STEP_RTOL of its change under the scratch update (+ ATOL)."""
    ways = implementations(optimizer, hp)
    sequence = [[g * (1.0 + 0.5 * k) for g in grads] for k in range(steps)]
    final = {}
    for name, update in ways.items():
        ws = [w.copy() for w in weights]
        states = [state_arrays(optimizer, w) for w in ws]
        for t in range(1, steps + 1):
            update(ws, sequence[t - 1], states, t)
        final[name] = [w.asnumpy() for w in ws]
    start = [w.asnumpy() for w in weights]
    change = [float(np.abs(b - a).max()) for a, b in zip(start, final["scratch"])]
    diffs = {}
    for name, ws in final.items():
        each = [float(np.abs(a - b).max()) for a, b in zip(ws, final["scratch"])]
        diffs[name] = max(each)
        bad = [i for i, (d, c) in enumerate(zip(each, change)) if not d <= STEP_RTOL * c + ATOL]
        if bad:
            raise Disagreement("%s: the %s update's weights differ from the scratch one's after %d steps (max "
                               "abs difference %.3g in %d of %d parameters, beyond %g of the weights' change "
                               "+ %g)" % (optimizer, name, steps, diffs[name], len(bad), len(ws), STEP_RTOL, ATOL))
    return diffs


def nbytes(arrays):
    return sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize for a in arrays)


def optimizer_cost(model="lenet", ctx=None, batch_size=64, optimizers=OPTIMIZERS, repeat=10, steps=10,
                   warmup=1, progress=None):
    """Time every implementation of every optimizer's update on `model`'s parameters, and a
    forward-backward step, in one interleaved run of `repeat` repeats of `steps` calls each.

    Returns one Result per (optimizer, implementation) (bench='optimizers'): the update's
    median seconds per step (with the measurement's spread), `share_of_step` = update / (forward-
    backward + update), the state's bytes, `speedup` over the scratch implementation with
    its interval fields (speedup_ci_low/high, speedup_n, speedup_level) and verdict, and
    `max_abs_diff` from the agreement check; and one Result for the forward-backward step."""
    from ..training.model_spec import as_spec
    ctx, spec = ctx or mx.cpu(), as_spec(model)
    net, weights, grads, step = model_gradients(spec, ctx, batch_size)
    param_bytes = nbytes(weights)
    fns, meta = {STEP: step}, {}
    for opt in optimizers:
        diffs = check_agreement(opt, weights, grads)
        own = [w.copy() for w in weights]  # each optimizer times on its own copy of the weights
        for name, update in implementations(opt).items():
            states = [state_arrays(opt, w) for w in own]
            counter = [0]

            def call(update=update, states=states, counter=counter, own=own):
                counter[0] += 1
                update(own, grads, states, counter[0])
            label = "%s %s" % (opt, name)
            fns[label] = call
            meta[label] = dict(optimizer=opt, implementation=name, operator=OPERATORS[(opt, name)],
                               state_bytes=nbytes([a for s in states for a in s]),
                               max_abs_diff=diffs[name])
    measured = measure_interleaved(fns, warmup=warmup, repeat=repeat, number=steps, progress=progress)
    common = dict(model=spec.text, ctx=str(ctx), batch_size=batch_size, param_bytes=param_bytes, repeats=repeat,
                  steps_per_repeat=steps, parameters=len(weights))
    fb = measured[STEP]
    results = [result("optimizers", STEP, fb, optimizer=None, implementation=None, update_s=None, step_s=fb.median,
                      **common)]
    for label, m in meta.items():
        update = measured[label]
        scratch_label = "%s scratch" % m["optimizer"]
        interval = ratio_interval(paired_ratios(measured[scratch_label].samples, update.samples))
        judged = verdict(interval, what="repeats").fields()
        if m["implementation"] == "scratch":  # against itself: 1 by definition, no interval
            interval = type(interval)(1.0, None, None, interval.n, interval.level, interval.method)
            judged = {"verdict": "baseline", "verdict_text": "the book's update: the ratios' baseline"}
        results.append(result(
            "optimizers", label, update, update_s=update.median, step_s=fb.median + update.median,
            share_of_step=update.median / (fb.median + update.median),
            state_per_param=m["state_bytes"] / param_bytes, **m, **interval.fields("speedup"), **judged, **common))
    return results

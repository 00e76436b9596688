"""Imperative vs hybridized execution of the same Gluon block.

Three copies of one model hold the same initial weights and get the same input:
run imperatively, after `hybridize()`, and after
`hybridize(static_alloc=True, static_shape=True)`. Each copy is wrapped in
`Counted`, which shows the chapter's point: once hybridized, the Python
`hybrid_forward` runs only while the graph is built, not on every call.
"""
import os
import re
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from .. import UserError
from ..measure.harness import measure_interleaved
from ..training.model_spec import as_spec
from ..training.models import get_model, loss_of, random_input
from ..records import result
from ..measure import machine
from ..measure.stats import THRESHOLD, speedup_fields
from ..measure.timing import Timing

MODES = {
    "imperative": None,
    "hybrid": {},
    "static": {"static_alloc": True, "static_shape": True},
}


class Counted(nn.HybridBlock):
    """Wraps a block: `runs` counts calls of the block, `calls` how often Python
    executed its `hybrid_forward`."""

    def __init__(self, net, **kwargs):
        super().__init__(**kwargs)
        self.net = net
        self.runs = 0
        self.calls = 0

    def __call__(self, *args):
        self.runs += 1
        return super().__call__(*args)

    def hybrid_forward(self, F, x):
        self.calls += 1
        return self.net(x)


def build_variants(model, ctx, batch_size, classes=None, seed=0):
    """{mode: Counted(net)} with identical weights, plus the input batch and labels."""
    spec = as_spec(model)
    classes = classes or (2 if spec.text == "mlp" else 10)
    mx.random.seed(seed)
    rng = np.random.RandomState(seed)
    x = mx.nd.array(random_input(spec, batch_size, rng), ctx=ctx, dtype=spec.input_dtype)
    y = mx.nd.array(rng.randint(0, classes, size=batch_size), ctx=ctx)
    reference = None
    variants = {}
    for mode, flags in MODES.items():
        net = get_model(spec, classes)
        net.initialize(mx.init.Xavier(), ctx=ctx)
        net(x)  # finish deferred initialisation, imperatively
        params = net._collect_params_with_prefix()
        if reference is None:
            reference = {k: p.data(ctx).copy() for k, p in params.items()}
        else:
            for k, p in params.items():
                p.set_data(reference[k])
        wrapped = Counted(net)
        if flags is not None and spec.hybridizable:  # else it runs imperatively (a note says so)
            wrapped.hybridize(**flags)
        variants[mode] = wrapped
    return variants, x, y


def check_outputs(variants, x, tolerance):
    """Largest absolute difference of each mode's output from the imperative one.

    Raises UserError when it exceeds `tolerance` (relative to the output's scale)."""
    ref = variants["imperative"](x).asnumpy()
    scale = max(1.0, float(np.abs(ref).max()))
    diffs = {}
    for mode, net in variants.items():
        diffs[mode] = float(np.abs(net(x).asnumpy() - ref).max())
        if diffs[mode] > tolerance * scale:
            raise UserError("%s outputs differ from imperative ones by %.3g (tolerance %.3g): "
                            "hybridization changed the result" % (mode, diffs[mode], tolerance * scale))
    return ref, diffs


def export_and_import(net, x, directory, name, ctx):
    """Export a hybridized block (symbol JSON + params) and load it back as a SymbolBlock.

    Returns (symbol_file, params_file, outputs of the imported block)."""
    os.makedirs(directory, exist_ok=True)
    prefix = os.path.join(directory, name)
    net.export(prefix)
    symbol_file, params_file = prefix + "-symbol.json", prefix + "-0000.params"
    with warnings.catch_warnings():  # MXNet warns that it cannot infer the input's dtype
        warnings.simplefilter("ignore", UserWarning)
        imported = gluon.SymbolBlock.imports(symbol_file, ["data"], params_file, ctx=ctx)
    return symbol_file, params_file, imported(x)


def _forward(net, x):
    return lambda: net(x)


def _train_step(net, x, y, loss):
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

    def step():
        with autograd.record():
            l = loss(net(x), y)
        l.backward()
        trainer.step(x.shape[0])
    return step


def compare_modes(model="mlp", batch_size=1, ctx=None, timing=Timing(repeat=5, number=1000), train=False,
                  export_dir=None, tolerance=1e-4, threshold=THRESHOLD):
    """Time `model` imperatively and hybridized (plain and static), interleaved as `timing` says.

    Returns one Result per mode (per-call time statistics, speedup over imperative with its
    95% interval over the repeats and a verdict against `threshold`,
    largest output difference, how often Python's hybrid_forward ran), plus one
    'export' Result when `export_dir` is given.
    """
    ctx, spec = ctx or mx.cpu(), as_spec(model)
    variants, x, y = build_variants(spec, ctx, batch_size)
    ref, diffs = check_outputs(variants, x, tolerance)
    if export_dir is not None and not spec.hybridizable:
        raise UserError("--export: --model %s cannot be hybridized (%s), so it has no graph to export"
                        % (spec.label, spec.why_not_hybrid))
    make = (lambda net, x, y: _train_step(net, x, y, loss_of(spec))) if train else (lambda net, x, y: _forward(net, x))
    fns = {mode: make(net, x, y) for mode, net in variants.items()}
    with machine.Check() as check:
        measurements = measure_interleaved(fns, warmup=timing.warmup, repeat=timing.repeat, number=timing.number,
                                           progress=timing.progress, contexts=[ctx], yardstick=True)  # so that compare can hold two saved runs against it
    base = measurements["imperative"].samples
    check.finish(base)
    task = "train_step" if train else "forward"
    results = []
    for mode, m in measurements.items():
        # speed-up over imperative: per repeat (the modes ran side by side), with its interval
        speedup = {"speedup": 1.0, "verdict": "baseline"} if mode == "imperative" else \
            speedup_fields(base, m.samples, threshold=threshold, level=check.level)
        results.append(result(
            "hybridize", mode, m,
            model=spec.text, task=task, batch_size=batch_size, ctx=str(ctx),
            samples_per_s=batch_size / m.median,
            **speedup,
            max_abs_diff=diffs[mode],
            hybrid_forward_calls=variants[mode].calls,
            calls=variants[mode].runs,
            **({} if spec.hybridizable or mode == "imperative" else
               {"note": "cannot be hybridized (%s): ran imperatively" % spec.why_not_hybrid}),
            **check.fields(),
        ))
    if export_dir is not None:
        # against the hybridized net as it is now: with `train` its weights have moved since `ref`
        now = variants["hybrid"](x).asnumpy()
        symbol_file, params_file, out = export_and_import(variants["hybrid"], x, export_dir,
                                                                 re.sub(r"[^\w.-]+", "_", spec.label), ctx)
        diff = float(np.abs(out.asnumpy() - now).max())
        if diff > tolerance * max(1.0, float(np.abs(now).max())):
            raise UserError("the exported model's outputs differ from the original by %.3g" % diff)
        results.append(result("hybridize", "export", model=spec.text, symbol_file=symbol_file,
                              params_file=params_file, max_abs_diff=diff))
    return results

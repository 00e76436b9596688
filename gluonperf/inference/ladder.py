"""The precision ladder, minimal: fp32 as written and hybridized static, rebuilt from a model spec.

A stand-in with exactly the names of /work/INFER_INTERFACE.md so that the serve half of
`python -m gluonperf.infer` runs end to end before the ladder's branch lands; that branch's
file replaces this one whole (fused, bf16, int8, exported models, calibration).
"""
import json
import os
from dataclasses import asdict, dataclass, replace
from typing import Callable, Optional

RUNGS = ("fp32", "static", "fused", "bf16", "int8")   # the ladder, in this order; "static" is the reference
BUILT_HERE = ("fp32", "static")
NOT_YET = "not in this build yet (the precision ladder's branch brings it)"


@dataclass(frozen=True)
class ModelSource:
    """What to serve: a model spec (zoo name, file.py:factory, pkg.mod:factory) with optional
    trained weights, or an exported model (symbol JSON + params)."""
    spec: Optional[str] = None
    symbol: Optional[str] = None
    params: Optional[str] = None
    input_shape: tuple = ()
    classes: Optional[int] = None


def _exported_params(symbol):
    """PREFIX-NNNN.params beside PREFIX-symbol.json, the highest epoch when several."""
    prefix = symbol[:-len("-symbol.json")]
    folder, base = os.path.split(prefix)
    found = sorted(f for f in os.listdir(folder or ".")
                   if f.startswith(base + "-") and f.endswith(".params") and f[len(base) + 1:-7].isdigit())
    return os.path.join(folder, found[-1]) if found else None


def model_source(model, params=None, input_shape=None):
    """From --model / --params / --input-shape: a `*-symbol.json` path is an exported model whose
    params are found beside it as export() names them unless `params` is given; anything else
    is a model spec. ValueError with one line saying what is wrong and what to do."""
    if params is not None and not os.path.isfile(params):
        raise ValueError("--params %s: no such file" % params)
    shape = tuple(input_shape) if input_shape else ()
    if str(model).endswith("-symbol.json"):
        if not os.path.isfile(model):
            raise ValueError("--model %s: no such file" % model)
        params = params or _exported_params(model)
        if params is None:
            raise ValueError("--model %s: no %s-0000.params beside it (as export() names them); give --params"
                             % (model, model[:-len("-symbol.json")]))
        if not shape:
            raise ValueError("--model %s: give the shape of one sample it takes with --input-shape" % model)
        return ModelSource(symbol=model, params=params, input_shape=shape)
    from ..training.models import input_shape as default_shape
    spec = str(model)
    return ModelSource(spec=spec, params=params, input_shape=shape or tuple(default_shape(spec)),
                       classes=2 if spec == "mlp" else 10)


@dataclass(frozen=True)
class Rung:
    name: str
    kind: str = "spec"
    spec: Optional[str] = None
    symbol: Optional[str] = None
    params: Optional[str] = None
    hybridize: str = "none"
    input_shape: tuple = ()
    build_s: Optional[float] = None
    error: Optional[str] = None
    note: Optional[str] = None

    def to_text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_text(text) -> "Rung":
        fields = json.loads(text)
        fields["input_shape"] = tuple(fields.get("input_shape") or ())
        return Rung(**fields)


def available(rungs=RUNGS) -> dict:
    """{rung: None, or why it cannot be had here}."""
    return {r: None if r in BUILT_HERE else NOT_YET for r in rungs}


def _build(spec, classes, ctx):
    from ..training.models import get_model
    return get_model(spec, classes=classes or 10, contexts=[ctx])


def prepare(source, rungs, ctx, workdir, calibration=None) -> list:
    """In the parent, once: each asked rung, in RUNGS order; a rung that cannot be built comes
    back with `error` set. The weights are written once to `workdir` (or are --params) so that
    every process that serves loads the same ones."""
    import time
    import mxnet as mx
    asked = [r for r in RUNGS if r in rungs]
    if source.spec is None:
        return [Rung(r, kind="symbol", symbol=source.symbol, params=source.params, input_shape=source.input_shape,
                     error="exported models: " + NOT_YET) for r in asked]
    params = source.params
    start = time.perf_counter()
    if params is None:
        mx.random.seed(0)
        net = _build(source.spec, source.classes, ctx)
        net.initialize(mx.init.Xavier(), ctx=ctx)
        net(mx.nd.zeros((1,) + tuple(source.input_shape), ctx=ctx)).wait_to_read()  # deferred shapes
        params = os.path.join(workdir, "model.params")
        net.save_parameters(params)
    built = time.perf_counter() - start
    out = []
    for r in asked:
        base = Rung(r, spec=source.spec, params=params, input_shape=tuple(source.input_shape), build_s=built)
        out.append(replace(base, hybridize="static" if r == "static" else "none") if r in BUILT_HERE
                   else replace(base, error=NOT_YET))
    return out


def load(rung, ctx) -> Callable:
    """In the process that serves: the rung's forward for a batch (not synced; no warm-up)."""
    if rung.error:
        raise ValueError("rung %s cannot be loaded: %s" % (rung.name, rung.error))
    if rung.kind != "spec":
        raise ValueError("rung %s: exported models are %s" % (rung.name, NOT_YET))
    from ..training.model_spec import parse_spec
    net = _build(rung.spec, 2 if parse_spec(rung.spec).model == "mlp" else 10, ctx)
    net.load_parameters(rung.params, ctx=ctx)
    if rung.hybridize == "static":
        net.hybridize(static_alloc=True, static_shape=True)
    return net

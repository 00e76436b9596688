"""The precision ladder: one model in the forms it can be deployed in, each built once.

The rungs (`RUNGS`): `fp32`, `static` (the reference), `fused`, `bf16`, `int8`, and the
runtimes' `ort-fp32`, `ort-int8`, `ov-fp32`, `ov-bf16`, `ov-int8`
(gluonperf.inference.runtimes). `prepare` builds the asked rungs in the parent, once, and
writes each graph to its workdir; `load` gives a process the forward of one rung from those
files (`Rung` crosses processes as JSON text).

The one thing to know: every graph rung is built from the static rung's files, so an exported
model (`--model PREFIX-symbol.json`) has every rung but fp32; a rung that cannot be built
comes back with `error`, one line saying why, and the others are built. What each rung is, how
it is built and the traps avoided: docs/precision_ladder.md.
"""
import contextlib
import io
import json
import os
import time
import warnings
from dataclasses import asdict, dataclass, field, replace
from typing import Optional

import mxnet as mx
import numpy as np

from .. import error_line
from . import deploy_code, exported, runtimes

MXNET_RUNGS = ("fp32", "static", "fused", "bf16", "int8")
RUNGS = MXNET_RUNGS + runtimes.RUNGS   # the ladder, in this order; "static" is the reference
REFERENCE = "static"
CALIBRATION_MODE = "naive"     # quantize_net_v2's calib_mode: min/max of each layer's output over the samples
CALIBRATION_BATCH = 32
STATIC = deploy_code.STATIC   # hybridize(**STATIC): how the graph rungs are built and served
DEFAULT_CLASSES = 10           # what gluonperf trains a model with on its named data sets


@dataclass(frozen=True)
class ModelSource:
    """What to serve: a model spec (zoo name, file.py:factory, pkg.mod:factory) with optional
    trained weights, or an exported model (symbol JSON + params)."""
    spec: Optional[str] = None          # gluonperf's model spec text (training.model_spec.spec_text)
    symbol: Optional[str] = None        # path of PREFIX-symbol.json
    params: Optional[str] = None        # trained weights (.params), or the exported model's params
    input_shape: tuple = ()             # one sample's shape (without the batch axis)
    classes: Optional[int] = None       # output classes, when known
    # the ModelSpec that `spec` is the text of, in the process that resolved it (never parsed again here)
    model: Optional[object] = field(default=None, compare=False, repr=False)

    def model_spec(self):
        """The ModelSpec of `spec` (the object this source was made from, else its text parsed), or None."""
        from ..training.model_spec import as_spec
        return self.model if self.model is not None else as_spec(self.spec) if self.spec else None


def model_source(model, params=None, input_shape=None):
    """From --model / --params / --input-shape: a `*-symbol.json` path is an exported model whose
    params are found beside it as export() names them (PREFIX-0000.params; the highest epoch when
    several) unless `params` is given; anything else is a model spec. ValueError with one line
    saying what is wrong and what to do (a symbol without params, a missing file, an unknown name).

    An exported model's input shape, when not given, is read from its files
    (`gluonperf.inference.exported`); a spec's is the model's own (`models.input_shape`), or
    1x28x28 when the trained weights fit that and not the model's default (gluonperf's MLP
    trained on digits). `classes` is read from the weights when there are any, else 10."""
    if params is not None and not os.path.isfile(params):
        raise ValueError("--params %s: no such file" % params)
    shape = tuple(input_shape) if input_shape else None
    if exported.is_symbol_file(model):
        if not os.path.isfile(model):
            raise ValueError("--model %s: no such file; give the PREFIX-symbol.json that export() wrote" % model)
        params = params or exported.params_beside(model)
        shape, classes = exported.input_shape_of(model, params, given=shape)
        return ModelSource(symbol=os.path.abspath(model), params=os.path.abspath(params), input_shape=shape,
                           classes=classes)
    from ..training.model_spec import absolute, as_spec
    from ..training.models import input_shape as default_shape
    spec = as_spec(model)  # a file.py:factory made absolute: worker processes start elsewhere
    spec = replace(spec, model=absolute(spec.model))
    if params is None:
        _build_spec(spec, DEFAULT_CLASSES)  # an unknown name fails here, in one line
        return ModelSource(spec=spec.text, input_shape=shape or tuple(default_shape(spec)), classes=DEFAULT_CLASSES,
                           model=spec)
    shape, classes = _fit_params(spec, params, shape)
    return ModelSource(spec=spec.text, params=os.path.abspath(params), input_shape=shape, classes=classes, model=spec)


def _build_spec(spec, classes, ctx=None):
    from ..training.models import get_model
    return get_model(spec, classes, [ctx or mx.cpu()])


def _shapes_built(spec, classes, shape):
    """{parameter name: shape} of the model built for `classes` and run once on `shape`, or
    None when it does not take that input."""
    net = _build_spec(spec, classes)
    net.initialize(mx.init.Zero())
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            net(mx.nd.zeros((1,) + tuple(shape), dtype=spec.input_dtype))
    except mx.base.MXNetError:
        return None
    return {name: tuple(p.shape) for name, p in net._collect_params_with_prefix().items()}


def _fit_params(spec, params, shape):
    """(input shape, classes) for which model `spec` (a ModelSpec) holds exactly the parameters in `params`
    (a file of save_parameters, as train --save writes); ValueError in one line if none."""
    from ..training.models import input_shape as default_shape
    saved = exported.saved_shapes(params)
    shapes = [shape] if shape else list(dict.fromkeys([tuple(default_shape(spec)), (1, 28, 28)]))
    for candidate in shapes:
        built = _shapes_built(spec, DEFAULT_CLASSES, candidate)
        if built is None:
            continue
        if set(built) != set(saved):
            missing = sorted(set(built) ^ set(saved))
            raise ValueError("--params %s does not hold --model %s's parameters (%s, ...); give the weights "
                             "this model was trained to" % (params, spec.text, ", ".join(missing[:3])))
        # the output layer's first axis is the number of classes: read it from the weights
        classes = {saved[k][0] for k, v in built.items()
                   if saved[k] != v and v[0] == DEFAULT_CLASSES and saved[k][1:] == v[1:]}
        classes = classes.pop() if len(classes) == 1 else DEFAULT_CLASSES
        if classes != DEFAULT_CLASSES:
            built = _shapes_built(spec, classes, candidate)
        if built == saved:
            return candidate, classes
    raise ValueError("--params %s does not fit --model %s with input %s; give the --input-shape it was "
                     "trained with" % (params, spec.text, " or ".join("x".join(map(str, s)) for s in shapes)))


@dataclass(frozen=True)
class Rung:
    name: str                           # one of RUNGS
    kind: str = "spec"                  # "spec": rebuilt from the spec in the process that runs it;
                                        # "symbol": loaded from exported files; "onnx": an ONNX file
                                        # a runtime loads (gluonperf.inference.runtimes)
    spec: Optional[str] = None
    symbol: Optional[str] = None
    params: Optional[str] = None
    hybridize: str = "none"             # for kind "spec": "none" (fp32 as written) or "static"
    input_shape: tuple = ()
    build_s: Optional[float] = None     # seconds it took to build (calibration included)
    error: Optional[str] = None         # one line: why it cannot be built here (the others still run)
    note: Optional[str] = None
    classes: Optional[int] = None       # the model's outputs (a kind "spec" rung rebuilds it with them)
    onnx: Optional[str] = None          # kind "onnx": the file its runtime loads

    def to_text(self):
        """JSON text: a Rung crosses processes as text."""
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_text(text):
        fields = json.loads(text)
        fields["input_shape"] = tuple(fields.get("input_shape") or ())
        return Rung(**fields)


def available(rungs=RUNGS):
    """{rung: None, or why this CPU/build cannot have it}: bf16 needs AVX512-BF16 or AMX (and
    oneDNN allowed AVX-512); fused, bf16 and int8 need MXNet built with oneDNN and not switched
    off (MXNET_MKLDNN_ENABLED=0); the runtimes' rungs need their package (`runtimes.why_not`)."""
    from ..runtime import precision
    unknown = [r for r in rungs if r not in RUNGS]
    if unknown:
        raise ValueError("unknown precision %s; choose from %s" % (", ".join(unknown), ", ".join(RUNGS)))
    onednn = None
    if not mx.runtime.Features().is_enabled("MKLDNN"):
        onednn = "this MXNet build has no oneDNN (MKLDNN), whose kernels it needs"
    elif os.environ.get("MXNET_MKLDNN_ENABLED", "1") == "0":
        onednn = "MXNET_MKLDNN_ENABLED=0 switches oneDNN off, whose kernels it needs"
    out = {}
    for rung in rungs:
        why = None
        if rung in ("fused", "bf16", "int8"):
            why = onednn
        if rung in runtimes.RUNGS:
            why = runtimes.why_not(rung)
        if rung == "bf16" and why is None:
            why = precision.why_no_bf16()
            if why is None and not precision.has_bf16():
                why = ("this CPU has neither AVX512-BF16 nor AMX: oneDNN would emulate bfloat16 on AVX-512, "
                       "slower than float32")
        out[rung] = why
    return out


def _timed(name, base, build):
    """The Rung `build()` makes (fields over `base`), with its build time, or with `error`:
    one line saying why it cannot be built."""
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():  # MXNet's, that it cannot tell an imported input's dtype (float32)
            warnings.simplefilter("ignore", UserWarning)
            fields = build()
    except Exception as e:  # the model's and MXNet's: whatever a rung fails with is the answer
        return replace(base, name=name, kind="symbol", error="%s: %s" % (type(e).__name__, error_line(e)))
    return replace(base, name=name, build_s=time.perf_counter() - start, **fields)


def prepare(source, rungs, ctx, workdir, calibration=None):
    """In the parent, once: each asked rung built and, where it is a graph (static, fused, bf16,
    int8), exported to `workdir` so that every worker process loads the same files; the runtimes'
    rungs from the static graph exported to ONNX once (`runtimes.prepare`). A rung that
    cannot be built comes back with `error` set. `calibration`: a calibration.Samples (int8 needs
    it; without, int8 is calibrated on random samples of the model's input, said in its note).
    Returns [Rung], in RUNGS order."""
    asked = [r for r in RUNGS if r in rungs]
    why_not = available(rungs)
    # the files do not depend on the context; quantize_net_v2 applies oneDNN's passes only when
    # ctx == mx.cpu() and probes the network with arrays on the default context, so cpu(i) builds on cpu(0)
    ctx = mx.cpu() if ctx.device_type == "cpu" else ctx
    workdir = os.path.abspath(workdir)  # the files' paths travel to processes that start elsewhere
    os.makedirs(workdir, exist_ok=True)
    base = Rung(REFERENCE, spec=source.spec, input_shape=tuple(source.input_shape), classes=source.classes)
    out, spec = {}, source.model_spec()
    x = mx.nd.zeros((1,) + tuple(source.input_shape), ctx=ctx, dtype=spec.input_dtype if spec else "float32")
    if source.symbol:
        static = replace(base, kind="symbol", symbol=source.symbol, params=source.params)
        out["fp32"] = replace(base, name="fp32", error="an exported model has no Python Block to run as written; "
                                                       "its static rung runs the same graph")
        if "static" in asked:
            out["static"] = static = _timed("static", static, lambda: _loaded(static, x, ctx))
    else:
        out["fp32"], static = _from_spec(source, spec, base, ctx, workdir)
        out["static"] = static
    builders = {"fused": _fused, "bf16": _bf16, "int8": lambda s, x, c, p: _int8(s, x, c, p, calibration)}
    for name in asked:
        if name in builders:
            why = why_not[name] or (static.error and "the static graph it is built from failed: " + static.error)
            if why:
                out[name] = replace(base, name=name, kind="symbol", error=why)
            else:
                prefix = os.path.join(workdir, name)
                out[name] = _timed(name, static, lambda b=builders[name], p=prefix: b(static, x, ctx, p))
    served = [name for name in asked if name in runtimes.RUNGS]
    for name in served:
        why = why_not[name] or (static.error and "the static graph it is exported from failed: " + static.error)
        if why:
            out[name] = replace(base, name=name, kind="onnx", error=why)
    out.update(runtimes.prepare(static, [name for name in served if name not in out], workdir, calibration))
    return [out[name] for name in asked]


def input_dtype(spec):
    """The dtype of the input of model `spec` (its spec text; float32 for an exported model)."""
    from ..training.model_spec import as_spec
    return as_spec(spec).input_dtype if spec else "float32"


def _from_spec(source, spec, base, ctx, workdir):
    """(the fp32 rung, the static rung) of `source`'s ModelSpec `spec`: the Block built with its
    weights (the trained ones, or a seeded initialisation saved to workdir so that every process
    gets the same), then hybridized and exported."""
    start = time.perf_counter()
    mx.random.seed(0)
    net = _build_spec(spec, source.classes or DEFAULT_CLASSES, ctx)
    x = mx.nd.zeros((1,) + tuple(source.input_shape), ctx=ctx, dtype=spec.input_dtype)
    if source.params:
        net.load_parameters(source.params, ctx=ctx)
        params = source.params
    else:
        net.initialize(mx.init.Xavier(), ctx=ctx)
        net(x)
        params = os.path.join(workdir, "fp32.params")
        net.save_parameters(params)
    fp32 = replace(base, name="fp32", kind="spec", params=params, hybridize="none",
                   build_s=time.perf_counter() - start, note="the Block as written, run imperatively")
    if not spec.hybridizable:
        return fp32, replace(base, kind="symbol", error="the model cannot be hybridized (%s)" % spec.why_not_hybrid)

    def build():
        net.hybridize(**STATIC)
        net(x)
        symbol, params = exported.export(net, os.path.join(workdir, "static"))
        return {"kind": "symbol", "symbol": symbol, "params": params,
                "note": "hybridize(static_alloc=True, static_shape=True), exported"}
    return fp32, _timed("static", base, build)


def _import(rung, ctx):
    return exported.import_block(rung.symbol, rung.params, ctx)


def _loaded(static, x, ctx):
    """An exported model's static rung: its files imported and run once, as every other rung's
    build runs its graph (so its build time is the import and the first call, and files that do
    not load fail here, in one line)."""
    net = _import(static, ctx)
    net.hybridize(**STATIC)
    net(x).wait_to_read()
    return {"note": "loaded with SymbolBlock.imports; build: the import and the first call"}


def _written(net, x, prefix, remove_amp_cast=True):
    """Run the built graph once (export needs its cached op) and export it: the Rung's files."""
    net(x).wait_to_read()
    symbol, params = exported.export(net, prefix, remove_amp_cast)
    return {"symbol": symbol, "params": params}


def _fused(static, x, ctx, prefix):
    net = _import(static, ctx)
    net.optimize_for(x, backend="MKLDNN", **STATIC)
    files = _written(net, x, prefix)
    fused = [op for op in exported.graph_ops(files["symbol"]) if op.startswith("_sg_mkldnn")]
    note = ("oneDNN's backend made %s" % ", ".join(fused) if fused else
            "oneDNN's backend found nothing to fuse in this model: the same graph as static")
    return dict(files, note=note)


def _bf16(static, x, ctx, prefix):
    from mxnet.contrib import amp
    from ..runtime import precision
    net = _import(static, ctx)
    net.hybridize()
    net(x)
    converted = amp.convert_hybrid_block(net, target_dtype="bfloat16", ctx=ctx)
    converted.hybridize(**STATIC)
    files = _written(converted, x, prefix, remove_amp_cast=False)
    if "amp_cast" not in exported.graph_ops(files["symbol"]):
        raise ValueError("no operator of this model runs in bfloat16 under MXNet's AMP (its lists hold "
                         "convolutions and dense layers)")
    isa = ("AMX" if precision.has_amx() else
           "AVX512-BF16 without AMX (slower than float32 on some CPUs, faster on others: measured here)")
    return dict(files, note="AMP bfloat16: convolutions and dense layers in bfloat16 on " + isa)


@contextlib.contextmanager
def _quiet_subgraph_log():
    """MXNET_SUBGRAPH_VERBOSE=0 while quantize_net_v2 binds its calibration module, unless the user
    set it: MXNet would print "Subgraph backend MKLDNN is activated" on stderr."""
    if "MXNET_SUBGRAPH_VERBOSE" in os.environ:
        yield
        return
    os.environ["MXNET_SUBGRAPH_VERBOSE"] = "0"
    try:
        yield
    finally:
        del os.environ["MXNET_SUBGRAPH_VERBOSE"]


def _int8(static, x, ctx, prefix, calibration):
    from mxnet.contrib.quantization import quantize_net_v2
    from ..runtime.precision import has_vnni
    from . import calibration as calib
    samples = calibration if calibration is not None else calib.load(None, static.input_shape, 64)
    name = exported.input_name(static.symbol, static.params)
    data = np.ascontiguousarray(samples.data, dtype=np.float32)
    batches = mx.io.NDArrayIter(data={name: data}, batch_size=min(CALIBRATION_BATCH, len(data)))
    net = _import(static, ctx)
    with _quiet_subgraph_log():
        quantized = quantize_net_v2(net, quantized_dtype="auto", calib_mode=CALIBRATION_MODE, calib_data=batches,
                                    num_calib_examples=len(data), ctx=ctx)
    quantized.hybridize(**STATIC)
    files = _written(quantized, x, prefix)
    ops = exported.graph_ops(files["symbol"])
    if not any(op.startswith("_contrib_quantize") for op in ops):
        raise ValueError("MXNet 1.9.1 has no INT8 kernel for any operator of this model (%s): nothing to "
                         "quantize" % ", ".join(exported.graph_ops(static.symbol)))
    left = [op for op in ops if not op.startswith(("_contrib_quantize", "_contrib_dequantize", "_contrib_quantized",
                                                   "_contrib_requantize", "_sg_mkldnn"))]
    note = "calibrated (%s: each layer's min and max) on %d samples of %s" % (CALIBRATION_MODE, len(data),
                                                                            samples.source)
    if samples.note:
        note += " (%s)" % samples.note
    if left:
        note += "; float32 operators left: %s" % ", ".join(left)
    if not has_vnni():
        note += "; this CPU has no VNNI, so oneDNN's INT8 runs without its dot-product instructions"
    return dict(files, note=note)


def load(rung, ctx, spec=None):
    """In the process that serves: the rung's forward for a batch (NDArray of shape (n,)+input_shape
    on `ctx`), returning the output NDArray (not synced: the caller syncs). No warm-up here.
    `spec`: the ModelSpec of a kind "spec" rung where the caller holds it (else its text is parsed).
    ValueError for a rung that could not be built (its `error`)."""
    if rung.error:
        raise ValueError("%s: %s" % (rung.name, rung.error))
    if rung.kind == "onnx":
        return runtimes.load(rung)
    if rung.kind == "spec":
        net = _build_spec(spec or rung.spec, rung.classes or DEFAULT_CLASSES, ctx)
        net.load_parameters(rung.params, ctx=ctx)
        if rung.hybridize == "static":
            net.hybridize(**STATIC)
        return net
    if rung.name == "bf16":
        from ..runtime import precision
        if precision.has_amx():
            precision.request_amx()  # this process's permission for the AMX registers (Linux 5.16+)
    net = _import(rung, ctx)
    net.hybridize(**STATIC)
    if rung.name != "bf16":
        return net

    def forward(x):  # AMP's last layer may answer in bfloat16, which numpy cannot read
        out = net(x)
        return out if out.dtype == np.float32 else out.astype("float32")
    return forward

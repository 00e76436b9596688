"""ONNX Runtime and OpenVINO as rungs of the ladder, beside MXNet's own.

The static rung's graph is exported once to ONNX (`onnx_export.export`), then served as
`ort-fp32` (ONNX Runtime's CPU execution provider), `ort-int8` (that file quantized by ONNX
Runtime's static QDQ quantization, U8S8, on the same calibration samples as MXNet's int8),
`ov-fp32` and `ov-bf16` (OpenVINO's CPU plugin with that precision hint) and `ov-int8`
(OpenVINO on ort-int8's file). `prepare` builds them; `load` gives a rung's forward as MXNet's
rungs have it (an NDArray in, an NDArray out) on the layout's `threads`, so the same
instances, LoadGen runs and accuracy judge it. docs/precision_ladder.md ("Runtimes") says what
each is and why.

Nothing here imports a runtime until a rung is built or loaded.
"""
import functools
import importlib.util
import os
import time
from dataclasses import replace

import numpy as np

from .. import error_line

RUNGS = ("ort-fp32", "ort-int8", "ov-fp32", "ov-bf16", "ov-int8")
INT8 = ("ort-int8", "ov-int8")       # from one QDQ file, quantized by ONNX Runtime's tools
FLOAT32 = ("ort-fp32", "ov-fp32")
PACKAGES = {"ort": "onnxruntime", "ov": "openvino"}
OV_HINTS = {"ov-fp32": "f32", "ov-bf16": "bf16", "ov-int8": "f32"}  # int8: what is not quantized, in f32
# as pyproject.toml pins them (it says why): what the line for a missing package tells to install
PINS = {"onnx": "onnx>=1.16,<1.18", "onnxruntime": "onnxruntime>=1.17,<1.20", "openvino": "openvino>=2024.4"}
CALIBRATION_BATCH = 32
QUANTIZED_OPS = ("Conv", "Gemm", "MatMul")


def runtime_of(name):
    """'ort' or 'ov': the runtime of rung `name`."""
    return name.split("-", 1)[0]


def why_not(name, flags=None):
    """None, or one line saying why this machine cannot have rung `name`: onnx (MXNet's exporter
    needs it), the rung's runtime or (ov-int8) ONNX Runtime's quantization tools not installed;
    ov-bf16 on a CPU without AVX512-BF16 or AMX."""
    from ..runtime import precision
    for package in ("onnx", PACKAGES[runtime_of(name)]) + (("onnxruntime",) if name in INT8 else ()):
        if importlib.util.find_spec(package) is None:
            return "%s is not installed: pip install '%s'" % (package, PINS[package])
    if name == "ov-bf16" and not precision.has_bf16(flags):
        return "this CPU has neither AVX512-BF16 nor AMX, the bfloat16 instructions OpenVINO's bf16 needs"
    return None


def threads():
    """The threads a runtime gets in this process: the layout's (OMP_NUM_THREADS, which the
    instances set), else every core this process may run on."""
    given = os.environ.get("OMP_NUM_THREADS", "")
    return int(given) if given.isdigit() and int(given) > 0 else len(os.sched_getaffinity(0))


def prepare(static, names, workdir, calibration=None):
    """In the parent, once: the static Rung's files exported to WORKDIR/static.onnx, then each
    rung of `names` built from it. {name: Rung}, kind "onnx"; a rung that cannot be built has
    `error` (one line: an untranslated operator names it). `build_s` includes the export. The
    input is float32, as the sample library holds it."""
    if not names:
        return {}
    start = time.perf_counter()
    path = os.path.join(workdir, "static.onnx")
    failed = None
    try:
        from . import onnx_export
        onnx_export.export(static.symbol, static.params, static.input_shape, path)
    except Exception as e:  # noqa: BLE001 (the exporter's and MXNet's: every runtime rung says it)
        failed = "the ONNX export failed: %s" % error_line(e)
    exported_s = time.perf_counter() - start
    out, shared = {}, {}
    for name in names:
        base = replace(static, name=name, kind="onnx", symbol=None, params=None, note=None, build_s=None)
        if failed:
            out[name] = replace(base, error=failed)
            continue
        begin, reused = time.perf_counter(), shared.get("qdq_s", 0) if name in INT8 else 0
        try:
            fields = _BUILDERS[name](path, base, workdir, calibration, shared)
        except Exception as e:  # noqa: BLE001 (the runtime's: this rung is out, the others build)
            out[name] = replace(base, error="%s: %s" % (type(e).__name__, error_line(e)))
            continue
        out[name] = replace(base, build_s=exported_s + reused + time.perf_counter() - begin, **fields)
    return out


def _checked(name, path, input_shape):
    """Load rung `name` of `path` and run it once on zeros: a file a runtime refuses fails here."""
    run = _session(name, path, threads())
    run(np.zeros((1,) + tuple(input_shape), dtype=np.float32))


def _ort_fp32(path, rung, workdir, calibration, shared):
    import onnxruntime
    _checked(rung.name, path, rung.input_shape)
    return {"onnx": path, "note": "ONNX Runtime %s, CPU execution provider, every graph optimization; exported by "
                                  "MXNet's exporter (opset 13)" % onnxruntime.__version__}


def _ov(path, rung, workdir, calibration, shared):
    import openvino
    _checked(rung.name, path, rung.input_shape)
    return {"onnx": path, "note": "OpenVINO %s, CPU plugin, INFERENCE_PRECISION_HINT=%s; exported by MXNet's exporter "
                                  "(opset 13)" % (openvino.__version__.split("-")[0], OV_HINTS[rung.name])}


class _Samples:
    """onnxruntime.quantization's CalibrationDataReader over the calibration samples."""

    def __init__(self, name, data):
        self.batches = iter([{name: data[i:i + CALIBRATION_BATCH]} for i in range(0, len(data), CALIBRATION_BATCH)])

    def get_next(self):
        return next(self.batches, None)


def _qdq(path, rung, workdir, calibration, shared):
    """(the QDQ file, what it is) of WORKDIR/static.onnx, quantized once for both INT8 rungs (its
    seconds in shared["qdq_s"]; a failure raised again for the second): QDQ, weights int8 per
    channel, activations uint8, MinMax over the calibration samples (random ones of the model's
    input without, said), after ONNX Runtime's pre-processing (shape inference, batch norm
    folded into convolutions)."""
    if "qdq" in shared:
        if isinstance(shared["qdq"], Exception):
            raise shared["qdq"]
        return shared["qdq"]
    start = time.perf_counter()
    try:
        shared["qdq"] = _quantized(path, rung, workdir, calibration)
    except Exception as e:
        shared["qdq"] = e
        raise
    finally:
        shared["qdq_s"] = time.perf_counter() - start
    return shared["qdq"]


def _quantized(path, rung, workdir, calibration):
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quant_pre_process, quantize_static
    from ..runtime.precision import has_vnni
    from . import calibration as calib
    samples = calibration if calibration is not None else calib.load(None, rung.input_shape, 64)
    data = np.ascontiguousarray(samples.data, dtype=np.float32)
    ready = os.path.join(workdir, "int8-pre.onnx")
    quant_pre_process(path, ready, skip_symbolic_shape=True)
    out = os.path.join(workdir, "int8-qdq.onnx")
    name = onnx.load(ready).graph.input[0].name
    # Without VNNI, u8 x s8 products go through VPMADDUBSW, whose 16-bit sums saturate; ONNX
    # Runtime's remedy is 7-bit weights (reduce_range). A LeNet trained on digits kept 94.6% of
    # fp32's answers with 8-bit weights on an AVX2 Zen 3, against 100% in MXNet's own INT8.
    no_vnni = not has_vnni()
    quantize_static(ready, out, _Samples(name, data), quant_format=QuantFormat.QDQ, per_channel=True,
                    reduce_range=no_vnni, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax)
    quantized, total = _quantized_ops(onnx.load(out))
    if not quantized:
        raise ValueError("ONNX Runtime's quantizer quantized no %s of this model: nothing to run in INT8"
                         % "/".join(QUANTIZED_OPS))
    what = ("QDQ by ONNX Runtime's quantize_static: weights int8 per channel, activations uint8; calibrated (MinMax) "
            "on %d samples of %s; %d of %d %s quantized" % (len(data), samples.source, quantized, total,
                                                           "/".join(QUANTIZED_OPS)))
    if samples.note:
        what += " (%s)" % samples.note
    if no_vnni:
        what += ("; this CPU has no VNNI, so INT8 runs without the dot-product instructions, with 7-bit weights "
                 "(reduce_range) against their 16-bit sums saturating")
    return out, what


def _int8(path, rung, workdir, calibration, shared):
    out, what = _qdq(path, rung, workdir, calibration, shared)
    _checked(rung.name, out, rung.input_shape)
    if runtime_of(rung.name) == "ort":
        import onnxruntime
        return {"onnx": out, "note": "ONNX Runtime %s, %s" % (onnxruntime.__version__, what)}
    import openvino
    return {"onnx": out, "note": "OpenVINO %s, CPU plugin, on %s" % (openvino.__version__.split("-")[0], what)}


def _quantized_ops(model):
    """(nodes of QUANTIZED_OPS whose data input is dequantized, nodes of QUANTIZED_OPS) of a QDQ model."""
    made = {o: n.op_type for n in model.graph.node for o in n.output}
    nodes = [n for n in model.graph.node if n.op_type in QUANTIZED_OPS]
    return sum(made.get(n.input[0]) == "DequantizeLinear" for n in nodes), len(nodes)


_BUILDERS = {"ort-fp32": _ort_fp32, "ort-int8": _int8, "ov-fp32": _ov, "ov-bf16": _ov, "ov-int8": _int8}


_CORES = []


def _ov_core():
    """This process's one openvino.Core: a second one beside the first left a process that had
    compiled two OpenVINO rungs to crash (SIGSEGV) when Ctrl-C stopped it."""
    if not _CORES:
        import openvino
        _CORES.append(openvino.Core())
    return _CORES[0]


ORT_PROVIDERS = ["CPUExecutionProvider"]
OV_DEVICE = "CPU"


def ort_options(n):
    """An ONNX Runtime rung's SessionOptions at `n` threads, {attribute: value}: an int, or the
    name of an onnxruntime enum member. `_session` sets them and `deploy_code` writes them into
    the lines that serve the rung, so that what is deployed is what was measured."""
    return {"intra_op_num_threads": n, "inter_op_num_threads": 1, "execution_mode": "ExecutionMode.ORT_SEQUENTIAL",
            "graph_optimization_level": "GraphOptimizationLevel.ORT_ENABLE_ALL"}


def ov_properties(name, n):
    """The properties OpenVINO's CPU plugin compiles rung `name` with at `n` threads (one
    stream: the layout's instances are the streams); `_session` and `deploy_code` use them."""
    return {"INFERENCE_NUM_THREADS": str(n), "NUM_STREAMS": "1", "INFERENCE_PRECISION_HINT": OV_HINTS[name]}


def ort_session_options(n):
    """onnxruntime.SessionOptions with `ort_options(n)` set: what every ONNX Runtime session of a rung runs with."""
    import onnxruntime
    options = onnxruntime.SessionOptions()
    for attribute, value in ort_options(n).items():
        if isinstance(value, str):  # an enum member's name
            value = functools.reduce(getattr, value.split("."), onnxruntime)
        setattr(options, attribute, value)
    return options


def _session(name, path, n):
    """A function numpy batch -> numpy output of rung `name` on the ONNX file `path`, `n` threads."""
    if runtime_of(name) == "ort":
        import onnxruntime
        session = onnxruntime.InferenceSession(path, ort_session_options(n), providers=ORT_PROVIDERS)
        input_name = session.get_inputs()[0].name
        return lambda data: session.run(None, {input_name: data})[0]
    core = _ov_core()
    compiled = core.compile_model(core.read_model(path), OV_DEVICE, ov_properties(name, n))
    request = compiled.create_infer_request()
    return lambda data: request.infer({0: data})[0]


def load(rung):
    """In the process that serves: the rung's forward, an NDArray batch in, an NDArray out (on its
    context), as `ladder.load` gives MXNet's rungs; a numpy batch in, numpy out (`numpy_in`: the
    serving loop hands it the samples as they are, without an NDArray's copy on the way). The
    runtime's call is synchronous: the output is ready when it returns."""
    import mxnet as mx
    run = _session(rung.name, rung.onnx, threads())

    def forward(x):
        if isinstance(x, np.ndarray):
            return run(np.ascontiguousarray(x, dtype=np.float32))
        return mx.nd.array(run(np.ascontiguousarray(x.asnumpy(), dtype=np.float32)), ctx=x.context)
    forward.numpy_in = True
    return forward

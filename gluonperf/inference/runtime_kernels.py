"""What ran in a runtime's rung, as `primitives` says it for MXNet's: for one warm call at a batch
size, OpenVINO's executed graph (each layer's type, the primitive that ran it, e.g.
`brgconv_avx2_I8`, and its precision: `CompiledModel.get_runtime_model()`) and ONNX Runtime's
profiled nodes (the operators its graph optimizations left, e.g. `QLinearConv`: the session's
own profile). Read in this process: both runtimes report it through their public API.
"""
import json
import os
import tempfile

import numpy as np

from . import runtimes
from .primitives import ran_text

OV_NOT_RUN = ("Input", "Output", "Const", "Parameter", "Result")  # layers that compute nothing


def ov_summary(layers):
    """The summary of OpenVINO's executed layers, [(layerType, primitiveType, runtimePrecision)]:
    'Convolution brgconv_avx2_I8 x20, ...; 2 reorders (jit_uni_f32)'. ValueError for none."""
    if not layers:
        raise ValueError("OpenVINO reported no executed layer")
    run = [(kind, impl) for kind, impl, _ in layers if kind not in OV_NOT_RUN]
    return ran_text(["%s %s" % (kind, impl) for kind, impl in run if kind != "Reorder"],
                    [impl for kind, impl in run if kind == "Reorder"], "no computing layer")


def ort_summary(nodes):
    """The summary of ONNX Runtime's executed nodes' operator types, in order: 'QLinearConv x20,
    Gemm; 2 reorders (ReorderInput, ReorderOutput)'. ValueError for none."""
    if not nodes:
        raise ValueError("ONNX Runtime's profile has no node")
    return ran_text([op for op in nodes if not op.startswith("Reorder")],
                    [op for op in nodes if op.startswith("Reorder")], "no computing node")


def _batch(rung, batch_size):
    return np.random.RandomState(0).uniform(size=(batch_size,) + tuple(rung.input_shape)).astype(np.float32)


def ov_layers(rung, batch_size):
    """[(layerType, primitiveType, runtimePrecision)] of the rung's compiled model after a call."""
    core = runtimes._ov_core()
    compiled = core.compile_model(core.read_model(rung.onnx), runtimes.OV_DEVICE,
                                  runtimes.ov_properties(rung.name, runtimes.threads()))
    compiled.create_infer_request().infer({0: _batch(rung, batch_size)})
    out = []
    for op in compiled.get_runtime_model().get_ordered_ops():
        info = op.get_rt_info()
        out.append(tuple(info[k].astype(str) if k in info else "?"
                         for k in ("layerType", "primitiveType", "runtimePrecision")))
    return out


def ort_nodes(rung, batch_size):
    """The operator types of the nodes ONNX Runtime ran in the second of two calls, from its profile."""
    import onnxruntime
    with tempfile.TemporaryDirectory(prefix="gluonperf-ort-profile-") as folder:
        options = runtimes.ort_session_options(runtimes.threads())  # as the rung is served
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "profile")
        session = onnxruntime.InferenceSession(rung.onnx, options, providers=runtimes.ORT_PROVIDERS)
        feed = {session.get_inputs()[0].name: _batch(rung, batch_size)}
        session.run(None, feed)
        session.run(None, feed)
        with open(session.end_profiling()) as f:  # the file under profile_file_prefix, in `folder`
            events = json.load(f)
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    if not runs:
        raise ValueError("ONNX Runtime's profile has no model_run")
    last = runs[-1]
    return [e["args"]["op_name"] for e in sorted(events, key=lambda e: e.get("ts", 0))
            if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")
            and last["ts"] <= e.get("ts", -1) <= last["ts"] + last["dur"]]


def read(rungs, batch_size):
    """{rung name: 'ran at batch N: ...'} for each built runtime rung of `rungs`; a rung whose
    kernels could not be read gets 'what ran: not read (why)', and the rung still stands.
    ValueError for a batch size below 1."""
    from .. import error_line
    if int(batch_size) < 1:
        raise ValueError("batch_size %r: give a positive batch size" % (batch_size,))
    out = {}
    for r in rungs:
        if r.kind != "onnx" or r.error or not r.onnx:
            continue
        try:
            if runtimes.runtime_of(r.name) == "ov":
                text = ov_summary(ov_layers(r, int(batch_size)))
            else:
                text = ort_summary(ort_nodes(r, int(batch_size)))
            out[r.name] = "ran at batch %d: %s" % (batch_size, text)
        except Exception as e:  # noqa: BLE001 (whatever stops the reading, the rung stands)
            out[r.name] = "what ran: not read (%s: %s)" % (type(e).__name__, error_line(e))
    return out

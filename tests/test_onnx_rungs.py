"""The runtimes' rungs: the static graph exported to ONNX by MXNet's own exporter and fixed
(gluonperf.inference.onnx_export), then served by ONNX Runtime and OpenVINO
(gluonperf.inference.runtimes) through the ladder. What is computed, never how fast: the file
passes onnx's checker with opset 13, IR 8 and no weight among its inputs, the runtimes answer
what MXNet answers, an operator the exporter does not translate is one line naming it."""
import os
import re

import mxnet as mx
import numpy as np
import pytest

from helpers import ROOT, run_leaving_nothing
from gluonperf.inference import accuracy, calibration, ladder, onnx_export, runtime_kernels, runtimes

onnx = pytest.importorskip("onnx")
onnxruntime = pytest.importorskip("onnxruntime")
CTX = mx.cpu()
# float32 sums in another order (another runtime's kernels): 1e-5 of the outputs' scale
TOLERANCE = 1e-5


def static_block(model, shape, classes=10):
    """gluonperf's model `model` hybridized static with seeded Xavier weights, run once."""
    from gluonperf.training.models import get_model
    mx.random.seed(0)
    net = get_model(model, classes, [CTX])
    net.initialize(mx.init.Xavier(), ctx=CTX)
    net.hybridize(**ladder.STATIC)
    net(mx.nd.zeros((1,) + shape, ctx=CTX))
    return net


def onnx_runtime(path, x):
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("model, shape", [("lenet", (1, 28, 28)), ("mlp", (512,)), ("resnet18", (1, 16, 16))])
def test_the_file_passes_the_checker_and_onnx_runtime_answers_what_mxnet_does(model, shape, tmp_path):
    """opset 13, IR 8, the weights out of the inputs (so that ONNX Runtime can fold them), a
    dynamic batch axis: batches of 1 and 5 give MXNet's outputs. resnet18 on a oneDNN CPU has
    BatchNorm fused with ReLU, which the exporter does not translate: it is split first."""
    net = static_block(model, shape)
    path = onnx_export.export_block(net, shape, str(tmp_path / model))
    written = onnx.load(path)
    onnx.checker.check_model(written)
    assert written.ir_version == onnx_export.IR_VERSION == 8
    assert [(o.domain, o.version) for o in written.opset_import] == [("", 13)]
    assert [i.name for i in written.graph.input] == ["data"] and len(written.graph.initializer) > 1
    rng = np.random.RandomState(0)
    for batch in (1, 5):
        x = rng.uniform(size=(batch,) + shape).astype(np.float32)
        want = net(mx.nd.array(x, ctx=CTX)).asnumpy()
        got = onnx_runtime(path, x)
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= TOLERANCE * max(1.0, np.abs(want).max()), (model, batch)


def test_batchnorm_fused_with_relu_is_split_into_the_same_function():
    graph = {"nodes": [{"op": "null", "name": "data", "inputs": []},
                       {"op": "null", "name": "gamma", "inputs": []},
                       {"op": "_contrib_BatchNormWithReLU", "name": "bn", "attrs": {"eps": "1e-5"},
                        "inputs": [[0, 0, 0], [1, 0, 0]]},
                       {"op": "Flatten", "name": "flat", "inputs": [[2, 0, 0]]}],
             "arg_nodes": [0, 1], "node_row_ptr": [0, 1, 2, 5, 6], "heads": [[3, 0, 0], [2, 1, 0]]}
    split = onnx_export.unfused(graph)
    assert [(n["op"], n["name"]) for n in split["nodes"]] == [
        ("null", "data"), ("null", "gamma"), ("BatchNorm", "bn"), ("Activation", "bn_relu"), ("Flatten", "flat")]
    assert split["nodes"][3]["attrs"] == {"act_type": "relu"} and split["nodes"][3]["inputs"] == [[2, 0, 0]]
    assert split["nodes"][4]["inputs"] == [[3, 0, 0]] and split["nodes"][2]["attrs"] == {"eps": "1e-5"}
    assert split["heads"] == [[4, 0, 0], [2, 1, 0]] and split["arg_nodes"] == [0, 1]
    assert "node_row_ptr" not in split and graph["nodes"][2]["op"] == "_contrib_BatchNormWithReLU"
    plain = {"nodes": [{"op": "null", "name": "data", "inputs": []}], "arg_nodes": [0], "heads": [[0, 0, 0]]}
    assert onnx_export.unfused(plain) is plain


class Erf(mx.gluon.HybridBlock):
    """A dense layer and erf, which MXNet 1.9.1's ONNX exporter has no translation for."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.dense = mx.gluon.nn.Dense(4)

    def hybrid_forward(self, F, x):
        return F.erf(self.dense(x))


def test_an_operator_the_exporter_does_not_translate_is_one_line_naming_it(tmp_path):
    net = Erf()
    net.initialize()
    net.hybridize()
    net(mx.nd.zeros((1, 3)))
    with pytest.raises(ValueError) as e:
        onnx_export.export_block(net, (3,), str(tmp_path / "erf"))
    assert str(e.value) == "MXNet's ONNX exporter has no translation for operator erf"
    assert sorted(os.listdir(tmp_path)) == ["erf-0000.params", "erf-symbol.json"]  # no temporary left


def test_bad_arguments_are_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="one sample's shape"):
        onnx_export.export("x-symbol.json", "x-0000.params", (), str(tmp_path / "x.onnx"))
    with pytest.raises(ValueError, match="no such file"):
        onnx_export.export(str(tmp_path / "x-symbol.json"), "x-0000.params", (3,), str(tmp_path / "x.onnx"))


@pytest.fixture(scope="module")
def digits():
    """LeNet's input from digits: the first 64 calibrate, the next 64 judge."""
    return calibration.split(calibration.load("digits", (1, 28, 28), 128), 64)


def test_each_runtime_rung_is_built_once_and_answers_what_static_does(digits, tmp_path, monkeypatch):
    """Through the ladder, as infer builds and loads them, with the layout's threads: the float32
    rungs give static's outputs; ort-int8 and ov-int8 (one QDQ file, U8S8, calibrated on the
    calibration samples) static's top-1 on nearly every sample; ov-bf16 is one line on a CPU
    without bfloat16."""
    calib, held = digits
    source = ladder.model_source("lenet")
    names = ["static"] + list(runtimes.RUNGS)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as an instance of a 2x1 layout has it
    assert runtimes.threads() == 1
    rungs = {r.name: r for r in ladder.prepare(source, names, CTX, str(tmp_path / "work"), calib)}
    assert list(rungs) == names
    reference = accuracy.outputs_of(ladder.load(rungs["static"], CTX), held.data, CTX)
    scale = float(np.abs(reference).max())
    why_not = ladder.available(names)
    for name in runtimes.RUNGS:
        rung = rungs[name]
        assert rung.error == why_not[name], rung
        if rung.error:
            continue
        assert rung.kind == "onnx" and os.path.isfile(rung.onnx) and rung.build_s > 0 and rung.note
        again = ladder.Rung.from_text(rung.to_text())  # as it crosses to an instance
        forward = ladder.load(again, CTX)
        got = accuracy.outputs_of(forward, held.data, CTX)
        assert forward.numpy_in and isinstance(forward(held.data[:3]), np.ndarray)  # as serving hands it samples
        assert np.allclose(forward(held.data[:3]), got[:3], rtol=0, atol=TOLERANCE * max(1.0, scale))
        if name in runtimes.FLOAT32:
            assert np.abs(got - reference).max() <= TOLERANCE * max(1.0, scale), name
        else:
            # random weights: the classes' outputs lie close (a median top-2 gap of a tenth of the
            # scale), so INT8's rounding flips some; MXNet's own int8 is 7% of the scale off here and
            # agrees on 0.9. What this catches is an INT8 that computes something else (the trained
            # LeNet's accuracy: tests/test_inference_ladder.py)
            assert np.abs(got - reference).max() <= 0.3 * scale, name
            assert accuracy.outputs_agree(reference, got)["top1_agreement"] >= 0.7, name
    if not rungs["ort-int8"].error:
        assert "uint8" in rungs["ort-int8"].note and "64 samples of digits" in rungs["ort-int8"].note
        assert rungs["ort-int8"].onnx.endswith("int8-qdq.onnx")
        assert rungs["ov-int8"].error or rungs["ov-int8"].onnx == rungs["ort-int8"].onnx  # quantized once
    from gluonperf.runtime import precision
    if not precision.has_bf16():
        assert "neither AVX512-BF16 nor AMX" in rungs["ov-bf16"].error
    # what a warm call ran, from each runtime's own report: the kernels the ladder's notes name
    ran = runtime_kernels.read(list(rungs.values()), 4)
    assert set(ran) == {n for n in runtimes.RUNGS if not rungs[n].error}
    assert all(text.startswith("ran at batch 4: ") for text in ran.values()), ran
    if "ort-fp32" in ran:
        assert "Conv" in ran["ort-fp32"] and "QLinear" not in ran["ort-fp32"], ran
    if "ort-int8" in ran:
        assert "QLinearConv x2" in ran["ort-int8"], ran  # LeNet's two convolutions, both in 8 bits
    if "ov-fp32" in ran:
        assert re.search(r"Convolution \S+_f32 x2", ran["ov-fp32"]) and "_I8" not in ran["ov-fp32"], ran
    if "ov-int8" in ran:
        assert re.search(r"Convolution \S+_I8 x2", ran["ov-int8"]), ran


def test_what_a_runtime_ran_is_summed_up_and_a_failed_reading_is_one_note(tmp_path):
    assert runtime_kernels.ov_summary([("Input", "unknown_f32", "f32"), ("Reorder", "jit_uni_f32", "f32"),
                                       ("Convolution", "jit_avx2_I8", "I8"), ("Convolution", "jit_avx2_I8", "I8"),
                                       ("Const", "unknown_f32", "f32"), ("Output", "unknown_f32", "f32")]) == \
        "Convolution jit_avx2_I8 x2; 1 reorder (jit_uni_f32)"
    assert runtime_kernels.ort_summary(["ReorderInput", "Conv", "Conv", "Gemm", "ReorderOutput"]) == \
        "Conv x2, Gemm; 2 reorders (ReorderInput, ReorderOutput)"
    for empty in (runtime_kernels.ov_summary, runtime_kernels.ort_summary):
        with pytest.raises(ValueError):
            empty([])
    missing = ladder.Rung("ort-fp32", kind="onnx", onnx=str(tmp_path / "missing.onnx"), input_shape=(4,))
    mxnet_rung = ladder.Rung("static", kind="symbol")
    ran = runtime_kernels.read([missing, mxnet_rung], 2)
    assert list(ran) == ["ort-fp32"] and ran["ort-fp32"].startswith("what ran: not read ("), ran
    with pytest.raises(ValueError, match="positive batch size"):
        runtime_kernels.read([missing], 0)


def test_a_runtime_not_installed_is_one_line_and_the_export_is_shared(tmp_path, monkeypatch):
    """ladder.available names the missing package; a model the exporter cannot take has every
    runtime rung out with the operator named, and the MXNet rungs still build."""
    import importlib.util
    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else found(name, *a))
    why = ladder.available(["ov-fp32", "ort-fp32"])
    assert why["ov-fp32"].startswith("openvino is not installed") and why["ort-fp32"] is None
    monkeypatch.undo()

    def broken(*args, **kwargs):
        raise ValueError("MXNet's ONNX exporter has no translation for operator erf")
    monkeypatch.setattr(onnx_export, "export", broken)
    rungs = ladder.prepare(ladder.model_source("mlp"), ["static", "ort-fp32", "ov-fp32"], CTX, str(tmp_path))
    assert rungs[0].error is None
    for rung in rungs[1:]:
        assert rung.error == "the ONNX export failed: MXNet's ONNX exporter has no translation for operator erf"
        with pytest.raises(ValueError):
            ladder.load(rung, CTX)


def test_asking_only_for_a_runtime_that_is_not_installed_is_one_line_and_exit_2(tmp_path):
    """`--precision ort-fp32` where onnxruntime is not importable (hidden by a sitecustomize)."""
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['onnxruntime'] = None\n")
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", "mlp", "--precision", "ort-fp32"], timeout=120,
                            PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--precision ort-fp32: ort-fp32: onnxruntime is not installed" in lines[0], p.stderr


def test_infer_says_in_one_line_which_operator_keeps_a_model_from_the_runtimes(tmp_path):
    """The command as users run it, on a model of their own with erf: static is served, and the
    runtimes' rungs are one line each in "not run here", naming the operator."""
    import json
    (tmp_path / "erfnet.py").write_text(
        "from mxnet import gluon\n"
        "class ErfNet(gluon.HybridBlock):\n"
        "    def __init__(self, classes=10, **kw):\n"
        "        super().__init__(**kw)\n"
        "        with self.name_scope():\n"
        "            self.dense = gluon.nn.Dense(classes)\n"
        "    def hybrid_forward(self, F, x):\n"
        "        return F.erf(self.dense(x))\n"
        "def erfnet(classes=10):\n"
        "    return ErfNet(classes)\n")
    out = tmp_path / "run.json"
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", str(tmp_path / "erfnet.py") + ":erfnet",
                             "--input-shape", "8", "--precision", "static,ort-fp32,ov-fp32", "--layouts", "1x1",
                             "--rounds", "1", "--cold-starts", "0", "--scenario", "single-stream", "--duration",
                             "0.05", "--json", str(out)], timeout=300)
    assert p.returncode == 0, p.stderr
    rows = {r["precision"]: r for r in map(json.loads, open(out)) if r.get("error") or r.get("scenario")}
    assert rows["static"].get("p90_s") and not rows["static"].get("error")
    for name in ("ort-fp32", "ov-fp32"):
        assert rows[name]["error"] == "the ONNX export failed: MXNet's ONNX exporter has no translation for operator erf"
    table = next(t for t in p.stdout.split("\n\n") if t.startswith("not run here"))
    assert "ort-fp32" in table and "ov-fp32" in table and "operator erf" in table

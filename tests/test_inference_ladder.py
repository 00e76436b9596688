"""gluonperf.inference's ladder half: the model as deployed, its precision rungs, the samples they
are calibrated and judged on, the paired accuracy interval, cold start. What is computed, never
how fast."""
import math
import os
import shutil
import subprocess
import sys

import mxnet as mx
import numpy as np
import pytest

from helpers import ROOT, clean_env
from gluonperf.inference import accuracy, calibration, coldstart, exported, ladder, primitives, runtimes
from gluonperf.inference.deploy import FLOAT32

CTX = mx.cpu()
SHAPE = (1, 28, 28)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """LeNet trained on digits for two epochs (test top-1 about 0.93), through `fit`'s `trained`
    hook: its weights saved (a spec with --params) and exported as train --export writes it."""
    from gluonperf.training.loop import TrainConfig, fit
    root = tmp_path_factory.mktemp("trained")
    nets = []
    config = TrainConfig(model="lenet", dataset="digits", batch_size=32, epochs=2, lr=0.1, warmup_epochs=0,
                         workers=0, log_interval=0)
    history = fit(config, [CTX], trained=nets.append)
    params = str(root / "lenet.params")
    nets[0].save_parameters(params)
    symbol, exported_params, _ = exported.export_trained(nets[0], "lenet", 10, SHAPE, CTX, str(root / "lenet"))
    samples = calibration.load("digits", SHAPE, 360)
    return {"params": params, "symbol": symbol, "exported_params": exported_params, "root": root,
            "test_top1": history[-1].metrics["test_top1"], "split": calibration.split(samples, 64)}


def one_line(error):
    text = str(error)
    assert text and "\n" not in text and "Traceback" not in text, text
    return text


# --- what to serve ---------------------------------------------------------------------------

def test_model_source_of_a_spec_and_of_an_exported_model(trained, tmp_path):
    spec = ladder.model_source("lenet")
    assert (spec.spec, spec.symbol, spec.params, spec.input_shape, spec.classes) == ("lenet", None, None, SHAPE, 10)
    source = ladder.model_source(trained["symbol"])
    assert source.spec is None and source.symbol == trained["symbol"]
    assert source.params == trained["exported_params"]  # found beside it, as export() names it
    assert source.input_shape == SHAPE and source.classes == 10  # read from the files
    # several epochs beside it: the highest; --params wins over what is beside it
    later = tmp_path / "lenet-symbol.json"
    shutil.copy(trained["symbol"], later)
    for epoch in (0, 3):
        shutil.copy(trained["exported_params"], tmp_path / ("lenet-%04d.params" % epoch))
    assert ladder.model_source(str(later)).params == str(tmp_path / "lenet-0003.params")
    given = ladder.model_source(str(later), params=trained["exported_params"])
    assert given.params == trained["exported_params"]
    assert ladder.model_source(str(later), input_shape=(1, 28, 28)).input_shape == SHAPE


def test_bad_model_sources_are_one_line_value_errors(trained, tmp_path):
    alone = tmp_path / "alone-symbol.json"
    shutil.copy(trained["symbol"], alone)
    with pytest.raises(ValueError) as e:
        ladder.model_source(str(alone))
    assert "alone-0000.params" in one_line(e.value) and "--params" in str(e.value)
    with pytest.raises(ValueError) as e:
        ladder.model_source(str(tmp_path / "missing-symbol.json"))
    assert "no such file" in one_line(e.value)
    with pytest.raises(ValueError) as e:
        ladder.model_source("no_such_net")
    assert "unknown model" in one_line(e.value)
    with pytest.raises(ValueError) as e:
        ladder.model_source(str(alone), params=str(tmp_path / "nothing.params"))
    assert "no such file" in one_line(e.value)
    with pytest.raises(ValueError) as e:
        ladder.model_source(trained["symbol"], input_shape=(3, 32, 32))
    assert "does not fit" in one_line(e.value)


def test_a_spec_with_weights_takes_its_input_and_classes_from_them(tmp_path):
    """gluonperf's MLP trained on digits takes 1x28x28, not its default 512 features; 3 classes
    are read from the output layer's weights."""
    from gluonperf.training.models import get_model
    net = get_model("mlp", 3)
    net.initialize()
    net(mx.nd.zeros((1,) + SHAPE))
    net.save_parameters(str(tmp_path / "mlp.params"))
    source = ladder.model_source("mlp", params=str(tmp_path / "mlp.params"))
    assert source.input_shape == SHAPE and source.classes == 3
    with pytest.raises(ValueError) as e:
        ladder.model_source("lenet", params=str(tmp_path / "mlp.params"))
    assert "does not hold --model lenet's parameters" in one_line(e.value)


def test_a_rung_crosses_processes_as_text():
    rung = ladder.Rung("int8", "symbol", symbol="/x-symbol.json", params="/x-0000.params", input_shape=SHAPE,
                       build_s=0.5, note="n", classes=10)
    assert ladder.Rung.from_text(rung.to_text()) == rung


# --- the rungs ----------------------------------------------------------------------------------

def outputs(rung, data):
    return accuracy.outputs_of(ladder.load(rung, CTX), data, CTX)


def test_every_rung_of_a_trained_lenet_gives_fp32s_answers(trained, tmp_path):
    """Each rung built from the spec and its trained weights; fp32, static and fused compute the
    same function (to float32 rounding); bfloat16 and INT8 give the same top-1 class on nearly
    every held-out digit and their accuracy within a point or two of fp32's."""
    calib, held = trained["split"]
    source = ladder.model_source("lenet", params=trained["params"])
    rungs = ladder.prepare(source, ladder.RUNGS, CTX, str(tmp_path / "work"), calib)
    assert [r.name for r in rungs] == list(ladder.RUNGS)
    why_not = ladder.available()
    for rung in rungs:
        assert rung.error == why_not[rung.name], rung
    built = [r for r in rungs if not r.error]
    assert trained["test_top1"] > 0.85
    reference = outputs(rungs[1], held.data)
    scale = float(np.abs(reference).max())
    for rung in built:
        assert rung.build_s > 0 and rung.input_shape == SHAPE
        got = accuracy.evaluate(rung, CTX, held, reference)
        agree = accuracy.outputs_agree(reference, got["outputs"])
        assert got["agreement_n"] == len(held.data) == got["accuracy_n"] == 296
        if rung.name in FLOAT32:
            assert agree["max_abs_diff"] <= 1e-4 * scale, rung.name
            assert agree["top1_agreement"] == 1.0 and got["accuracy_change"] == 0
        else:
            assert agree["top1_agreement"] >= 0.97, (rung.name, agree)
            assert abs(got["accuracy_change"]) <= 0.02, (rung.name, got)
        assert got["accuracy_change_ci_low"] <= got["accuracy_change"] <= got["accuracy_change_ci_high"]
    assert "_sg_mkldnn_conv" in rungs[2].note and "naive" in rungs[4].note and "64 samples of digits" in rungs[4].note


def test_an_exported_model_has_every_rung_but_fp32(trained, tmp_path, monkeypatch):
    """Loaded with SymbolBlock.imports, each graph rung built from it; its static rung computes
    what the trained Block does. The files' paths are absolute: workers start elsewhere."""
    calib, held = trained["split"]
    monkeypatch.chdir(tmp_path)
    rungs = ladder.prepare(ladder.model_source(trained["symbol"]), ladder.RUNGS, CTX, "work", calib)
    assert "no Python Block" in one_line(rungs[0].error)
    with pytest.raises(ValueError):
        ladder.load(rungs[0], CTX)
    why_not = ladder.available()
    assert all(r.error == why_not[r.name] and r.kind == ("onnx" if r.name in runtimes.RUNGS else "symbol")
               for r in rungs[1:])
    spec_rung = ladder.prepare(ladder.model_source("lenet", params=trained["params"]), ["fp32"], CTX,
                               str(tmp_path / "spec"))[0]
    reference = outputs(spec_rung, held.data[:64])
    for rung in rungs[1:]:
        if not rung.error:
            got = outputs(rung, held.data[:64])
            assert accuracy.outputs_agree(reference, got)["top1_agreement"] >= (1.0 if rung.name in FLOAT32 else 0.95)
    assert all(os.path.isabs(r.onnx) and os.path.isfile(r.onnx) if r.kind == "onnx" else
               os.path.isabs(r.symbol) and os.path.isfile(r.params) for r in rungs[1:] if not r.error)
    if not rungs[4].error:
        assert rungs[4].symbol == str(tmp_path / "work" / "int8-symbol.json")


def test_an_exported_models_static_build_loads_and_runs_its_files(trained, tmp_path, monkeypatch):
    """Its build is the import and one call, as every graph rung's build runs its graph: files
    that do not load fail there, in one line, and the rungs built from them say so."""
    source = ladder.model_source(trained["symbol"])
    static = ladder.prepare(source, ["static"], CTX, str(tmp_path / "ok"))[0]
    assert static.error is None and static.build_s > 0 and "first call" in static.note

    def broken(*args, **kwargs):
        raise ValueError("the params file does not match the graph")
    monkeypatch.setattr(ladder.exported, "import_block", broken)
    rungs = ladder.prepare(source, ["static", "int8"], CTX, str(tmp_path / "broken"))
    assert "does not match" in one_line(rungs[0].error) and rungs[0].build_s is None
    assert "static graph it is built from failed" in rungs[1].error


def test_a_rung_that_cannot_be_built_says_why_in_one_line_and_the_others_build(tmp_path, monkeypatch):
    """A model of operators MXNet has no INT8 kernel for and AMP keeps in float32, on a CPU
    forced to have no bfloat16: int8 and bf16 are one line each; fp32, static and fused build
    (fused with nothing to fuse)."""
    from gluonperf.runtime import precision
    (tmp_path / "odd.py").write_text(
        "from mxnet.gluon import nn\n"
        "class Odd(nn.HybridBlock):\n"
        "    def __init__(self, classes=10, **kw):\n"
        "        super().__init__(**kw)\n"
        "        self.classes = classes\n"
        "        with self.name_scope():\n"
        "            self.w = self.params.get('w', shape=(1, 28, 28))\n"
        "    def hybrid_forward(self, F, x, w):\n"
        "        y = F.reshape(F.tanh(F.broadcast_mul(x, F.expand_dims(w, 0))), shape=(0, -1))\n"
        "        return F.slice_axis(y, axis=1, begin=0, end=self.classes)\n"
        "def odd(classes=10):\n"
        "    return Odd(classes)\n")
    from gluonperf.training.models import resolve_model
    spec, _ = resolve_model(str(tmp_path / "odd.py") + ":odd", shape=SHAPE)
    monkeypatch.setattr(precision, "has_bf16", lambda flags=None: False)
    monkeypatch.setattr(precision, "why_no_bf16", lambda *a, **k: None)  # an AVX-512 CPU, whatever this one is
    assert "neither AVX512-BF16 nor AMX" in ladder.available(["bf16"])["bf16"]
    rungs = {r.name: r for r in ladder.prepare(ladder.model_source(spec), ladder.RUNGS, CTX, str(tmp_path / "w"))}
    assert "neither AVX512-BF16 nor AMX" in one_line(rungs["bf16"].error)
    assert "no INT8 kernel for any operator" in one_line(rungs["int8"].error) and "tanh" in rungs["int8"].error
    for name in ("fp32", "static", "fused"):
        assert rungs[name].error is None, rungs[name]
    assert "nothing to fuse" in rungs["fused"].note
    x = np.random.RandomState(0).uniform(size=(4,) + SHAPE).astype(np.float32)
    assert np.allclose(outputs(rungs["fused"], x), outputs(rungs["fp32"], x), atol=1e-6)
    with pytest.raises(ValueError) as e:
        ladder.load(rungs["int8"], CTX)
    assert "int8: " in one_line(e.value)
    monkeypatch.undo()
    if ladder.available(["bf16"])["bf16"] is None:  # AMP's lists keep tanh and broadcast_mul in float32
        bf16 = ladder.prepare(ladder.model_source(spec), ["bf16"], CTX, str(tmp_path / "b"))[0]
        assert "no operator of this model runs in bfloat16" in one_line(bf16.error)


def test_the_ladder_is_judged_against_static_and_a_rung_that_fails_is_one_line(trained, tmp_path):
    """accuracy.evaluate_rungs, as infer calls it: static's outputs are the reference of the
    others; a rung whose files are gone comes back with its error (the others are judged)."""
    from dataclasses import replace
    calib, held = trained["split"]
    rungs = ladder.prepare(ladder.model_source(trained["symbol"]), ["static", "int8"], CTX, str(tmp_path), calib)
    gone = replace(rungs[1], name="fused", symbol=str(tmp_path / "gone-symbol.json"))
    judged, fields = accuracy.evaluate_rungs([rungs[0], gone, rungs[1]], CTX, held)
    assert [r.name for r in judged] == ["static", "fused", "int8"]
    assert "it failed on the held-out samples" in one_line(judged[1].error) and "fused" not in fields
    assert fields["static"] == {"evaluated_n": 296, "accuracy": pytest.approx(fields["int8"]["accuracy_ref"])}
    int8 = fields["int8"]
    assert "outputs" not in int8 and int8["accuracy_n"] == int8["agreement_n"] == 296
    assert int8["accuracy_change_ci_low"] <= int8["accuracy_change"] <= int8["accuracy_change_ci_high"]
    unlabelled = replace(held, labels=None)
    _, fields = accuracy.evaluate_rungs(rungs, CTX, unlabelled)
    assert "accuracy" not in fields["int8"] and 0 <= fields["int8"]["top1_agreement"] <= 1


def test_unknown_rungs_are_refused():
    with pytest.raises(ValueError) as e:
        ladder.available(["fp32", "fp16"])
    assert "fp16" in one_line(e.value)


# --- calibration and held-out samples ---------------------------------------------------------

def test_digits_are_the_test_split_and_calibration_never_meets_held_out(trained):
    from gluonperf.training.data import digits
    (train_x, _), (test_x, test_y) = digits()
    samples = calibration.load("digits", SHAPE, 1000)
    assert samples.data.shape == (899,) + SHAPE and samples.data.dtype == np.float32
    assert sorted(map(bytes, samples.data)) == sorted(map(bytes, test_x.astype(np.float32)))
    assert not {bytes(x) for x in samples.data} & {bytes(x) for x in train_x.astype(np.float32)}
    calib, held = calibration.split(samples, 64)
    assert (len(calib.data), len(held.data)) == (64, 835)
    assert not {bytes(x) for x in calib.data} & {bytes(x) for x in held.data}
    assert sorted(np.concatenate([calib.labels, held.labels])) == sorted(test_y)
    with pytest.raises(ValueError):
        calibration.split(samples, 899)


def test_digits_are_shaped_to_the_models_input_or_refused_in_one_line():
    assert calibration.load("digits", (784,), 5).data.shape == (5, 784)
    assert calibration.load("digits", (3, 32, 32), 5).data.shape == (5, 3, 32, 32)
    for shape in ((512,), (2, 28, 28)):
        with pytest.raises(ValueError) as e:
            calibration.load("digits", shape, 5)
        assert "28x28" in one_line(e.value)


def test_no_calibration_data_is_random_input_with_a_note():
    samples = calibration.load(None, (4, 5), 7)
    assert samples.data.shape == (7, 4, 5) and samples.labels is None
    assert "accuracy not measured" in samples.note


def test_image_folders_and_recordio_give_labelled_colour_samples(tmp_path):
    from gluonperf.training.image_data import make_folder, pack_rec
    folder = str(tmp_path / "images")
    make_folder(folder, images_per_class=3, size=40, classes=3)
    samples = calibration.load(folder, (3, 32, 32), 100)
    assert samples.data.shape == (9, 3, 32, 32) and sorted(samples.labels) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    rec, _, _ = pack_rec(folder, str(tmp_path / "images"))
    from_rec = calibration.load(rec, (3, 32, 32), 5, seed=1)
    assert from_rec.data.shape == (5, 3, 32, 32) and set(from_rec.labels) <= {0, 1, 2}
    for what, shape, words in ((folder, SHAPE, "3xSxS"), (str(tmp_path / "none"), (3, 32, 32), "no such file"),
                               (str(tmp_path / "images.lst"), (3, 32, 32), "not a .rec")):
        with pytest.raises(ValueError) as e:
            calibration.load(what, shape, 5)
        assert words in one_line(e.value)
    os.remove(str(tmp_path / "images.idx"))
    with pytest.raises(ValueError) as e:
        calibration.load(rec, (3, 32, 32), 5)
    assert "--calib-data" in one_line(e.value) and ".idx" in str(e.value)


# --- accuracy --------------------------------------------------------------------------------------

def test_paired_interval_matches_the_published_example():
    """Cavo et al. (2012), as Fagerland, Lydersen and Laake's 'Statistical Analysis of Contingency
    Tables' (chapter 8) works it: 59 both, 6 first only, 16 second only, 80 neither: Newcombe's
    interval -0.0621 (-0.1186 to -0.0046)."""
    change, low, high = accuracy.newcombe_paired(59, 6, 16, 80)
    assert (round(change, 4), round(low, 4), round(high, 4)) == (-0.0621, -0.1186, -0.0046)


def test_paired_accuracy_against_a_case_computed_by_hand():
    """20 samples: 14 right for both, 1 only for the rung, 3 only for the reference, 2 for neither."""
    labels = np.zeros(20, dtype=int)
    ref = np.array([0] * 14 + [1] * 1 + [0] * 3 + [1] * 2)
    new = np.array([0] * 14 + [0] * 1 + [1] * 3 + [1] * 2)
    got = accuracy.paired_accuracy(labels, ref, new)
    z = 1.959963984540054
    n, p1, p2 = 20, 15 / 20, 17 / 20

    def wilson(p):
        centre, half = (p + z * z / (2 * n)), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)
    (l1, u1), (l2, u2) = wilson(p1), wilson(p2)
    # a*d - b*c = 14*2 - 1*3 = 25 > n/2 = 10: phi = (25 - 10) / sqrt(15 * 5 * 17 * 3)
    phi = 15 / math.sqrt(15 * 5 * 17 * 3)
    low = (p1 - p2) - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    high = (p1 - p2) + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    assert got["accuracy"] == 0.75 and got["accuracy_ref"] == 0.85 and got["accuracy_n"] == 20
    assert got["accuracy_change"] == pytest.approx(-0.1)
    assert got["accuracy_change_ci_low"] == pytest.approx(low, abs=1e-12)
    assert got["accuracy_change_ci_high"] == pytest.approx(high, abs=1e-12)
    assert "Newcombe" in got["accuracy_method"] and got["accuracy_level"] == 0.95
    # outputs (n, classes) are read by their top-1; the same answers: no change, an interval around 0
    same = accuracy.paired_accuracy(labels, np.eye(2)[ref], np.eye(2)[ref])
    assert same["accuracy_change"] == 0 and same["accuracy_change_ci_low"] < 0 < same["accuracy_change_ci_high"]


def test_outputs_agree_counts_the_largest_difference_and_the_top1_matches():
    ref = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.4]])
    got = accuracy.outputs_agree(ref, ref + [[0, 0.25], [0, 0], [0, 0.2]])
    assert got == {"max_abs_diff": 0.25, "top1_agreement": pytest.approx(2 / 3), "agreement_n": 3}
    with pytest.raises(ValueError):
        accuracy.outputs_agree(ref, ref[:2])


# --- what ran -----------------------------------------------------------------------------------------

VERBOSE = [  # oneDNN 2.x's lines as MXNet 1.9.1 prints them (an int8 LeNet's, shortened), with ones to skip
    "dnnl_verbose,info,oneDNN v2.3.2 (commit 0000)",
    "dnnl_verbose,info,cpu,isa:Intel AVX2",
    "dnnl_verbose,exec,cpu,reorder,jit:uni,undef,src_f32::blocked:abcd:f0 dst_u8::blocked:acdb:f0,"
    "attr-oscale:0:255.5 ,,64x1x28x28,0.042",
    "dnnl_verbose,exec,cpu,convolution,jit_uni_int8:avx2,forward_inference,src_u8::blocked:acdb:f0,"
    "attr-oscale:2 attr-post-ops:eltwise_relu:0:1 ,alg:convolution_direct,mb64_ic1oc20,0.69",
    "dnnl_verbose,1700000000000.5,exec,cpu,convolution,jit_uni_int8:avx2,forward_inference,src_u8,"
    "attr-post-ops:eltwise_relu:0:1+sum:1 ,alg:convolution_direct,mb64_ic20oc50,1.79",  # with a timestamp
    "dnnl_verbose,create:cache_miss,cpu,eltwise,jit:avx2,forward_inference,data_f32,,alg:eltwise_relu,64x128,0.01",
    "mkldnn_verbose,exec,cpu,reorder,jit:uni,undef,src_u8::blocked:acdb:f0 dst_u8::blocked:abcd:f0,,,64x50x4x4,0.018",
    "dnnl_verbose,exec,cpu,inner_product,x64:gemm_s8u8s32:jit,forward_inference,src_u8,,,mb64ic128oc10,0.018",
    "a line MXNet printed",
]


def test_verbose_lines_are_summed_up_by_kind_implementation_and_reorders():
    ran = primitives.executed(VERBOSE)
    assert [(p.kind, p.impl) for p in ran] == [("reorder", "jit:uni"), ("convolution", "jit_uni_int8:avx2"),
                                               ("convolution", "jit_uni_int8:avx2"), ("reorder", "jit:uni"),
                                               ("inner_product", "x64:gemm_s8u8s32:jit")]
    assert ran[1].post_ops == ("eltwise_relu",) and ran[2].post_ops == ("eltwise_relu", "sum")
    assert ran[0].ms == 0.042 and ran[0].post_ops == ()
    assert primitives.summary(ran) == ("convolution jit_uni_int8:avx2+eltwise_relu, convolution "
                                       "jit_uni_int8:avx2+eltwise_relu+sum, inner_product x64:gemm_s8u8s32:jit; "
                                       "2 reorders (jit:uni)")
    assert primitives.summary(ran[1:2] * 3).endswith("+eltwise_relu x3; no reorder")
    with pytest.raises(ValueError):
        primitives.summary([])


def test_each_graph_rungs_note_says_which_onednn_primitives_a_call_ran(tmp_path):
    """One process reads them all; fusing shows as the ReLU folded into the convolution, INT8 as
    the reorder that quantizes its input; the rung's note in infer's records gets the line."""
    from gluonperf.infer import note_what_ran
    rungs = ladder.prepare(ladder.model_source("lenet"), ["fp32", "static", "fused", "int8"], CTX, str(tmp_path))
    base = {"rungs": {"static": {"note": "hybridized"}}}
    note_what_ran(rungs, base, CTX, 8)
    notes = {name: fields["note"] for name, fields in base["rungs"].items()}
    assert set(notes) == {"static", "fused", "int8"}  # fp32 runs no graph
    assert notes["static"].startswith("hybridized; ran at batch 8: convolution ")
    for name in ("fused", "int8"):
        assert notes[name].startswith("ran at batch 8: convolution "), notes
    assert "eltwise " in notes["static"] and "+eltwise_relu" not in notes["static"].split(", ")[0]
    assert notes["fused"].split(", ")[0].endswith("+eltwise_relu x2")  # both convolutions with their ReLU
    assert "no reorder" not in notes["int8"]
    with pytest.raises(ValueError):
        primitives.read(rungs, CTX, 0)


def test_primitives_that_cannot_be_read_leave_the_rung_standing(tmp_path, monkeypatch):
    """A rung that fails in the reading process says so in its note, beside the others read; a
    process that never answers is stopped, with everything it started, and every note says why."""
    from helpers import HANGING_MXNET, processes_of
    static = ladder.prepare(ladder.model_source("lenet"), ["static"], CTX, str(tmp_path))[0]
    gone = ladder.Rung("int8", "symbol", symbol=str(tmp_path / "gone-symbol.json"), params=static.params,
                       input_shape=SHAPE)
    notes = primitives.read([static, gone], CTX, 2)
    assert notes["static"].startswith("ran at batch 2: convolution ")
    assert notes["int8"].startswith("what ran: not read (") and one_line(notes["int8"])
    mark = "primitives-hang-%d" % os.getpid()
    monkeypatch.setenv("PYTHONPATH", HANGING_MXNET["PYTHONPATH"])
    monkeypatch.setenv("GLUONPERF_TEST_RUN", mark)
    assert primitives.read([static], CTX, 2, timeout=2) == {"static": "what ran: not read (no answer in 2 s)"}
    assert processes_of(mark) == []


# --- cold start --------------------------------------------------------------------------------------

def test_cold_start_in_a_fresh_process_has_every_part(trained, tmp_path):
    rung = ladder.prepare(ladder.model_source(trained["symbol"]), ["static"], CTX, str(tmp_path))[0]
    parts = coldstart.measure(rung, CTX, batch_sizes=(1, 4))
    for name in coldstart.PARTS:
        assert parts[name] > 0, (name, parts)
    assert parts["total_s"] == pytest.approx(parts["import_s"] + parts["load_s"] + parts["first_call_s"])
    assert parts["batch_sizes"] == [1, 4] and parts["steady_calls"] == coldstart.STEADY_CALLS
    broken = ladder.Rung("static", "symbol", symbol=str(tmp_path / "gone-symbol.json"), params=rung.params,
                         input_shape=SHAPE)
    with pytest.raises(RuntimeError) as e:
        coldstart.measure(broken, CTX)
    assert "cold start of the static rung failed" in one_line(e.value)
    with pytest.raises(ValueError):
        coldstart.measure(rung, CTX, batch_sizes=(1,))
    with pytest.raises(ValueError):
        coldstart.measure(rung, CTX, steady_calls=0)
    # infer's default: the steady part on one call
    assert coldstart.measure(rung, CTX, batch_sizes=(1, 4), steady_calls=1)["steady_calls"] == 1


def test_a_cold_start_that_never_answers_is_stopped_with_everything_it_started(trained, tmp_path, monkeypatch):
    """A stall the test makes (MXNet that never finishes, tests/hang): the timeout ends it, in
    one line, and no process of it is left."""
    from helpers import HANGING_MXNET, processes_of
    rung = ladder.prepare(ladder.model_source(trained["symbol"]), ["static"], CTX, str(tmp_path))[0]
    mark = "coldstart-hang-%d" % os.getpid()
    monkeypatch.setenv("PYTHONPATH", HANGING_MXNET["PYTHONPATH"])
    monkeypatch.setenv("GLUONPERF_TEST_RUN", mark)
    with pytest.raises(RuntimeError) as e:
        coldstart.measure(rung, CTX, timeout=2)
    assert "gave no answer in 2 s" in one_line(e.value)
    assert processes_of(mark) == []


def test_the_cold_start_worker_run_by_hand_says_what_to_run_instead():
    p = subprocess.run([sys.executable, "-m", "gluonperf.workers.coldstart"], cwd=ROOT, env=clean_env(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "python -m gluonperf.infer" in one_line(p.stderr.strip())

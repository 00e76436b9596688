import json
import os

import mxnet as mx
import numpy as np
import pytest

from gluonperf import UserError
from gluonperf.experiments.hybridize import build_variants, check_outputs, compare_modes, export_and_import
from gluonperf.measure.timing import Timing
from gluonperf.training.models import get_model, input_shape, list_models


@pytest.mark.parametrize("model,batch", [("mlp", 4), ("lenet", 2), ("resnet18", 2)])
def test_hybridized_outputs_equal_imperative(model, batch):
    variants, x, _ = build_variants(model, mx.cpu(), batch)
    ref, diffs = check_outputs(variants, x, tolerance=1e-4)
    assert ref.shape == (batch, 2 if model == "mlp" else 10)
    assert set(diffs) == {"imperative", "hybrid", "static"}
    assert max(diffs.values()) <= 1e-4 * max(1.0, np.abs(ref).max())


def test_a_changed_weight_is_caught_as_a_mismatch():
    variants, x, _ = build_variants("mlp", mx.cpu(), 2)
    weight = variants["static"].net[0].weight
    weight.set_data(weight.data() + 1.0)
    with pytest.raises(UserError, match="static outputs differ"):
        check_outputs(variants, x, tolerance=1e-4)


def test_compare_modes_reports_every_mode_and_hybrid_forward_runs_once():
    results = compare_modes("mlp", batch_size=1, timing=Timing(repeat=2, number=20, warmup=1))
    by_name = {r.name: r.metrics for r in results}
    assert list(by_name) == ["imperative", "hybrid", "static"]
    runs = 2 + 1 + 2 * 20  # output check, warm-up, timed calls
    assert by_name["imperative"]["hybrid_forward_calls"] == by_name["imperative"]["calls"] >= runs
    assert by_name["hybrid"]["hybrid_forward_calls"] == 1
    assert by_name["static"]["hybrid_forward_calls"] == 1
    assert by_name["imperative"]["speedup"] == 1.0 and by_name["imperative"]["verdict"] == "baseline"
    for m in by_name.values():
        assert m["min_s"] <= m["median_s"] <= m["max_s"] and len(m["samples_s"]) == 2
    for mode in ("hybrid", "static"):  # the speed-up over imperative is per repeat, with its interval
        m = by_name[mode]
        assert m["speedup_n"] == 2 and m["speedup_ci_low"] <= m["speedup"] <= m["speedup_ci_high"]
        assert m["verdict"] in ("faster", "slower", "same", "inconclusive")


@pytest.mark.alone
def test_hybridized_mlp_is_faster_than_imperative_beyond_the_noise():
    """A one-sample MLP forward is all Python overhead imperatively, one cached graph call
    hybridized (3-5x on every machine measured): the verdict must be 'faster', with the 95%
    interval above 1. A hybridize() that built no graph, or a speed-up taken from the wrong
    samples, fails it."""
    results = compare_modes("mlp", batch_size=1, timing=Timing(repeat=8, number=200, warmup=20))
    by_name = {r.name: r.metrics for r in results}
    for mode in ("hybrid", "static"):
        assert by_name[mode]["verdict"] == "faster", by_name[mode]["verdict_text"]
        assert by_name[mode]["speedup_ci_low"] > 1.5


def test_train_mode_times_training_steps():
    results = compare_modes("lenet", batch_size=4, timing=Timing(repeat=1, number=2, warmup=1), train=True)
    assert {r.metrics["task"] for r in results} == {"train_step"}
    assert results[1].metrics["hybrid_forward_calls"] == 1


def test_export_round_trips(tmp_path):
    results = compare_modes("mlp", batch_size=3, timing=Timing(repeat=1, number=1), export_dir=str(tmp_path))
    export = results[-1]
    assert export.name == "export" and export.metrics["max_abs_diff"] <= 1e-5
    assert os.path.exists(tmp_path / "mlp-symbol.json") and os.path.exists(tmp_path / "mlp-0000.params")
    json.load(open(tmp_path / "mlp-symbol.json"))


def test_imported_block_gives_the_same_outputs(tmp_path):
    variants, x, _ = build_variants("lenet", mx.cpu(), 2)
    net = variants["hybrid"]
    expected = net(x).asnumpy()
    _, _, out = export_and_import(net, x, str(tmp_path), "lenet", mx.cpu())
    np.testing.assert_allclose(out.asnumpy(), expected, rtol=1e-5, atol=1e-6)


def test_models_by_name():
    names = list_models()
    assert {"mlp", "lenet", "resnet18", "resnet18_v1", "cifar_resnet20_v1"} <= set(names)
    assert not any(n.startswith(("ssd", "yolo")) for n in names)
    net = get_model("cifar_resnet20_v1", classes=10)
    net.initialize()
    assert net(mx.nd.ones((1,) + input_shape("cifar_resnet20_v1"))).shape == (1, 10)
    with pytest.raises(UserError, match="unknown model 'nope'"):
        get_model("nope")


def test_resnet18_is_the_28x28_variant():
    net = get_model("resnet18")
    net.initialize()
    stem = net[0]
    assert stem._kwargs["kernel"] == (3, 3) and stem._kwargs["stride"] == (1, 1)
    assert not any(type(b).__name__ == "MaxPool2D" for b in net)
    assert net(mx.nd.ones((2, 1, 28, 28))).shape == (2, 10)


@pytest.mark.parametrize("model", ["mlp", "lenet", "resnet18"])
def test_parameter_order_does_not_depend_on_layers_made_before(model):
    """gluon.Trainer sorts parameters by name and indexes optimizer states by that order;
    names built from a global layer counter (dense9 < dense10 as strings) would reorder
    them between a run and its resume."""
    def shapes():
        params = get_model(model).collect_params()
        return [params[k].shape for k in sorted(params.keys())]

    def dense_counter():
        return int(mx.gluon.nn.Dense(1).name[len("dense"):])
    first = shapes()
    target = 10 ** len(str(dense_counter()))
    while dense_counter() < target - 3:  # bare layers bring the counter near a power of ten (cheaply:
        pass                             # building ResNet-18 each time took 79 s of the suite)
    while dense_counter() <= target + 2:  # then models on both sides of it
        assert shapes() == first

"""The ResNet-18 variants compute the same function with the same parameter names."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd

from gluonperf.training.models import fusable, get_model, resnet18


def names(net):
    return sorted(k[len(net.prefix):] for k in net.collect_params().keys())


def test_variants_share_parameter_names():
    # checkpoints move between the book's F.relu, Activation and fused BatchNorm+ReLU
    book, plain, fused = resnet18(book_relu=True), resnet18(), resnet18(fuse=True)
    assert names(book) == names(plain) == names(fused)
    assert any("residual0_batchnorm1_" in n for n in names(fused))


def test_fusable_only_on_cpu_contexts_with_onednn(monkeypatch):
    assert fusable([mx.cpu(0), mx.cpu(1)]) == mx.runtime.Features().is_enabled("MKLDNN")
    assert not fusable([mx.gpu(0)]) and not fusable([mx.cpu(0), mx.gpu(0)])
    assert not fusable(None) and not fusable([])
    monkeypatch.setenv("MXNET_MKLDNN_ENABLED", "0")
    assert not fusable([mx.cpu(0)])


def ops(net):
    return net(mx.sym.var("data")).tojson()


def test_get_model_fuses_for_cpu_contexts_only():
    assert "_contrib_BatchNormWithReLU" not in ops(get_model("resnet18"))
    assert "_contrib_BatchNormWithReLU" not in ops(get_model("resnet18", contexts=[mx.gpu(0)]))
    fused = ops(get_model("resnet18", contexts=[mx.cpu(0)]))
    assert ("_contrib_BatchNormWithReLU" in fused) == fusable([mx.cpu(0)])
    if fusable([mx.cpu(0)]):  # every BatchNorm a ReLU follows: the first layer's and 8 blocks' first
        assert fused.count('"op": "_contrib_BatchNormWithReLU"') == 9
        assert fused.count('"op": "Activation"') == 8  # after each block's sum
    assert '"op": "relu"' not in fused and '"op": "relu"' in ops(resnet18(book_relu=True))


@pytest.mark.skipif(not mx.runtime.Features().is_enabled("MKLDNN"), reason="BatchNormReLU needs oneDNN")
@pytest.mark.parametrize("hybridize", [False, True])
def test_variants_compute_the_same_outputs_and_gradients(tmp_path, hybridize):
    x = mx.nd.array(np.random.RandomState(0).uniform(size=(4, 1, 28, 28)))
    path = str(tmp_path / "params")
    outs, grads = [], []
    for i, net in enumerate([resnet18(book_relu=True), resnet18(), get_model("resnet18", contexts=[mx.cpu()])]):
        if i == 0:
            net.initialize(mx.init.Xavier())
            net(x)
            net.save_parameters(path)
        else:
            net.load_parameters(path)  # fails if a name differs
        if hybridize:
            net.hybridize(static_alloc=True, static_shape=True)
        with autograd.record():  # training mode: batch statistics, as in training
            y = net(x)
        y.backward()
        outs.append(y.asnumpy())
        grads.append(net.collect_params()[net.prefix + "conv0_weight"].grad().asnumpy())
    for out, grad in zip(outs[1:], grads[1:]):
        np.testing.assert_allclose(out, outs[0], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(grad, grads[0], rtol=1e-3, atol=1e-6)

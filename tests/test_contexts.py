import mxnet as mx
import pytest

from gluonperf import UserError
from gluonperf.runtime.contexts import parse_contexts


@pytest.mark.parametrize("spec,expected", [
    ("cpu", [mx.cpu(0)]),
    ("cpu0", [mx.cpu(0)]),
    ("cpu:1", [mx.cpu(1)]),
    ("cpu0,cpu1", [mx.cpu(0), mx.cpu(1)]),
    (" CPU0 , cpu2 ", [mx.cpu(0), mx.cpu(2)]),
])
def test_accepts_cpu_contexts(spec, expected):
    assert parse_contexts(spec) == expected


@pytest.mark.parametrize("spec,expected", [
    ("gpu0,gpu1", [mx.gpu(0), mx.gpu(1)]),
    ("gpu:0", [mx.gpu(0)]),
    ("gpu", [mx.gpu(0), mx.gpu(1)]),
    ("gpu1", [mx.gpu(1)]),
])
def test_accepts_gpu_contexts_when_gpus_exist(spec, expected):
    assert parse_contexts(spec, gpus=2) == expected


@pytest.mark.parametrize("spec", ["", "tpu0", "cpu-1", "gpu0,,gpu1", "cpu0,cpu0", "0", "cpu 0", "gpu:x"])
def test_rejects_malformed(spec):
    with pytest.raises(UserError) as err:
        parse_contexts(spec, gpus=2)
    assert "\n" not in str(err.value)


def test_rejects_gpu_that_mxnet_does_not_see():
    with pytest.raises(UserError, match="gpu2 but MXNet sees 2 GPU"):
        parse_contexts("gpu0,gpu2", gpus=2)
    with pytest.raises(UserError, match=r"sees none.*\.\[gpu\]"):
        parse_contexts("gpu", gpus=0)

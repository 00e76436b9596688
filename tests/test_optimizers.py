import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluonperf import optimizers
from gluonperf.optimizers import AGGREGATION, SGD

SHAPES = [(16, 3, 3, 3), (16,), (1000,), (7, 5)]


def weights_after(cls, steps=4, grouped=True, **params):
    """Weights after `steps` updates of SHAPES' arrays with seeded gradients, through an
    Updater as gluon.Trainer drives it (one call with every index, or one per index)."""
    opt = cls(learning_rate=0.1, rescale_grad=1 / 64., **params)
    updater = mx.optimizer.get_updater(opt)
    rng = np.random.RandomState(0)
    ws = [nd.array(rng.randn(*s)) for s in SHAPES]
    for _ in range(steps):
        gs = [nd.array(rng.randn(*s)) for s in SHAPES]
        if grouped:
            updater(list(range(len(ws))), gs, ws)
        else:
            for i, (g, w) in enumerate(zip(gs, ws)):
                updater(i, g, w)
    return [w.asnumpy() for w in ws]


@pytest.mark.parametrize("params", [dict(momentum=0.9, wd=5e-4), dict(momentum=0.0, wd=1e-3),
                                    dict(momentum=0.9, wd=0.0, clip_gradient=0.5)])
@pytest.mark.parametrize("grouped", [True, False])
def test_the_per_array_update_equals_mxnets_sgd_to_the_bit(params, grouped, monkeypatch):
    monkeypatch.delenv(AGGREGATION, raising=False)
    calls = []
    for name in ("sgd_mom_update", "sgd_update"):
        real = getattr(nd, name)
        monkeypatch.setattr(nd, name, lambda *a, _real=real, **k: calls.append(name) or _real(*a, **k))
    ours = weights_after(SGD, grouped=grouped, **params)
    # with momentum, one operator per parameter and step: the per-array path ran; without, MXNet's
    assert len(calls) == (4 * len(SHAPES) if params["momentum"] else 0)
    theirs = weights_after(mx.optimizer.SGD, grouped=grouped, **params)
    assert all((a == b).all() for a, b in zip(ours, theirs))
    assert not all((a == b).all() for a, b in zip(ours, weights_after(SGD, steps=3, grouped=grouped, **params)))


def test_mxnets_multi_tensor_path_when_the_user_sets_the_aggregation_size(monkeypatch):
    monkeypatch.setenv(AGGREGATION, "4")
    calls = []
    real = nd.sgd_mom_update
    monkeypatch.setattr(nd, "sgd_mom_update", lambda *a, **k: calls.append(1) or real(*a, **k))
    ours = weights_after(SGD, momentum=0.9, wd=5e-4)
    assert calls == []
    assert all((a == b).all() for a, b in zip(ours, weights_after(mx.optimizer.SGD, momentum=0.9, wd=5e-4)))


def test_create_gives_the_named_optimizer_and_refuses_others():
    assert type(optimizers.create("sgd", learning_rate=0.1, momentum=0.9)) is SGD
    assert type(optimizers.create("nag", learning_rate=0.1, momentum=0.9)) is mx.optimizer.NAG
    assert type(optimizers.create("adam", beta1=0.8)) is mx.optimizer.Adam
    assert optimizers.create("adam", beta1=0.8).beta1 == 0.8
    assert optimizers.create("rmsprop", beta2=0.7).gamma1 == 0.7  # seed 004's gamma
    assert optimizers.create("adagrad", epsilon=1e-5).float_stable_eps == 1e-5
    with pytest.raises(ValueError, match="unknown optimizer 'lion'; choose from sgd, nag, adagrad, rmsprop, adam, adamw"):
        optimizers.create("lion")


def test_the_names_the_parsers_offer_are_those_the_code_runs():
    """The CLIs build their choices from gluonperf.config (no MXNet); each name must be one
    the working module knows, and every one it knows offered."""
    from gluonperf import config, data_parallel, footprint
    assert optimizers.NAMES == config.OPTIMIZERS
    assert list(data_parallel.SCHEDULES) == config.ALLREDUCE_METHODS == data_parallel.METHODS
    assert footprint.HYBRIDIZE == tuple(config.HYBRIDIZE)


def test_trainer_states_written_with_mxnets_sgd_load_and_update_per_array(tmp_path):
    """A checkpoint from before gluonperf had its SGD: the states load, the momentum is kept,
    and the optimizer becomes gluonperf's."""
    def trainer(optimizer):
        net = gluon.nn.Dense(3, in_units=4)
        net.initialize(mx.init.Constant(0.5))
        return net, gluon.Trainer(net.collect_params(), optimizer)

    net, old = trainer(mx.optimizer.SGD(learning_rate=0.1, momentum=0.9))
    with mx.autograd.record():
        loss = net(nd.ones((2, 4))).sum()
    loss.backward()
    old.step(2)
    old.save_states(str(tmp_path / "states"))
    _, new = trainer(SGD(learning_rate=0.1, momentum=0.9))
    new.load_states(str(tmp_path / "states"))
    assert type(new.optimizer) is mx.optimizer.SGD
    assert optimizers.upgrade(new.optimizer) is new.optimizer and type(new.optimizer) is SGD
    assert all(type(u.optimizer) is SGD for u in new._updaters)
    states = new._updaters[0].states
    assert states and all(np.abs(s.asnumpy()).sum() > 0 for s in states.values())
    nag = mx.optimizer.NAG(momentum=0.9)
    assert type(optimizers.upgrade(nag)) is mx.optimizer.NAG


def test_the_note_names_the_override_and_only_applies_to_sgd_with_momentum_on_cpu():
    line = optimizers.note("sgd", 0.9, [mx.cpu(0), mx.cpu(1)], environ={})
    assert line.startswith(AGGREGATION + " unset") and "sgd_mom_update" in line
    assert optimizers.note("sgd", 0.9, [mx.cpu(0)], environ={AGGREGATION: "4"}) is None
    assert optimizers.note("sgd", 0.0, [mx.cpu(0)], environ={}) is None
    assert optimizers.note("nag", 0.9, [mx.cpu(0)], environ={}) is None
    assert optimizers.note("sgd", 0.9, [mx.gpu(0)], environ={}) is None

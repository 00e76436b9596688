"""gluonperf.training.recompute: gradient checkpointing gives the plain step's gradients and statistics."""
import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon
from mxnet.gluon import nn

from gluonperf import UserError
from gluonperf.training.models import get_model, input_shape
from gluonperf.training.recompute import (check_segments, checkpointed, checkpointed_forward_backward, partition,
                                 segment_flags, segments, units)
from gluonperf.training.loop import HYBRIDIZE, TrainConfig, fit
from gluonperf.training.steps import forward_backward


def build(name, contexts, mode, batch=4, seed=0):
    """`name` initialised on `contexts` (parameters allocated imperatively), hybridized
    per `mode`, with a batch split over the contexts."""
    mx.random.seed(seed)
    net = get_model(name)
    net.initialize(mx.init.Xavier(), ctx=contexts)
    shape = input_shape(name)
    with autograd.pause():
        for ctx in contexts:
            net(mx.nd.zeros((1,) + shape, ctx=ctx))
    if HYBRIDIZE[mode] is not None:
        net.hybridize(**HYBRIDIZE[mode])
    rng = np.random.RandomState(seed)
    x = mx.nd.array(rng.uniform(size=(batch,) + shape))
    y = mx.nd.array(rng.randint(0, 10, size=batch))
    return net, gluon.utils.split_and_load(x, contexts), gluon.utils.split_and_load(y, contexts)


def state_of(net, contexts):
    params = net._collect_params_with_prefix()  # names by structure: equal for two instances
    grads = {k: [p.grad(c).asnumpy() for c in contexts] for k, p in params.items() if p.grad_req != "null"}
    stats = {k: [p.data(c).asnumpy() for c in contexts] for k, p in params.items() if p.grad_req == "null"}
    return grads, stats


def compare(name, contexts, mode, n):
    """Run a plain step and a checkpointed step from the same weights and statistics;
    return (largest relative gradient difference, largest statistics difference, how far
    the plain step moved the statistics, largest loss difference)."""
    net, xs, ys = build(name, contexts, mode)
    params = net._collect_params_with_prefix()
    start = {k: [p.data(c).copy() for c in contexts] for k, p in params.items()}
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def reset():
        for k, p in params.items():
            for c, value in zip(contexts, start[k]):
                value.copyto(p.data(c))

    _, plain_losses = forward_backward(net, loss_fn, xs, ys)
    plain_grads, plain_stats = state_of(net, contexts)
    reset()
    step = checkpointed(net, n, input_shape(name), HYBRIDIZE[mode])
    assert len(step.segments) == n
    _, losses = step(net, loss_fn, xs, ys)
    grads, stats = state_of(net, contexts)
    grad_diff = max(np.abs(a - b).max() / max(np.abs(a).max(), 1e-12)
                    for k in plain_grads for a, b in zip(plain_grads[k], grads[k]))
    stat_diff = max((np.abs(a - b).max() for k in plain_stats for a, b in zip(plain_stats[k], stats[k])), default=0.0)
    moved = max((np.abs(a - s.asnumpy()).max() for k in plain_stats for a, s in zip(plain_stats[k], start[k])),
                default=0.0)
    loss_diff = max(np.abs(a.asnumpy() - b.asnumpy()).max() for a, b in zip(plain_losses, losses))
    return grad_diff, stat_diff, moved, loss_diff


@pytest.mark.parametrize("mode", ["none", "hybrid", "static"])
def test_resnet18_checkpointed_gradients_and_batchnorm_statistics_equal_the_plain_step(mode):
    grad_diff, stat_diff, moved, loss_diff = compare("resnet18", [mx.cpu(0)], mode, 4)
    assert grad_diff <= 1e-5 and loss_diff <= 1e-5
    assert moved > 1e-3  # the plain step did update the running statistics ...
    assert stat_diff <= 1e-6  # ... and the checkpointed step updated them exactly as much (once)


def test_lenet_checkpointed_gradients_equal_the_plain_step():
    grad_diff, _, _, loss_diff = compare("lenet", [mx.cpu(0)], "static", 3)
    assert grad_diff <= 1e-5 and loss_diff <= 1e-5


def test_checkpointed_step_on_two_contexts():
    grad_diff, stat_diff, moved, loss_diff = compare("resnet18", [mx.cpu(0), mx.cpu(1)], "hybrid", 3)
    assert grad_diff <= 1e-5 and loss_diff <= 1e-5 and stat_diff <= 1e-6 and moved > 1e-3


def test_a_model_whose_initialisation_was_deferred():
    """The first checkpointed step initialises the model as a plain step would."""
    steps = []
    for n in (0, 3):
        mx.random.seed(1)
        net = get_model("resnet18")
        net.initialize(mx.init.Xavier())  # deferred: no shapes yet
        net.hybridize()
        x = mx.nd.array(np.random.RandomState(1).uniform(size=(4, 1, 28, 28)))
        y = mx.nd.array([1, 2, 3, 4])
        step = checkpointed(net, n, (1, 28, 28), {}) if n else forward_backward
        step(net, gluon.loss.SoftmaxCrossEntropyLoss(), [x], [y])
        steps.append(state_of(net, [mx.cpu()]))
    (plain_grads, plain_stats), (grads, stats) = steps
    for k in plain_grads:
        np.testing.assert_allclose(grads[k][0], plain_grads[k][0], rtol=0, atol=1e-5 * np.abs(plain_grads[k][0]).max())
    for k in plain_stats:
        np.testing.assert_allclose(stats[k][0], plain_stats[k][0], rtol=0, atol=1e-6)


def test_release_modes_give_the_same_gradients():
    net, xs, ys = build("lenet", [mx.cpu(0)], "hybrid")
    segs = segments(net, 3, input_shape("lenet"), {})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    grads = []
    for release in ("trim", "sync", "none"):
        checkpointed_forward_backward(segs, loss_fn, xs, ys, release=release)
        grads.append(state_of(net, [mx.cpu(0)])[0])
    for other in grads[1:]:
        for k in grads[0]:
            np.testing.assert_array_equal(grads[0][k][0], other[k][0])
    with pytest.raises(ValueError):
        checkpointed_forward_backward(segs, loss_fn, xs, ys, release="later")


def test_training_with_checkpoint_segments_follows_the_plain_loss_curve():
    config = dict(model="lenet", dataset="digits", limit=128, batch_size=32, epochs=1, lr=0.05, warmup_epochs=0,
                  workers=0, log_interval=0, hybridize="static")
    curves = []
    for n in (0, 3):
        curve = []
        fit(TrainConfig(checkpoint_segments=n, **config), [mx.cpu(0)],
            progress=lambda epoch, batch, batches, loss: curve.append(loss))
        curves.append(curve)
    assert len(curves[0]) == 4
    np.testing.assert_allclose(curves[0], curves[1], rtol=0, atol=1e-5)


# --- cutting models ------------------------------------------------------------------

def test_partition_minimises_the_largest_segment():
    assert partition([5, 1, 1, 1, 5], 3) == [0, 1, 4]
    assert partition([1, 1, 1, 1], 4) == [0, 1, 2, 3]
    assert partition([1, 2, 3], 1) == [0]
    starts = partition([50, 50, 50, 351, 351, 200, 175, 100, 88, 65, 57, 1, 1], 4)
    ends = starts[1:] + [13]
    costs = [50, 50, 50, 351, 351, 200, 175, 100, 88, 65, 57, 1, 1]
    assert max(sum(costs[a:b]) for a, b in zip(starts, ends)) == 501  # stem + first residual


def test_units_open_nested_sequentials_and_zoo_bodies():
    assert len(units(get_model("resnet18"))) == 13  # 3 stem layers, 8 residuals, pool, dense
    zoo = get_model("resnet18_v1")
    parts = check_segments(zoo, 4)
    assert parts[-1] is zoo.output
    segs = segments(zoo, 4, input_shape("resnet18_v1"), {"static_alloc": True, "static_shape": True})
    assert [len(s._children) for s in segs] and sum(len(s._children) for s in segs) == len(parts)
    assert segment_flags({"static_alloc": True, "static_shape": True}) == {}


class Doubling(nn.HybridBlock):
    """features, then something that is not a block, then output: not a chain of units."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential()
            self.features.add(nn.Dense(8), nn.Dense(8))
            self.output = nn.Dense(2)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x) * 2)


def test_models_that_are_not_a_chain_are_refused():
    with pytest.raises(UserError, match="cannot be cut"):
        check_segments(Doubling(), 2)
    with pytest.raises(UserError, match="neither a HybridSequential"):
        check_segments(nn.Dense(3), 1)
    with pytest.raises(UserError, match="at most 7"):
        check_segments(get_model("lenet"), 8)
    with pytest.raises(UserError, match="at least 1"):
        check_segments(get_model("lenet"), 0)


def test_dropout_only_in_the_last_segment():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(16), nn.Dropout(0.5), nn.Dense(16), nn.Dense(4))
    with pytest.raises(UserError, match="Dropout"):
        segments(net, 2, (8,))  # the cut falls after the dropout: it would be recomputed
    last = nn.HybridSequential()
    with last.name_scope():
        last.add(nn.Dense(16), nn.Dense(16), nn.Dropout(0.5), nn.Dense(4))
    assert len(segments(last, 2, (8,))) == 2


def test_the_train_command_refuses_too_many_segments(capsys, monkeypatch):
    from gluonperf.cli import common as cli
    from gluonperf import train
    with pytest.raises(SystemExit) as e:
        cli.run(train.main, train.PROG, ["--dataset", "digits", "--model", "lenet", "--limit", "64", "--epochs", "1",
                                         "--workers", "0", "--checkpoint-segments", "9"])
    err = capsys.readouterr().err
    lines = [l for l in err.strip().splitlines() if not l.startswith(("note: ", "warning: "))]
    assert e.value.code == 2 and len(lines) == 1 and "at most 7 checkpoint segments" in lines[0], err

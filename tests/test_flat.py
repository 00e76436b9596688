"""kvstore flat (gluonperf.training.flat.FlatTrainer): the same training as MXNet's device kvstore,
states that move between the two, and the command that uses it."""
import pickle

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon, nd

from gluonperf.training.flat import FlatTrainer, owners
from gluonperf.records import read_jsonl
from gluonperf.measure.operators import phase
from gluonperf.training.loop import HYBRIDIZE, TrainConfig
from gluonperf.training.steps import forward_backward
from gluonperf.training.trainers import build_net, make_trainer

TWO = [mx.cpu(0), mx.cpu(1)]
BATCH = 8


def test_owners_balance_the_elements():
    assert owners([5, 3, 3, 1], 2) == [0, 1, 1, 0]  # 6 elements each
    assert owners([4], 3) == [0]
    assert owners([], 2) == []


def trained(kvstore, optimizer="sgd", steps=3, contexts=TWO, segments=0):
    """ResNet-18 (BatchNorm, oneDNN convolutions), hybridized static as gluonperf.train runs
    it, seeded, trained `steps` steps on the same batch (cut into `segments` recomputed
    segments if given); returns (net, trainer)."""
    config = TrainConfig(model="resnet18", batch_size=BATCH, kvstore=kvstore, optimizer=optimizer)
    mx.random.seed(0)
    net = build_net(config, contexts)
    for ctx in contexts:  # finish deferred initialisation while the seed still holds
        net(nd.zeros((1, 1, 28, 28), ctx=ctx))
    trainer = make_trainer(net, config, 0.05, kvstore=kvstore)
    rng = np.random.RandomState(1)
    x = nd.array(rng.uniform(size=(BATCH, 1, 28, 28)))
    y = nd.array(rng.randint(0, 10, BATCH))
    xs, ys = gluon.utils.split_and_load(x, contexts), gluon.utils.split_and_load(y, contexts)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    step = forward_backward
    if segments:
        from gluonperf.training.recompute import checkpointed
        step = checkpointed(net, segments, (1, 28, 28), HYBRIDIZE["static"])
    for _ in range(steps):
        step(net, loss_fn, xs, ys)
        trainer.step(BATCH)
    return net, trainer


def weights(net, ctx):
    return {p.name[len(net.prefix):]: p.data(ctx).asnumpy() for p in net.collect_params().values()
            if p.grad_req != "null"}


@pytest.mark.parametrize("optimizer,atol", [("sgd", 1e-6), ("nag", 1e-3)])
def test_flat_trains_as_the_device_kvstore_does(optimizer, atol):
    """Same seed, same batches: the weights after three steps equal the device kvstore's
    (NAG's kernel rounds a little differently on differently aligned arrays), every
    context holds the same weights, and inference afterwards works on every context (flat
    weights crashed it: oneDNN reorders weight arrays in place)."""
    device, _ = trained("device", optimizer)
    flat, trainer = trained("flat", optimizer)
    assert isinstance(trainer, FlatTrainer)
    for ctx in TWO:
        want, got = weights(device, ctx), weights(flat, ctx)
        assert want.keys() == got.keys()
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=0, atol=atol, err_msg=name)
    mine, theirs = weights(flat, TWO[0]), weights(flat, TWO[1])
    assert all(np.array_equal(mine[n], theirs[n]) for n in mine)
    x = nd.array(np.random.RandomState(2).uniform(size=(4, 1, 28, 28)))
    for c in TWO:  # (BatchNorm's running statistics differ by context, so the outputs do a little)
        out = flat(x.as_in_context(c)).asnumpy()
        assert out.shape == (4, 10) and np.isfinite(out).all()


def test_flat_with_gradient_checkpointing_trains_as_the_device_kvstore_does():
    """The recomputed segments are blocks of their own: their gradients must reach the
    flat arrays too."""
    device, _ = trained("device", segments=2)
    flat, _ = trained("flat", segments=2)
    for ctx in TWO:
        want, got = weights(device, ctx), weights(flat, ctx)
        for name in want:
            np.testing.assert_allclose(got[name], want[name], rtol=0, atol=1e-6, err_msg=name)


def unpickled(path):
    with open(path, "rb") as f:
        return pickle.loads(f.read())


def test_states_are_the_device_kvstores_and_load_both_ways(tmp_path):
    """save_states writes what the device kvstore's Trainer writes (every parameter's
    momentum, the optimizer's step count); each trainer loads the other's and trains on
    as the other would."""
    _, dev_trainer = trained("device", steps=2)
    _, flat_trainer = trained("flat", steps=2)
    dev_path, flat_path = str(tmp_path / "device.states"), str(tmp_path / "flat.states")
    dev_trainer.save_states(dev_path)
    flat_trainer.save_states(flat_path)
    (dev_states, dev_opt), (flat_states, flat_opt) = unpickled(dev_path), unpickled(flat_path)
    assert dev_states.keys() == flat_states.keys() and len(dev_states) > 60
    for i in dev_states:
        assert flat_states[i].context == TWO[0]
        np.testing.assert_allclose(flat_states[i].asnumpy(), dev_states[i].asnumpy(), rtol=0, atol=1e-6)
    assert flat_opt.num_update == dev_opt.num_update == 2
    assert flat_opt._all_index_update_counts == dev_opt._all_index_update_counts  # per device, per index

    # a flat trainer resumes from the device kvstore's states, and the other way round
    _, fresh_flat = trained("flat", steps=1)
    fresh_flat.load_states(dev_path)
    assert fresh_flat.optimizer.num_update == 2
    _, fresh_device = trained("device", steps=1)
    fresh_device.load_states(flat_path)
    assert fresh_device.optimizer.num_update == 2


def test_a_stale_gradient_is_refused_or_skipped_as_trainer_does():
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, in_units=3), gluon.nn.Dense(2, in_units=3))  # the second is never used
    net.initialize(ctx=TWO)
    trainer = FlatTrainer(net, "sgd", {"learning_rate": 0.1})
    unused = net[1].weight.data(TWO[0]).asnumpy()
    used = net[0].weight.data(TWO[0]).asnumpy()

    def step(**kw):
        with mx.autograd.record():
            losses = [net[0](nd.ones((2, 3), ctx=c)).sum() for c in TWO]
        mx.autograd.backward(losses)
        trainer.step(4, **kw)
    with pytest.raises(UserWarning, match="has not been updated by backward"):
        step()
    step(ignore_stale_grad=True)
    for c in TWO:
        np.testing.assert_array_equal(net[1].weight.data(c).asnumpy(), unused)
        assert not np.allclose(net[0].weight.data(c).asnumpy(), used)


def test_a_block_is_required():
    net = gluon.nn.Dense(2)
    with pytest.raises(ValueError, match="Block"):
        FlatTrainer(net.collect_params(), "sgd")


def test_the_profile_counts_its_sums_as_communication():
    assert phase("_grad_add") == "comm"
    assert phase("_copyto") == "comm"
    assert phase("multi_sgd_mom_update") == "update"
    assert phase("elemwise_add") == "forward"


def test_flat_from_the_command_line_and_a_checkpoint_that_moves_to_device(run, tmp_path):
    """One epoch with --kvstore flat, resumed with --kvstore device, ends with the weights
    of two epochs on device."""
    ckpt, out, ref = tmp_path / "ckpt", tmp_path / "r.jsonl", tmp_path / "ref.jsonl"
    args = ["gluonperf.train", "--dataset", "digits", "--ctx", "cpu0,cpu1", "--model", "lenet", "--limit", "256",
            "--batch-size", "32", "--workers", "0"]
    p = run(*args, "--epochs", "1", "--kvstore", "flat", "--save", str(ckpt))
    assert p.returncode == 0, p.stderr
    p = run(*args, "--epochs", "2", "--kvstore", "device", "--resume", str(ckpt), "--json", str(out))
    assert p.returncode == 0, p.stderr
    p = run(*args, "--epochs", "2", "--kvstore", "device", "--json", str(ref))
    assert p.returncode == 0, p.stderr
    resumed, straight = [[r for r, _ in read_jsonl(str(path)) if r.bench == "train"] for path in (out, ref)]
    assert [r.name for r in resumed] == ["epoch 1", "epoch 2"]  # after the memory growth, bench growth
    assert resumed[0].metrics["kvstore"] == "flat"  # the history kept from the first run
    assert resumed[1].metrics["kvstore"] == "device"
    for a, b in zip(resumed, straight):
        assert a.metrics["loss"] == pytest.approx(b.metrics["loss"], rel=1e-6)
        assert a.metrics["param_checksum"] == pytest.approx(b.metrics["param_checksum"], rel=1e-6)

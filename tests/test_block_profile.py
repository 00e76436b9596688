"""gluonperf.measure.blocks (the Blocks table of python -m gluonperf.profile): on small
models written here, the rows name the model's own Blocks, count their parameters and FLOPs as
the rest of gluonperf does, and the times are consistent with their own samples. Nothing here
depends on how fast the machine is."""
import math
import statistics

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon
from mxnet.gluon import nn, rnn

from gluonperf.measure.blocks import MODEL, SUM, Loss, block_profile, parameter_count, walk, with_ceiling
from gluonperf.measure.timing import Timing
from gluonperf.measure.flops import count_flops
from gluonperf.records import read_jsonl

CTX = mx.cpu()
FAST = dict(timing=Timing(repeat=3, warmup=1))


class TwoBranches(nn.HybridBlock):
    """left(x) + right(x): a residual-like block with two child branches."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.left = nn.Dense(8, in_units=6)
        self.right = nn.HybridSequential()
        self.right.add(nn.Dense(5, in_units=6, activation="relu"), nn.Dense(8, in_units=5))

    def hybrid_forward(self, F, x):
        return self.left(x) + self.right(x)


class TwoInputs(nn.HybridBlock):
    """An image and a vector, each through its own layer, concatenated."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.image = nn.Conv2D(4, 3, in_channels=1)
        self.vector = nn.Dense(3, in_units=5)
        self.head = nn.Dense(2)

    def hybrid_forward(self, F, image, vector):
        return self.head(F.concat(F.flatten(self.image(image)), self.vector(vector), dim=1))


class SequenceClassifier(nn.HybridBlock):
    """Token ids (int32) -> Embedding -> LSTM (batch-major) -> last step -> Dense."""

    def __init__(self, vocab=30, **kwargs):
        super().__init__(**kwargs)
        self.embedding = nn.Embedding(vocab, 6)
        self.lstm = rnn.LSTM(7, layout="NTC", input_size=6)
        self.output = nn.Dense(3, in_units=7)

    def hybrid_forward(self, F, tokens):
        h = self.lstm(self.embedding(tokens))
        return self.output(F.squeeze(F.slice_axis(h, axis=1, begin=-1, end=None), axis=1))


class Branching(gluon.Block):
    """A plain Block with Python control flow on values: one of two layers runs."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.first = nn.Dense(4, in_units=3)
        self.taken = nn.Dense(2, in_units=4)
        self.never = nn.Dense(2, in_units=4)

    def forward(self, x):
        h = self.first(x)
        return self.taken(h) if h.abs().sum().asscalar() >= 0 else self.never(h)


class NotHybridizable(nn.HybridBlock):
    """A HybridBlock whose hybrid_forward reads a value: fine imperatively, fails hybridized."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = nn.Dense(3, in_units=4)

    def hybrid_forward(self, F, x):
        return self.dense(x) * (1.0 if x.sum().asscalar() > -1e9 else 2.0)


class Scaled(gluon.Block):
    """A child that only works while its parent has set its state."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.scale = None

    def forward(self, x):
        return x * self.scale


class WithState(gluon.Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.dense = nn.Dense(3, in_units=4)
        self.scaled = Scaled()

    def forward(self, x):
        self.scaled.scale = 2.0
        try:
            return self.scaled(self.dense(x))
        finally:
            self.scaled.scale = None


def _made(net, *inputs, hybridize=False):
    net.initialize(mx.init.Xavier(), ctx=CTX)
    if hybridize:
        net.hybridize()
    return net, [x.as_in_context(CTX) for x in inputs]


def _rows(records):
    return {r.name: r.metrics for r in records}


def _consistent(m, step):
    """A timed row's figures follow from its own samples and the step's."""
    f, fb = m["forward_samples_s"], m["forward_backward_samples_s"]
    assert len(f) == len(fb) == m["rounds"]
    assert m["forward_s"] == pytest.approx(statistics.median(f))
    assert m["backward_s"] == pytest.approx(statistics.median([b - a for a, b in zip(f, fb)]))
    assert m["forward_s_ci_low"] <= m["forward_s"] <= m["forward_s_ci_high"]
    assert m["forward_backward_s"] == pytest.approx(statistics.median(fb))
    assert m["step_share"] == pytest.approx(m["calls"] * m["forward_backward_s"] / step["forward_backward_s"])
    if m.get("training_gflop") is not None:
        assert m["gflop_per_s"] == pytest.approx(m["training_gflop"] / m["forward_backward_s"])


@pytest.mark.parametrize("hybridize", [False, True])
def test_two_branches_name_count_and_add_up(hybridize):
    batch = 4
    net, inputs = _made(TwoBranches(), mx.nd.random.uniform(shape=(batch, 6)), hybridize=hybridize)
    records = block_profile(net, inputs, CTX, depth=2, loss=Loss(gluon.loss.L2Loss(), mx.nd.zeros((batch, 8))),
                            peak_flops=1e9, **FAST)
    rows = _rows(records)
    assert [r.name for r in records] == [MODEL, "left", "right", "right.0", "right.1", SUM]
    assert rows["right.0"]["depth"] == 2 and rows["left"]["depth"] == 1 and rows[MODEL]["depth"] == 0
    assert rows["right"]["block"] == "HybridSequential" and rows["left"]["block"] == "Dense"
    assert rows["right.1"]["tree"] == "  right.1 (Dense)"
    assert rows[MODEL]["step_share"] == pytest.approx(1.0) and "timed as the step" in rows[MODEL]["note"]
    for name, block in (("left", net.left), ("right", net.right), ("right.0", net.right[0]), (MODEL, net)):
        m = rows[name]
        assert m["parameters"] == sum(int(np.prod(p.shape)) for p in block.collect_params().values())
        count = count_flops(block, (6,))
        assert m["forward_gflop"] == pytest.approx(count.forward * batch / 1e9)
        assert m["training_gflop"] == pytest.approx(count.training * batch / 1e9)
        assert m["hybridized"] is hybridize
        assert m["of_ceiling"] == pytest.approx(m["gflop_per_s"])  # peak 1 GFLOP/s
        _consistent(m, rows[MODEL])
    assert rows["left"]["parameters"] == 6 * 8 + 8
    # right.1 receives right.0's output (5 features): counted on that
    assert rows["right.1"]["forward_gflop"] == pytest.approx(count_flops(net.right[1], (5,)).forward * batch / 1e9)
    check = rows[SUM]
    assert check["blocks"] == 2 and check["verdict"] in ("within", "outside", "inconclusive")
    ratios = [(l + r) / s for l, r, s in zip(rows["left"]["forward_backward_samples_s"],
                                               rows["right"]["forward_backward_samples_s"],
                                               rows[MODEL]["forward_backward_samples_s"])]
    assert check["ratio_samples"] == pytest.approx(ratios)
    assert check["step_share"] == pytest.approx(math.exp(statistics.fmean(math.log(r) for r in ratios)))
    assert check["step_share_ci_low"] <= check["step_share"] <= check["step_share_ci_high"]
    assert "Blocks sum to %.0f%% of the step" % (100 * check["step_share"]) in check["finding"]
    assert all(r.metrics["caveat"] and r.metrics["rounds"] == 3 for r in records)


def test_depth_one_leaves_the_grandchildren_out():
    net, inputs = _made(TwoBranches(), mx.nd.ones((2, 6)))
    names = [r.name for r in block_profile(net, inputs, CTX, depth=1, **FAST)]
    assert names == [MODEL, "left", "right", SUM]


def test_a_block_with_nothing_to_differentiate_has_no_backward():
    """An activation on the model's own input (no gradient in the step) and without parameters."""
    net = nn.HybridSequential()
    net.add(nn.Activation("relu"), nn.Dense(2, in_units=3))
    net, inputs = _made(net, mx.nd.ones((2, 3)), hybridize=True)
    rows = _rows(block_profile(net, inputs, CTX, depth=1, **FAST))
    assert "no backward" in rows["0"]["note"] and rows["0"]["backward_s"] == 0
    assert rows["0"]["forward_backward_samples_s"] == rows["0"]["forward_samples_s"]
    assert "no backward" not in (rows["1"].get("note") or "")
    _consistent(rows["0"], rows[MODEL])


def test_two_inputs():
    batch = 3
    net, inputs = _made(TwoInputs(), mx.nd.ones((batch, 1, 6, 6)), mx.nd.ones((batch, 5)), hybridize=True)
    rows = _rows(block_profile(net, inputs, CTX, depth=1, loss=Loss(gluon.loss.SoftmaxCrossEntropyLoss(),
                                                                     mx.nd.array([0, 1, 0])), **FAST))
    assert set(rows) == {MODEL, "image", "vector", "head", SUM}
    assert rows[MODEL].get("forward_gflop") is None
    assert "2 inputs" in rows[MODEL]["flops_note"]
    assert rows["image"]["forward_gflop"] == pytest.approx(count_flops(net.image, (1, 6, 6)).forward * batch / 1e9)
    assert rows["head"]["parameters"] == (4 * 4 * 4 + 3) * 2 + 2
    for name in ("image", "vector", "head", MODEL):
        _consistent(rows[name], rows[MODEL])
    assert rows[SUM]["blocks"] == 3 and "step_share" in rows[SUM]


def test_embedding_and_lstm_on_token_ids():
    batch, length = 4, 5
    tokens = mx.nd.array(np.random.RandomState(0).randint(0, 30, size=(batch, length)), dtype="int32")
    net, inputs = _made(SequenceClassifier(), tokens, hybridize=True)
    records = block_profile(net, inputs, CTX, depth=1, loss=Loss(gluon.loss.SoftmaxCrossEntropyLoss(),
                                                                  mx.nd.array([0, 1, 2, 0])), **FAST)
    rows = _rows(records)
    assert [r.name for r in records] == [MODEL, "embedding", "lstm", "output", SUM]
    assert rows["embedding"]["parameters"] == 30 * 6
    assert rows["lstm"]["parameters"] == parameter_count(net.lstm) == 4 * 7 * (6 + 7) + 2 * 4 * 7
    # the Embedding's input is the model's (integer) input, yet it has weights: it has a backward
    assert "no backward" not in (rows["embedding"].get("note") or "")
    # no rule for the LSTM's operators: unknown, not 0, and no rate; the model's count is a lower bound
    assert rows["lstm"].get("training_gflop") is None and "gflop_per_s" not in rows["lstm"]
    assert rows["lstm"]["flops_note"].startswith("no FLOPs: no rule for") and "RNN" in rows["lstm"]["flops_note"]
    assert rows[MODEL]["training_gflop"] == pytest.approx(count_flops(net, (length,)).training * batch / 1e9)
    assert "not counted: " in rows[MODEL]["flops_note"] and "RNN" in rows[MODEL]["flops_note"]
    for name in ("embedding", "lstm", "output"):
        _consistent(rows[name], rows[MODEL])
    assert rows[SUM]["verdict"] in ("within", "outside", "inconclusive")


def test_a_plain_block_with_python_control_flow():
    net, inputs = _made(Branching(), mx.nd.ones((2, 3)))
    net.hybridize()  # the HybridBlock children hybridize; the Block itself stays imperative
    rows = _rows(block_profile(net, inputs, CTX, depth=1, **FAST))
    assert rows[MODEL]["flops_note"] == "no FLOPs: not a HybridBlock" and rows[MODEL]["hybridized"] is False
    assert rows["taken"]["hybridized"] is True
    assert rows["never"]["calls"] == 0 and rows["never"]["error"] == "not called in the model's forward"
    assert "forward_s" not in rows["never"]
    assert rows[SUM]["missing"] == "never" and "left out (not timed): never" in rows[SUM]["finding"]
    _consistent(rows["first"], rows[MODEL])


def test_a_model_that_fails_hybridized_is_measured_imperatively():
    net, inputs = _made(NotHybridizable(), mx.nd.ones((2, 4)), hybridize=True)
    records = block_profile(net, inputs, CTX, depth=1, **FAST)
    assert all("measured imperatively" in r.metrics["model_note"] for r in records)
    rows = _rows(records)
    assert rows[MODEL]["hybridized"] is False and rows["dense"]["forward_s"] > 0


def test_a_block_that_cannot_run_alone_gets_its_error_in_its_row():
    net, inputs = _made(WithState(), mx.nd.ones((2, 4)))
    rows = _rows(block_profile(net, inputs, CTX, depth=1, **FAST))
    assert "called alone" in rows["scaled"]["error"] and "forward_s" not in rows["scaled"]
    assert rows["dense"]["forward_s"] > 0 and rows[SUM]["missing"] == "scaled"


def test_walk_and_ceiling():
    net = TwoBranches()
    assert [(p, d) for p, d, _ in walk(net, 2)] == [("", 0), ("left", 1), ("right", 1), ("right.0", 2), ("right.1", 2)]
    assert [p for p, _, _ in walk(net, 3)] == ["", "left", "right", "right.0", "right.0.act", "right.1"]
    from gluonperf.records import result
    out = with_ceiling([result("blocks", "x", gflop_per_s=2.0), result("blocks", "y")], 4e9)
    assert out[0].metrics["of_ceiling"] == 0.5 and "of_ceiling" not in out[1].metrics


# --- the command, as users run it -----------------------------------------------------------

def test_profile_prints_and_writes_the_blocks(run, tmp_path):
    out = tmp_path / "p.jsonl"
    p = run("gluonperf.profile", "--model", "lenet", "--batch-size", "16", "--ceiling", "quick", "--steps", "2",
            "--warmup", "1", "--dataset", "digits", "--depth", "2", "--json", str(out), "--wide", timeout=240)
    assert p.returncode == 0, p.stderr
    text = p.stdout
    assert "Blocks [run 1" in text and "Blocks sum to" in text
    section = text[text.index("Blocks [run 1"):text.index("operators [run 2")]
    for name in ("(model) (HybridSequential)", "0 (Conv2D)", "  0.act (Activation)", "4 (Flatten)", "6 (Dense)",
                 SUM):
        assert name in section, name
    blocks = {r.name: r.metrics for r, _ in read_jsonl(str(out)) if r.bench == "blocks"}
    assert {MODEL, "0", "0.act", "1", "2", "3", "4", "5", "6", SUM} <= set(blocks)
    assert blocks["0"]["parameters"] == 1 * 20 * 9 + 20
    assert blocks["0"]["of_ceiling"] > 0 and blocks[SUM]["verdict"] in ("within", "outside", "inconclusive")


def test_depth_zero_leaves_the_table_out():
    from gluonperf.profile import build_parser
    assert build_parser().parse_args([]).depth == 2
    assert build_parser().parse_args(["--depth", "0"]).depth == 0

"""The graph lever: ReLU as the book writes it, as oneDNN's Activation, and fused into BatchNorm.

    python benchmarks/model_variants.py --batch-size 64 --rounds 7 --steps 4

The book's residual block writes `F.relu`; MXNet's `relu` operator has no oneDNN kernel,
so each call converts oneDNN's blocked layout to NCHW and back. gluonperf's ResNet-18
writes `Activation(act_type="relu")` (the same function, on oneDNN), and on CPU contexts
fuses each block's first BatchNorm with its ReLU (`nn.BatchNormReLU`). This times one
training step (forward, backward, sgd with momentum) of the three, hybridized static,
on copies of the same weights and one batch, interleaved in this process round by round
(`benchmark.measure_interleaved`), and reports each one's images/s and its per-round ratio
to the book's variant: the geometric mean of the per-round ratios with its 95% interval
and n, and a verdict (faster / slower / same within 5% / inconclusive; docs/suites.md).
`python -m gluonperf.profile` shows where the time moved.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import suite_stats  # noqa: E402  (benchmarks/, this script's folder)
from gluonperf.cli import common as cli  # noqa: E402

THREADS_NOTE = cli.thread_defaults([])  # OMP_NUM_THREADS = cores, as the commands set it, before MXNet loads

import mxnet as mx  # noqa: E402
import numpy as np  # noqa: E402
from mxnet import gluon  # noqa: E402

from gluonperf.measure.harness import environment, measure_interleaved  # noqa: E402
from gluonperf.training.models import resnet18  # noqa: E402
from gluonperf.records import format_table, result, write_jsonl  # noqa: E402
from gluonperf.config import HYBRIDIZE, TrainConfig  # noqa: E402
from gluonperf.training.steps import forward_backward  # noqa: E402
from gluonperf.training.trainers import make_trainer  # noqa: E402

VARIANTS = {  # name -> resnet18 keyword arguments
    "book (F.relu)": {"book_relu": True},
    "Activation(relu)": {},
    "Activation + BatchNormReLU fused (gluonperf's default on CPU)": {"fuse": True},
}


def interleaved(batch, steps, rounds, ctx):
    """{variant: Measurement of `steps` training steps}, interleaved in this process."""
    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.uniform(size=(batch, 1, 28, 28)), ctx=ctx)
    y = mx.nd.array(rng.randint(0, 10, size=batch), ctx=ctx)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    fns = {}
    for name, kwargs in VARIANTS.items():
        mx.random.seed(0)
        net = resnet18(10, **kwargs)
        net.initialize(mx.init.Xavier(), ctx=ctx)
        net.hybridize(**HYBRIDIZE["static"])
        trainer = make_trainer(net, TrainConfig(), 0.1, kvstore="device")

        def run(net=net, trainer=trainer):
            for _ in range(steps):
                forward_backward(net, loss_fn, [x], [y])
                trainer.step(batch)
        fns[name] = run
    return measure_interleaved(fns, warmup=1, repeat=rounds)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=cli.positive_int, default=64, help="(default: %(default)s)")
    p.add_argument("--steps", type=cli.positive_int, default=4, help="training steps per timed block "
                                                                      "(default: %(default)s)")
    p.add_argument("--rounds", type=cli.positive_int, default=7, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="write the records as JSON lines, with the environment")
    return p


def main():
    args = build_parser().parse_args()
    cli.check_output_path(args.json, "--json")
    if THREADS_NOTE:
        print("note: " + THREADS_NOTE, file=sys.stderr)
    ctx = mx.cpu()
    times = interleaved(args.batch_size, args.steps, args.rounds, ctx)
    book_name = "book (F.relu)"
    book = times[book_name].samples
    rows = []
    for name, m in times.items():
        ratios = [b / s for b, s in zip(book, m.samples)]  # time ratio = speed-up over the book's variant
        rows.append(result("model-variants", name, m, images_per_s=args.batch_size * args.steps / m.median,
                           batch_size=args.batch_size, round_ratios=ratios,
                           **suite_stats.ratio_fields(ratios, "ratio", name, book_name)))
    print(format_table(rows, ["name", "batch_size", "images_per_s"] + suite_stats.columns("ratio") + ["verdict"],
                       "ResNet-18 training step, hybridized static, %d interleaved rounds of %d steps: images/s "
                       "and speed-up over the book's F.relu (geometric mean of the per-round ratios, 95%% CI, n)"
                       % (args.rounds, args.steps)))
    for line in suite_stats.verdict_lines(rows):
        print("  " + line)
    if args.json:
        write_jsonl(rows, args.json, environment([ctx]))


if __name__ == "__main__":
    cli.run(lambda argv: main(), "benchmarks/model_variants.py")

"""gluonperf's hybridize modes against the book's plain benchmark, in one run.

    python benchmarks/hybridize_suite.py --json hybridize.json

The yardstick is the chapter's own experiment: `get_net()` (Dense 256 -> 128 -> 2
in a HybridSequential, not hybridized) called 1000 times on a (1, 512) input,
then `nd.waitall()`. It runs interleaved with gluonperf.experiments.hybridize's three copies
of the same net (same weights): imperative, hybridize(), and
hybridize(static_alloc=True, static_shape=True). A second configuration does the
same for ResNet-18 training steps at batch 64. Ratios are to the book's loop, repeat by
repeat (the repeats are interleaved): the geometric mean of the per-repeat ratios with its
95% interval and n, and a verdict (faster / slower / same within 5% / inconclusive;
docs/suites.md).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import gluonperf  # noqa: E402,F401  before MXNet: keeps scikit-learn out of MXNet's start-up (gluonperf/__init__.py)
import mxnet as mx  # noqa: E402
from mxnet import nd  # noqa: E402

import suite_stats  # noqa: E402  (benchmarks/, this script's folder)
from gluonperf.cli import common as cli  # noqa: E402
from gluonperf.measure.harness import measure_interleaved  # noqa: E402
from gluonperf.experiments.hybridize import _forward, _train_step, build_variants  # noqa: E402
from gluonperf.records import result  # noqa: E402


def book_benchmark(net, x, number):
    """The chapter's `benchmark(net, x)` loop body: `number` calls, no sync inside."""
    def run():
        for _ in range(number):
            _ = net(x)
    return run


def suite(model, batch_size, train, repeat, number, ctx=None):
    ctx = ctx or mx.cpu()
    variants, x, y = build_variants(model, ctx, batch_size)
    book_net = variants["imperative"].net  # the plain (not hybridized) block, same weights
    make = _train_step if train else (lambda net, x, y: _forward(net, x))
    fns = {"book loop": (_train_step(book_net, x, y) if train else book_benchmark(book_net, x, 1))}
    fns.update({"gluonperf " + mode: make(net, x, y) for mode, net in variants.items()})
    ms = measure_interleaved(fns, warmup=1, repeat=repeat, number=number)
    base = ms["book loop"].samples
    task = "train_step" if train else "forward"
    out = []
    for label, m in ms.items():
        ratios = [b / s for b, s in zip(base, m.samples)]  # the same repeat: > 1 is faster than the book
        out.append(result("hybridize_suite", label, m, model=model, task=task, batch_size=batch_size,
                          samples_per_s=batch_size / m.median, round_ratios=ratios,
                          **suite_stats.ratio_fields(ratios, "ratio", label, "book loop", what="repeats")))
    return out


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=cli.positive_int, default=5, help="interleaved repeats (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="fewer calls (for a smoke run)")
    p.add_argument("--model", choices=("mlp", "resnet18", "both"), default="both",
                   help="the chapter's MLP forward, ResNet-18 training steps at batch 64, or both "
                        "(default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON lines, with the environment")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.check_outputs(args)
    results = []
    if args.model in ("mlp", "both"):
        results += suite("mlp", 1, False, args.repeat, 100 if args.quick else 1000)
    if args.model in ("resnet18", "both"):
        results += suite("resnet18", 64, True, args.repeat, 1 if args.quick else 3)
    cli.emit(results, args, [mx.cpu()], title="hybridize: per-call time (median of %d interleaved repeats) and "
                                      "ratio to the book's loop (geometric mean of the per-repeat ratios, 95%% CI, "
                                      "n)" % args.repeat,
             columns=["name", "model", "task", "batch_size", "median_s", "iqr_s", "samples_per_s"]
             + suite_stats.columns("ratio") + ["verdict"])
    for r in results:
        if r.metrics.get("verdict_text"):
            print("  %s %s: %s" % (r.metrics["model"], r.metrics["task"], r.metrics["verdict_text"]))
    nd.waitall()


if __name__ == "__main__":
    cli.run(main, "benchmarks/hybridize_suite.py")

"""Gradient checkpointing on the book's ResNet-18: what it saves, what it costs, what fits.

Issue 14's target: at batch 128 with 4 segments, at least 30% less peak memory above
the model (parameters + gradients + optimizer states) than without, for at most 1.4x
the step time; and the largest batch that fits a 2 GiB budget with and without.

    python benchmarks/checkpointing.py --batch-size 128 --segments 4 --budget 2G --rounds 5

1. Memory (and the budget): `gluonperf.experiments.footprint.footprint`, one fresh process per run,
   for hybrid, static and hybrid with checkpointing (static with checkpointing runs as
   hybrid, see gluonperf.training.recompute), the same as
   `python -m gluonperf.bench footprint --model resnet18 --batch-sizes 128 --hybridize hybrid,static
   --checkpoint 0,4 --budget 2G`.
2. Time: the three steps in this one process, on the same weights and batch, timed
   interleaved round by round (`benchmark.measure_interleaved`), so a change of load
   hits all three alike; the time ratio is taken per round, and reported as the geometric
   mean with its 95% interval and n (time_ratio_ci_low, time_ratio_ci_high, time_ratio_n)
   and a verdict (slower / faster / same within 5% / inconclusive). The time target is
   met only when the whole interval is at or below it (docs/suites.md).

Prints both tables and whether the targets were met; --json writes every record (the memory
records as soon as they are measured, so a run stopped during timing keeps them).
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
from mxnet import autograd, gluon  # noqa: E402

from gluonperf.measure.harness import environment, measure_interleaved  # noqa: E402
from gluonperf.cli.units import size_bytes  # noqa: E402
from gluonperf.experiments.footprint import StepSettings, effective_configs, footprint  # noqa: E402
from gluonperf.training.models import get_model, input_shape  # noqa: E402
from gluonperf.training.recompute import checkpointed_forward_backward, segments  # noqa: E402
from gluonperf.records import format_table, result, write_jsonl  # noqa: E402
from gluonperf.config import HYBRIDIZE, TrainConfig  # noqa: E402
from gluonperf.training.steps import forward_backward  # noqa: E402
from gluonperf.training.trainers import make_trainer  # noqa: E402

MEMORY_TARGET, TIME_TARGET = 0.70, 1.40


def interleaved_times(model, batch, n, rounds, ctx):
    """{'hybrid', 'static', 'hybrid ckptN'} -> Measurement of one training step, timed
    interleaved in this process on copies of the same weights and one batch."""
    shape = input_shape(model)
    rng = np.random.RandomState(0)
    x = mx.nd.array(rng.uniform(size=(batch,) + shape), ctx=ctx)
    y = mx.nd.array(rng.randint(0, 10, size=batch), ctx=ctx)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    steps = {}
    for name in ("hybrid", "static", "hybrid ckpt%d" % n):
        mx.random.seed(0)
        net = get_model(model)
        net.initialize(mx.init.Xavier(), ctx=ctx)
        with autograd.pause():
            net(x[:1])
        trainer = make_trainer(net, TrainConfig(), 0.1, kvstore="device")
        if "ckpt" in name:
            segs = segments(net, n, shape, HYBRIDIZE["hybrid"])
            fb = (lambda segs: lambda net, *a: checkpointed_forward_backward(segs, *a))(segs)
        else:
            net.hybridize(**HYBRIDIZE[name])
            fb = forward_backward

        def step(net=net, trainer=trainer, fb=fb):
            fb(net, loss_fn, [x], [y])
            trainer.step(batch)
        steps[name] = step
    return measure_interleaved(steps, warmup=1, repeat=rounds)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18")
    p.add_argument("--batch-size", type=cli.positive_int, default=128)
    p.add_argument("--segments", type=cli.positive_int, default=4)
    p.add_argument("--budget", type=size_bytes, default=size_bytes("2G"))
    p.add_argument("--steps", type=cli.positive_int, default=5, help="timed steps per memory run")
    p.add_argument("--rounds", type=cli.positive_int, default=5, help="interleaved timing rounds")
    p.add_argument("--json", metavar="PATH")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.check_outputs(args)
    ctx = mx.cpu()
    if THREADS_NOTE:
        print("note: " + THREADS_NOTE, file=sys.stderr)
    n, name = args.segments, "hybrid ckpt%d" % args.segments

    memory = footprint(StepSettings(args.model, [ctx], steps=args.steps), [args.batch_size],
                       effective_configs(["hybrid", "static"], [0, n]), budgets=[args.budget],
                       progress=lambda: print(".", end="", file=sys.stderr, flush=True))
    print(file=sys.stderr)
    if args.json:  # the memory runs took most of the time: a run stopped during timing keeps them
        write_jsonl(memory, args.json, environment([ctx]))
    runs = {r.name: r.metrics for r in memory if r.bench == "footprint" and r.metrics["batch_size"] == args.batch_size}
    print(format_table([r for r in memory if r.bench == "footprint"],
                       ["name", "batch_size", "model_bytes", "peak_above_bytes", "bytes_per_sample", "needs_bytes",
                        "median_s", "images_per_s", "peak_vs_plain", "time_vs_plain", "error"],
                       "memory: one fresh process per run (times here are not interleaved)"))
    print()
    print(format_table([r for r in memory if r.bench == "footprint-budget"],
                       ["name", "budget_bytes", "predicted_batch", "largest_batch", "fits", "needs_bytes",
                        "images_per_s", "over_batch", "confirm_runs"], "largest batch that fits the budget"))

    times = interleaved_times(args.model, args.batch_size, n, args.rounds, ctx)
    timing = []
    for plain in ("hybrid", "static"):
        ratios = [c / p for c, p in zip(times[name].samples, times[plain].samples)]
        timing.append(result("checkpointing-time", "%s vs %s" % (name, plain), times[name],
                             plain_median_s=times[plain].median, round_ratios=ratios,
                             **suite_stats.ratio_fields(ratios, "time_ratio", name, plain,
                                                        words=("slower", "faster"))))
    print()
    print(format_table(timing, ["name", "median_s", "plain_median_s"] + suite_stats.columns("time_ratio")
                       + ["verdict"], "step time, interleaved in one process over %d rounds (per-round ratios: "
                       "geometric mean, 95%% CI, n)" % args.rounds))

    checks = []
    for plain, t in zip(("hybrid", "static"), timing):
        mem = runs[name]["peak_above_bytes"] / runs[plain]["peak_above_bytes"]
        time_target = suite_stats.against_limit(suite_stats.interval_of(t.metrics["round_ratios"]), TIME_TARGET)
        met = None if time_target == "inconclusive" and mem <= MEMORY_TARGET else (
            mem <= MEMORY_TARGET and time_target == "met")
        checks.append(result("checkpointing-target", "%s vs %s" % (name, plain), peak_ratio=mem,
                             **{k: t.metrics[k] for k in suite_stats.columns("time_ratio")},
                             time_target=time_target, met=met))
    print()
    print(format_table(checks, ["name", "peak_ratio"] + suite_stats.columns("time_ratio") + ["time_target", "met"],
                       "target: peak above the model <= %.2f x and step time <= %.2f x the plain step's (the time "
                       "target met when the whole 95%% CI is below it; met '-': inconclusive)"
                       % (MEMORY_TARGET, TIME_TARGET)))
    if args.json:
        write_jsonl(memory + timing + checks, args.json, environment([ctx]))


if __name__ == "__main__":
    cli.run(main, "benchmarks/checkpointing.py")

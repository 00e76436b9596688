"""The ceiling as a yardstick: this machine's peak FLOP/s, as training images/s of a model.

    python benchmarks/ceiling_probe.py --model resnet18

measures the ceiling `python -m gluonperf.profile` holds training against
(`ceiling.measure_ceiling`: the fastest of oneDNN's FullyConnected, OpenBLAS's dot and two
3x3 convolutions on cpu(0), with the OpenMP threads gluonperf's commands choose) and prints
one line (gluonperf's wire, runtime/wire.py): the peak over the model's training FLOPs per 1x28x28 image
(`models.count_model_flops`), i.e. the most images/s any training loop could reach here,
with the peak and its kernel beside it.

benchmarks/train_throughput.py runs it in every round between two runs of the book's loop,
like any other candidate, so that each run's share of the ceiling is a ratio within one
round rather than a figure divided by a ceiling measured at another moment: the speed of a
shared machine drifts (on the 2-core Intel Xeon, model 207, of 2026-11-24, gluonperf.train ran at 86
images/s in one round and 111 in the next).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gluonperf.cli import common as cli  # noqa: E402
from gluonperf.runtime import wire  # noqa: E402

PROG = "benchmarks/ceiling_probe.py"


def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18", help="whose training FLOPs per image (default: %(default)s)")
    p.add_argument("--size", choices=("full", "quick"), default="full",
                   help="ceiling kernels' size: full (as gluonperf.profile measures) or quick, for tests "
                        "(default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=5,
                   help="timed repeats per kernel; the fastest counts (default: %(default)s)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    from gluonperf.training.models import list_models
    if args.model not in list_models():
        raise cli.UserError("--model %r: unknown; python -m gluonperf.train --list-models shows the names"
                            % args.model)
    import mxnet as mx
    from gluonperf.measure.ceiling import ceiling_flops, measure_ceiling
    from gluonperf.training.models import count_model_flops
    from gluonperf.experiments.step_time import SAMPLE_SHAPE  # the shape gluonperf.profile counts FLOPs for
    ctx = mx.cpu(0)
    flops = count_model_flops(args.model, SAMPLE_SHAPE, contexts=[ctx])
    results = measure_ceiling(ctx, args.size, args.repeat)
    peak = ceiling_flops(results)
    top = next(r for r in results if r.metrics["ceiling"])
    print(wire.say({"images_per_s": peak / flops.training, "gflop_per_s": peak / 1e9,
                    "kernel": top.metrics["kernel"], "training_gflop_per_image": flops.training / 1e9,
                    "model": args.model, "omp_threads": top.metrics["omp_threads"]}), flush=True)


if __name__ == "__main__":
    NOTE = cli.thread_defaults(sys.argv[1:])  # before MXNet loads: the threads gluonperf.profile measures with
    if NOTE:
        cli.note_later("note: " + NOTE)  # dropped if the flags are refused, so that the error is one line
    cli.run(main, PROG)

"""python -m gluonperf.workers.allreduce: one rank of `bench allreduce --methods horovod`.

horovodrun starts one such process per context (`experiments.allreduce_bandwidth.horovod_allreduce`
plans the job); each times Horovod's allreduce of one float32 tensor per size
(`allreduce_rank.horovod_rank`, here), and rank 0 writes the timings as JSON to --out (or prints them
as one line). After each timed repeat rank 0 prints a progress line, which the bench reads.
The measuring is `allreduce_rank`'s; this module parses the flags and writes the file.

    horovodrun -np 2 -H localhost:2 --gloo python -m gluonperf.workers.allreduce --sizes 4096,4194304
"""
import argparse
import json
import sys

from ..cli.common import non_negative_int, positive_float, positive_int, run
from ..runtime.contexts import parse_contexts


def _sizes(text):
    try:
        sizes = [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a comma-separated list of byte counts" % text)
    if any(s < 4 for s in sizes):
        raise argparse.ArgumentTypeError("%r: every size must be at least one float32 (4 bytes)" % text)
    return sizes


def build_parser():
    p = argparse.ArgumentParser(prog="python -m gluonperf.workers.allreduce",
                                description="One rank of bench allreduce's horovod method (run under horovodrun): "
                                            "time hvd.allreduce_ (sum) of one float32 tensor per size; rank 0 "
                                            "writes the per-repeat times, the slowest rank's, as JSON.")
    p.add_argument("--ctx", default="cpu", help="one context, or one per process on this machine, e.g. cpu0,cpu1 "
                                                "(default: %(default)s)")
    p.add_argument("--sizes", type=_sizes, default=[4096], help="tensor sizes in bytes (default: 4096)")
    p.add_argument("--repeat", type=positive_int, default=7, help="timed repeats per size (default: %(default)s)")
    p.add_argument("--warmup", type=non_negative_int, default=1, help="untimed calls per size (default: %(default)s)")
    p.add_argument("--number", type=positive_int, default=None,
                   help="calls per repeat (default: enough for about --target-s per repeat)")
    p.add_argument("--target-s", type=positive_float, default=0.05,
                   help="seconds per repeat when --number is not given (default: %(default)s)")
    p.add_argument("--out", default=None, help="rank 0 writes the JSON here (default: one line on its stdout)")
    return p


def main(argv=None):
    from ..experiments.allreduce_bandwidth import PROGRESS
    from .allreduce_rank import horovod_rank
    args = build_parser().parse_args(argv)

    def progress():
        print(PROGRESS, flush=True)

    found = horovod_rank(parse_contexts(args.ctx), args.sizes, repeat=args.repeat, warmup=args.warmup,
                         number=args.number, target_s=args.target_s, progress=progress)
    if found is not None:
        text = json.dumps(found)
        if args.out:
            with open(args.out, "w") as f:
                f.write(text + "\n")
        else:
            print(text)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    run(main, "python -m gluonperf.workers.allreduce")

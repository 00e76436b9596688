"""python -m gluonperf.workers.steprate: the training images/s of one configuration, answered in one line.

tune's steprate worker (`--runner steprate`): each candidate setting runs in a fresh process,
since MXNet reads OMP_NUM_THREADS and MXNET_ENGINE_TYPE once, at start. The measuring is
`gluonperf.training.steprate`'s; this module parses the flags and answers over the wire
(runtime/wire.py: `say`, and `serve` with --serve).
"""
import argparse
import sys

from ..cli.common import non_negative_int, positive_int, run
from ..runtime import wire
from ..runtime.contexts import parse_contexts
from ..training.steprate import HYBRIDIZE, Setting, serve, session, step_rate

def build_parser():
    p = argparse.ArgumentParser(prog="python -m gluonperf.workers.steprate",
                                description="Print one line, the wire's answer: training images/s of one configuration "
                                            "(synthetic in-memory data, the book's loop).")
    p.add_argument("--model", default="resnet18", help="model name (default: %(default)s)")
    p.add_argument("--ctx", default="cpu", help="contexts, e.g. cpu or cpu0,cpu1 (default: %(default)s)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="global batch size (default: %(default)s)")
    p.add_argument("--hybridize", choices=sorted(HYBRIDIZE), default="none", help="(default: %(default)s)")
    p.add_argument("--kvstore", default="device", help="Trainer kvstore (default: %(default)s)")
    p.add_argument("--steps", type=positive_int, default=10, help="timed steps per repeat (default: %(default)s)")
    p.add_argument("--warmup", type=non_negative_int, default=2, help="untimed steps first (default: %(default)s)")
    p.add_argument("--per-step-sync", action="store_true",
                   help="read each step's loss back with asscalar() (a sync per step, as a loop that logs every step)")
    p.add_argument("--loader-workers", type=non_negative_int, default=None,
                   help="feed batches from a shuffled DataLoader with this many worker processes "
                        "(default: batches already in memory)")
    p.add_argument("--serve", action="store_true",
                   help="after warm-up, answer each request on stdin ({\"steps\": N}) with one line (used by tune)")
    p.add_argument("--repeat", type=positive_int, default=1, help="timed repeats; median reported (default: %(default)s)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    setting = Setting(args.model, tuple(parse_contexts(args.ctx)), args.batch_size, args.hybridize, args.kvstore,
                      args.per_step_sync, args.loader_workers)
    if args.serve:
        serve(session(setting, args.warmup), args.batch_size)
        return 0
    figures = step_rate(setting, args.steps, args.warmup, args.repeat)
    print(wire.say(figures))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    run(main, "python -m gluonperf.workers.steprate")

"""python -m gluonperf.workers.exchange: one rank of `predict --validate horovod`'s calibration.

horovodrun starts one such process per rank (`scaling.runs.horovod_exchange`
plans the job in a JSON file); each computes and then sums a model's gradient arrays with
Horovod, step after step (`exchange_rank.horovod_exchange_rank`), and rank 0 writes the
exchange's time and the background threads' CPU time per step as JSON to --out. The measuring
is `exchange_rank`'s; this module reads the plan and writes the file.

    horovodrun -np 2 -H localhost:2 --gloo python -m gluonperf.workers.exchange --plan P --out O
"""
import argparse
import json

from ..cli.common import run

PROG = "python -m gluonperf.workers.exchange"


def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description="One rank of predict --validate horovod's calibration "
                                "(run under horovodrun): compute, then sum the model's gradient arrays with "
                                "Horovod, step after step; rank 0 writes the timings as JSON.")
    p.add_argument("--plan", required=True,
                   help="JSON file: shapes (the gradient arrays), compute_s (CPU seconds of compute before each "
                        "exchange), steps, repeats")
    p.add_argument("--out", required=True, help="rank 0 writes the JSON here")
    return p


def main(argv=None):
    from .. import UserError
    from .exchange_rank import horovod_exchange_rank
    args = build_parser().parse_args(argv)
    try:
        with open(args.plan) as f:
            plan = json.load(f)
        shapes, compute_s = [tuple(s) for s in plan["shapes"]], float(plan["compute_s"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError("cannot read the plan %s: %s" % (args.plan, e))
    found = horovod_exchange_rank(shapes, compute_s, steps=int(plan.get("steps", 20)),
                                  repeats=int(plan.get("repeats", 5)))
    if found is not None:
        with open(args.out, "w") as f:
            json.dump(found, f)
            f.write("\n")
    return 0


if __name__ == "__main__":
    run(main, PROG)

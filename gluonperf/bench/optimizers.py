"""python -m gluonperf.bench optimizers: what an optimizer's update costs."""
from ..cli import common as cli
from . import shared

NAME = "optimizers"
QUICK = ["--optimizers", "sgd,adam", "--repeat", "2", "--steps", "2"]
RECORDS = ("optimizers",)
COLUMNS = ["name", "operator", "update_s", "share_of_step", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_n",
           "verdict", "state_bytes", "max_abs_diff", "noisy"]


def add_parser(sub, common):
    from ..config import UPDATE_OPTIMIZERS  # no MXNet: --help answers at once
    p = sub.add_parser(
        "optimizers", parents=[common],
        help="what an optimizer's update costs: from-scratch NDArray updates vs MXNet's fused operators",
        description="Per optimizer (sgd with momentum, adagrad, rmsprop, adam), on --model's parameters and "
                    "gradients on the first context of --ctx: the update's time per step and its share of a "
                    "training step (forward-backward + update), and the optimizer state's bytes, for the "
                    "from-scratch NDArray update of the book's optimization chapter, MXNet's fused "
                    "per-parameter operator and its multi-tensor operator where one exists, all timed in one "
                    "interleaved run with a forward-backward step; each against the from-scratch one with its "
                    "95% interval over the repeats. Before timing, "
                    "all implementations run a few updates from the same weights and must agree to float32 "
                    "tolerance (max_abs_diff). No weight decay, epsilon 1e-6 (the book's).")
    cli.add_model_flags(p, "lenet", help=cli.MODEL_HELP + "; the model whose parameters are updated")
    p.add_argument("--optimizers", default=",".join(UPDATE_OPTIMIZERS),
                   help="comma-separated, from %s (default: all)" % ",".join(UPDATE_OPTIMIZERS))
    p.add_argument("--batch-size", type=cli.positive_int, default=64,
                   help="batch of the forward-backward step the update's share is of (default: %(default)s)")
    p.add_argument("--repeat", type=cli.positive_int, default=10,
                   help="interleaved repeats; the intervals are over these (default: %(default)s)")
    p.add_argument("--steps", type=cli.positive_int, default=10,
                   help="updates (and steps) per timed repeat (default: %(default)s)")


def measure(args):
    """Check the flags, time the updates interleaved: (records: the step's first, the context, the
    model's ModelSpec)."""
    from .. import UserError
    from ..experiments.optimizer_cost import OPTIMIZERS, optimizer_cost
    ctxs = cli.contexts(args)
    names = [n.strip() for n in args.optimizers.split(",") if n.strip()]
    unknown = [n for n in names if n not in OPTIMIZERS]
    if unknown or not names:
        raise UserError("--optimizers %r: choose from %s, comma-separated" % (args.optimizers, ",".join(OPTIMIZERS)))
    spec = cli.resolve_model(args)  # a bad model fails here, in one line
    cli.check_outputs(args)
    ways = sum(3 if n in ("sgd", "adam") else 2 for n in names) + 1
    with cli.progress_bar(args.repeat * ways, "optimizers") as bar:
        results = optimizer_cost(spec, ctxs[0], args.batch_size, names, args.repeat, args.steps,
                                 progress=bar.update)
    return results, ctxs[:1], spec


def show(args, results, ctxs, spec):
    """The terminal's table of the updates (the step's time in its title)."""
    step = results[0].metrics
    cli.emit(results[1:], args, ctxs, columns=COLUMNS, records=results,
             title="optimizer updates on %s's %d parameters (%d bytes) on %s: median of %d interleaved repeats "
                   "of %d steps; forward-backward at batch %d: %.4g s; speedup over the from-scratch update "
                   "(95%% CI, n repeats)" % (spec.label, step["parameters"], step["param_bytes"], ctxs[0],
                                              args.repeat, args.steps, args.batch_size, step["median_s"]))
    shared.warn_noisy(results)


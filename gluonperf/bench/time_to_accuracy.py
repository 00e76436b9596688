"""python -m gluonperf.bench time-to-accuracy: time to a test accuracy per optimizer, over seeds."""
from ..cli import common as cli

NAME = "time-to-accuracy"
QUICK = ["--optimizers", "sgd,rmsprop", "--seeds", "1", "--epochs", "1", "--limit", "256", "--target-top1", "0.3"]
RECORDS = ("time-to-accuracy", "time-to-accuracy-run")
COLUMNS = ["name", "reached", "median_time_to_target_s", "median_epochs_to_target", "median_images_to_target",
           "median_best_test_top1", "speedup", "speedup_ci_low", "speedup_ci_high", "speedup_n", "verdict"]

TTA_FLAGS = ("model", "hybridize", "dataset", "data_dir", "limit", "batch_size", "epochs", "wd", "warmup_epochs",
             "lr_decay")


def add_parser(sub, common):
    from ..config import OPTIMIZERS
    from ..cli.training_flags import add_training_flags, fraction
    p = sub.add_parser(
        "time-to-accuracy", parents=[common],
        help="time to a test accuracy per optimizer, over seeds (DAWNBench's metric)",
        description="Train --model once per optimizer and seed, each at its own default learning rate, until "
                    "the test top-1 reaches --target-top1 (as python -m gluonperf.train --target-top1), seed by "
                    "seed with the optimizers in a rotating order. Per optimizer: how many seeds reached the "
                    "target, the median wall time, epochs and training images to it, and the time's ratio "
                    "against the first optimizer with its 95% interval over the seeds. An optimizer cheaper per "
                    "step (bench optimizers) can be slower to an accuracy.")
    add_training_flags(p, TTA_FLAGS, defaults={"model": "lenet", "dataset": "digits", "epochs": 10})
    p.add_argument("--optimizers", default=",".join(OPTIMIZERS),
                   help="comma-separated, the first is the ratios' baseline (default: %(default)s)")
    p.add_argument("--seeds", type=cli.positive_int, default=3,
                   help="seeds 0..N-1 of initialisation and data order per optimizer (default: %(default)s)")
    p.add_argument("--target-top1", type=fraction, default=0.9, metavar="X",
                   help="the test top-1 to reach (default: %(default)s)")


def _optimizers(args):
    return list(dict.fromkeys(n.strip() for n in args.optimizers.split(",") if n.strip()))


def measure(args):
    """Check the flags, train per optimizer and seed: (records, the contexts, the model's ModelSpec)."""
    from .. import UserError
    from ..config import OPTIMIZERS, TrainConfig
    from ..training.data import check_available, classes
    from ..experiments.time_to_accuracy import time_to_accuracy
    ctxs = cli.contexts(args)
    names = _optimizers(args)
    if not names or any(n not in OPTIMIZERS for n in names):
        raise UserError("--optimizers %r: choose from %s, comma-separated" % (args.optimizers, ",".join(OPTIMIZERS)))
    spec = cli.resolve_model(args, classes(args.dataset))  # a bad model fails here; the spec, parsed once
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the number of contexts (%d)" % (args.batch_size, len(ctxs)))
    check_available(args.dataset, args.data_dir)
    cli.check_outputs(args)
    flags = dict({f: getattr(args, f) for f in TTA_FLAGS}, model=spec)  # the ModelSpec, passed on
    config = TrainConfig(**flags, target_top1=args.target_top1, workers=0,
                         log_interval=0, kvstore="flat" if len(ctxs) > 1 else "device")
    with cli.progress_bar(len(names) * args.seeds, "time to accuracy") as bar:
        results = time_to_accuracy(config, ctxs, names, list(range(args.seeds)), progress=bar.update)
    return results, ctxs, spec


def show(args, results, ctxs, spec):
    """The terminal's table: one row per optimizer (each run goes to --json)."""
    summary = [r for r in results if r.bench == "time-to-accuracy"]
    cli.emit(summary, args, ctxs, columns=COLUMNS, records=results,
             title="time to test top-1 %g: %s on %s, batch %d on %s, up to %d epochs, %d seed(s) per optimizer at "
                   "its default learning rate; speedup: %s's time / this one's (95%% CI over the seeds)"
                   % (args.target_top1, spec.text, args.dataset, args.batch_size, ",".join(map(str, ctxs)),
                      args.epochs, args.seeds, _optimizers(args)[0]))


"""python -m gluonperf.train: data-parallel training with gluon.Trainer on several contexts.

Parses and checks the flags, calls `gluonperf.training.loop.fit` (or `scaling`), and
hands the per-epoch records to `gluonperf.cli.common.emit`. Nothing is computed here.
"""
import argparse
import sys

from . import UserError
from .cli import common as cli

# As a command, choose MXNet's thread count before MXNet is loaded (by `main`, once the flags are
# parsed: --help and a bad flag answer without loading it).
THREADS_NOTE = cli.thread_defaults(sys.argv[1:]) if __name__ == "__main__" else None
# and, for --dtype bfloat16, oneDNN's instruction set and the AMX permission (gluonperf.training.precision)
DTYPE_NOTE = cli.dtype_defaults(sys.argv[1:]) if __name__ == "__main__" else None

from .cli.config import (DATASETS, DEFAULT_LR, HYBRIDIZE, KVSTORES, LR_DECAYS, OPTIMIZER_FLAGS, OPTIMIZERS,  # noqa: E402
                     TrainConfig)
from .training.precision import DTYPES  # noqa: E402

PROG = "python -m gluonperf.train"

EPOCH_COLUMNS = ["epoch", "loss", "train_top1", "train_top5", "test_top1", "test_top5", "lr",
                 "epoch_s", "train_images_per_s"]
SCALING_COLUMNS = ["devices", "batch_size", "step_s", "iqr_s", "t1_s", "t2_s", "update_s",
                   "overlap_model_s", "serial_model_s", "images_per_s", "speedup", "speedup_ci_low",
                   "speedup_ci_high", "efficiency", "noisy"]


# The flags of a training configuration (TrainConfig fields), in the order --help shows
# them; other commands that run a training configuration (gluonperf.profile) add the
# ones they take with `add_training_flags`, so names, checks and help stay one.
TRAINING_FLAGS = ("model", "list_models", "hybridize", "dataset", "data_dir", "limit", "workers", "loader",
                  "bad_images", "batch_size",
                  "epochs", "lr", "lr_scale", "optimizer", "momentum", "wd", "beta1", "beta2", "epsilon",
                  "warmup_epochs", "lr_decay",
                  "kvstore", "seed", "log_interval", "dtype")


def dataset_name(text):
    """--dataset: a named set, or a path that exists (gluonperf.training.image_data checks what it holds)."""
    import os
    if text in DATASETS or os.path.exists(os.path.expanduser(text)):
        return text
    raise argparse.ArgumentTypeError("invalid choice: %r (choose from %s, or give the PATH of a folder of class "
                                     "subfolders or of a .rec file)" % (text, ", ".join(DATASETS)))


def add_training_flags(p, names=TRAINING_FLAGS, defaults=None):
    """Add the training-configuration flags `names` (in TRAINING_FLAGS order) to parser `p`;
    `defaults` overrides TrainConfig's default of some (e.g. {"dataset": "synthetic"})."""
    d = TrainConfig(**(defaults or {}))
    flags = {
        "model": lambda: p.add_argument(
            "--model", default=d.model,
            help="resnet18 (the book's 28x28 ResNet-18), lenet, mlp, or a GluonCV model-zoo name "
                 "(default: %(default)s; see --list-models)"),
        "list_models": lambda: p.add_argument(
            "--list-models", action="store_true", help="list the names --model accepts and exit"),
        "hybridize": lambda: p.add_argument(
            "--hybridize", choices=list(HYBRIDIZE), default=d.hybridize,
            help="none: imperative; hybrid: hybridize(); static: hybridize(static_alloc=True, "
                 "static_shape=True) (default: %(default)s)"),
        "dataset": lambda: p.add_argument(
            "--dataset", type=dataset_name, default=d.dataset, metavar="{%s} or PATH" % ",".join(DATASETS),
            help="fashion-mnist: the IDX files in --data-dir (downloaded when online); digits: "
                 "scikit-learn's handwritten digits resized to 28x28, works offline; synthetic: "
                 "random learnable images for throughput; or PATH: real images, a folder with one "
                 "subfolder per class (or train/ and val/ folders of them) or a .rec file with its .idx, "
                 "at the model's input size with GluonCV's ImageNet transforms (docs/input.md) "
                 "(default: %(default)s)"),
        "data_dir": lambda: p.add_argument(
            "--data-dir", metavar="DIR",
            help="where the Fashion-MNIST .gz files are (default: $MXNET_HOME/datasets/fashion-mnist)"),
        "limit": lambda: p.add_argument(
            "--limit", type=cli.positive_int, metavar="N",
            help="use only the first N training (and test) samples"),
        "workers": lambda: p.add_argument(
            "--workers", type=cli.non_negative_int, default=None,
            help="DataLoader worker threads (0: load in the main thread). Default: 0 when every "
                 "context is a CPU (loader threads would compete with MXNet's OpenMP threads for "
                 "the cores: 1.02-1.11x faster without them, docs/levers.md), %d with GPUs"
                 % d.workers),
        "loader": lambda: p.add_argument(
            "--loader", choices=("dataloader", "recorditer"), default=d.loader,
            help="image data (--dataset PATH): dataloader (gluon DataLoader, --workers processes decode and "
                 "augment) or recorditer (a .rec through MXNet's ImageRecordIter, --workers C++ threads) "
                 "(default: %(default)s)"),
        "bad_images": lambda: p.add_argument(
            "--bad-images", choices=("stop", "skip"), default=d.bad_images,
            help="image data: a corrupt image stops the run naming it (stop), or is skipped and counted "
                 "(skip; the next image takes its place) (default: %(default)s)"),
        "batch_size": lambda: p.add_argument(
            "--batch-size", type=cli.positive_int, default=d.batch_size,
            help="GLOBAL batch size, split over the contexts (per worker in dist runs; "
                 "default: %(default)s)"),
        "epochs": lambda: p.add_argument(
            "--epochs", type=cli.positive_int, default=d.epochs, help="epochs (default: %(default)s)"),
        "lr": lambda: p.add_argument(
            "--lr", type=cli.positive_float, default=d.lr,
            help="learning rate (default: the optimizer's: %s)"
                 % ", ".join("%g for %s" % (lr, name) for name, lr in DEFAULT_LR.items())),
        "lr_scale": lambda: p.add_argument(
            "--lr-scale", choices=["none", "linear"], default=d.lr_scale,
            help="linear: multiply --lr by the number of devices (x workers), as for a batch "
                 "that grows with them (default: %(default)s)"),
        "optimizer": lambda: p.add_argument(
            "--optimizer", choices=OPTIMIZERS, default=d.optimizer,
            help="sgd or nag (Nesterov), both with --momentum; adagrad, rmsprop, adam, adamw (decoupled "
                 "weight decay): MXNet's optimizers and fused update operators, as in seed 004 "
                 "(default: %(default)s)"),
        "momentum": lambda: p.add_argument(
            "--momentum", type=cli.momentum, default=None,
            help="momentum of sgd and nag (default: %g)" % d.momentum),
        "wd": lambda: p.add_argument(
            "--wd", type=cli.non_negative_float, default=d.wd, help="weight decay (default: %(default)s)"),
        "beta1": lambda: p.add_argument(
            "--beta1", type=cli.momentum, default=None,
            help="adam, adamw: decay of the gradient's running average (default: 0.9)"),
        "beta2": lambda: p.add_argument(
            "--beta2", type=cli.momentum, default=None,
            help="adam, adamw: decay of the squared gradient's running average (default: 0.999); rmsprop: "
                 "the same decay, seed 004's gamma (default: 0.9)"),
        "epsilon": lambda: p.add_argument(
            "--epsilon", type=cli.positive_float, default=None,
            help="adagrad, rmsprop, adam, adamw: added to the denominator for stability (default: MXNet's, "
                 "1e-7 for adagrad, 1e-8 for the others)"),
        "warmup_epochs": lambda: p.add_argument(
            "--warmup-epochs", type=cli.non_negative_int, default=d.warmup_epochs,
            help="epochs of linear learning-rate warm-up from 0 (default: %(default)s)"),
        "lr_decay": lambda: p.add_argument(
            "--lr-decay", choices=LR_DECAYS, default=d.lr_decay,
            help="after warm-up: cosine to 0, step (x0.1 at 50%% and 75%% of the epochs) or none "
                 "(default: %(default)s)"),
        "kvstore": lambda: p.add_argument(
            "--kvstore", choices=KVSTORES, default=None,
            help="how gradients are summed: device (MXNet's kvstore, on the devices), flat (gluonperf's: "
                 "each context sums its share of one flat gradient array and updates those weights "
                 "once), local (on the CPU), nccl (GPUs), dist_sync / dist_device_sync (across "
                 "machines, started by python -m gluonperf.launch) (default: flat on several CPU "
                 "contexts, where it was measured faster; device otherwise)"),
        "seed": lambda: p.add_argument(
            "--seed", type=cli.non_negative_int, default=d.seed,
            help="seed of initialisation and data order (default: %(default)s)"),
        "log_interval": lambda: p.add_argument(
            "--log-interval", type=cli.non_negative_int, default=d.log_interval,
            help="print a progress line every N batches on stderr (0: never; default: %(default)s)"),
        "dtype": lambda: p.add_argument(
            "--dtype", choices=DTYPES, default=d.dtype,
            help="bfloat16: mixed precision with MXNet's AMP, convolutions and dense layers in bfloat16 "
                 "(CPU contexts only; pays on CPUs with AMX, where gluonperf lets oneDNN use it; "
                 "weights and optimizer stay float32; default: %(default)s)"),
    }
    unknown = set(names) - set(flags)
    if unknown:
        raise ValueError("no training flag %s" % ", ".join(sorted(unknown)))
    for name in TRAINING_FLAGS:
        if name in names:
            flags[name]()
    return p


def build_parser():
    d = TrainConfig()
    p = argparse.ArgumentParser(
        prog=PROG, parents=[cli.common_parser()],
        description="Train a model on one or more contexts with gluon.Trainer (data parallelism: each "
                    "batch is split over the contexts, gradients are summed over the kvstore). Prints "
                    "one row per epoch: loss, train and test top-1/top-5 accuracy, epoch time and "
                    "training images/s (timed to a sync point, evaluation excluded).")
    add_training_flags(p)
    p.add_argument("--plot", metavar="PNG", help="plot test accuracy and throughput per epoch into PNG")
    p.add_argument("--save", metavar="DIR",
                   help="checkpoint (parameters, trainer states, epoch) into DIR after every epoch")
    p.add_argument("--resume", metavar="DIR",
                   help="continue the run checkpointed in DIR (and keep saving there unless --save)")
    p.add_argument("--checkpoint-segments", type=cli.non_negative_int, default=d.checkpoint_segments, metavar="N",
                   help="gradient checkpointing: cut the model into N segments, keep only their inputs in the "
                        "forward and recompute each segment's activations in the backward: less memory for "
                        "about one more forward pass (0: off; default: %(default)s). Segments are hybridized "
                        "without static_alloc. See python -m gluonperf.bench footprint")
    p.add_argument("--target-top1", type=_fraction, metavar="X",
                   help="time to accuracy: stop once the test top-1 reaches X (e.g. 0.9), and report the wall time, "
                        "epochs and training images it took, or that --epochs were not enough")
    p.add_argument("--scaling", action="store_true",
                   help="instead of training: time --steps steps on 1, 2, ... N of the contexts with the "
                        "same per-device batch (--batch-size / N); report speedup, efficiency and each "
                        "step split into compute t1 and communication t2")
    p.add_argument("--steps", type=cli.positive_int, default=d.steps,
                   help="timed steps per device count for --scaling (default: %(default)s)")
    return p


_fraction = cli._checked(float, "a number", lambda v: 0 < v <= 1, "must be above 0 and at most 1 (e.g. 0.9)")


def target_line(last):
    """The time-to-accuracy sentence of a run's last epoch record (train --target-top1)."""
    if last["target_reached"]:
        return ("target test top-1 %g reached at epoch %d (test top-1 %.4f): %.1f s wall time (training and "
                "evaluations), %d training images" % (last["target_top1"], last["epochs_to_target"],
                                                      last["test_top1"], last["time_to_target_s"],
                                                      last["images_to_target"]))
    return ("target test top-1 %g not reached in %d epoch(s): best test top-1 %.4f; train longer (--epochs) or "
            "change the settings" % (last["target_top1"], last["epoch"], last["best_test_top1"]))


def config_from(args, ctxs):
    from .cli.config import config_fields
    values = {name: getattr(args, name) for name in config_fields() if hasattr(args, name)}
    if values.get("momentum", 0) is None:  # --momentum not given: TrainConfig's (which checkpoints compare)
        del values["momentum"]
    if values["workers"] is None:
        values["workers"] = 0 if all(c.device_type == "cpu" for c in ctxs) else TrainConfig.workers
    return TrainConfig(**values)


KVSTORE_NOTE = ("note: --kvstore unset, so gluonperf sums the gradients of the %d CPU contexts with flat "
                "(each context sums and updates its share once; it trained faster than MXNet's device "
                "kvstore here, docs/levers.md); --kvstore device for MXNet's")


def check_kvstore(args, ctxs):
    """--kvstore left unset: flat on several CPU contexts (gluonperf.training.flat, measured faster
    there), device otherwise, said on stderr once the command's work starts; nccl refused
    off GPUs. For train and profile."""
    if args.kvstore is None:
        from .training.loop import default_kvstore
        args.kvstore = default_kvstore(ctxs)
        if args.kvstore == "flat":
            cli.note_later(KVSTORE_NOTE % len(ctxs))
    if args.kvstore == "nccl" and any(c.device_type != "gpu" for c in ctxs):
        raise UserError("--kvstore nccl sums gradients between GPUs only; with --ctx %s use flat, device or local"
                        % args.ctx)


def check_optimizer_flags(args):
    """Refuse --momentum, --beta1, --beta2 or --epsilon given to an optimizer that has no such
    hyper-parameter (it would be ignored without a word). For train and profile."""
    takes = OPTIMIZER_FLAGS[args.optimizer]
    for name in ("momentum", "beta1", "beta2", "epsilon"):
        if getattr(args, name, None) is not None and name not in takes:
            users = [o for o, flags in OPTIMIZER_FLAGS.items() if name in flags]
            raise UserError("--%s is a hyper-parameter of %s, not of --optimizer %s; drop it or choose one of those"
                            % (name, ", ".join(users), args.optimizer))


def note_optimizer(args, ctxs):
    """Say on stderr when SGD's update runs per parameter (gluonperf.training.optimizers). For train and profile."""
    from .training.optimizers import note
    line = note(args.optimizer, TrainConfig.momentum if args.momentum is None else args.momentum, ctxs)
    if line:
        cli.note_later("note: " + line)


def check(args, ctxs):
    """Refuse bad input before any long work starts."""
    from .training.models import get_model
    check_kvstore(args, ctxs)
    check_optimizer_flags(args)
    get_model(args.model)  # unknown names fail here
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the number of contexts (%d); every context "
                        "needs at least one sample per batch" % (args.batch_size, len(ctxs)))
    if args.checkpoint_segments:
        from .training.recompute import check_segments
        check_segments(get_model(args.model), args.checkpoint_segments)
        if args.scaling:
            raise UserError("--scaling times the plain step; drop --checkpoint-segments (bench footprint measures it)")
    if args.dtype == "bfloat16" and args.checkpoint_segments:  # flags that conflict on any machine: said first
        raise UserError("--checkpoint-segments does not work with --dtype bfloat16 (MXNet 1.9.1's AMP breaks "
                        "the recomputed segments' backward); use one or the other")
    from .training.precision import check_flag
    check_flag(args.dtype, ctxs)
    if not args.scaling and args.warmup_epochs > args.epochs:  # training.lr_schedule cuts it to the run
        cli.note("note: --warmup-epochs %d is longer than the run (%d epoch(s)): the warm-up takes the whole run "
                 "and reaches --lr %g only at its end" % (args.warmup_epochs, args.epochs,
                                                   config_from(args, ctxs).learning_rate))
    if args.kvstore.startswith("dist") and args.scaling:
        raise UserError("--scaling compares the contexts of one machine; use --kvstore flat, device or local")
    if args.scaling and args.target_top1 is not None:
        raise UserError("--target-top1 stops a training run; --scaling only times steps: use one or the other")
    cli.check_outputs(args)
    cli.check_output_path(args.plot, "--plot")
    cli.check_output_dir(args.save, "--save")
    from .training.data import check_available
    check_available(args.dataset, args.data_dir, args.model, args.loader)
    if args.resume:
        from .training.loop import check_resumable, read_checkpoint
        _, meta = read_checkpoint(args.resume)
        check_resumable(config_from(args, ctxs), meta, args.resume)


def plot(results, path):
    """Test top-1 accuracy and training images/s per epoch, one above the other."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    from .render.records import save_figure
    epochs = [r.metrics["epoch"] for r in results]
    fig, (acc, speed) = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
    acc.plot(epochs, [r.metrics["test_top1"] for r in results], "o-", label="test top-1")
    acc.plot(epochs, [r.metrics["train_top1"] for r in results], "s--", label="train top-1")
    acc.set_ylabel("accuracy")
    acc.legend()
    speed.plot(epochs, [r.metrics["train_images_per_s"] for r in results], "o-")
    speed.set_ylabel("training images/s")
    speed.set_xlabel("epoch")
    speed.xaxis.set_major_locator(MaxNLocator(integer=True))
    first = results[0].metrics
    fig.suptitle("%s on %s, %s" % (first["model"], first["dataset"], first["contexts"]))
    fig.tight_layout()
    save_figure(fig, path)


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if args.list_models:
        cli.print_models()
        return 0
    from .training.loop import fit, scaling
    ctxs = cli.contexts(args)
    check(args, ctxs)
    cli.advise(ctxs, THREADS_NOTE)
    note_optimizer(args, ctxs)
    from .training.precision import hint, label as precision_label
    for line in (DTYPE_NOTE if args.dtype == "bfloat16" else None, hint(args.dtype, ctxs)):
        if line:
            cli.note_later("note: " + line)
    if args.checkpoint_segments and args.hybridize == "static":
        cli.note_later("note: with --checkpoint-segments the model is hybridized without static_alloc/static_shape: "
                 "static buffers would keep every segment's recomputed activations allocated")
    config = config_from(args, ctxs)
    if args.scaling:
        with cli.progress_bar(len(ctxs) * args.steps, "scaling") as bar:
            results = scaling(config, ctxs, args.steps, progress=bar.update)
        cli.emit(results, args, ctxs, columns=SCALING_COLUMNS,
                 title="%s, %d images per device, %d steps per device count (kvstore %s): t1 compute, "
                       "t2 communication; a step costs ~max(t1,t2) when they overlap, t1+t2 when not"
                       % (args.model, results[0].metrics["per_device_batch"], args.steps, args.kvstore))
        return 0

    bar = cli.progress_bar(None, "train")

    def progress(epoch, batch, batches, loss):
        if bar.total != batches:
            bar.reset(total=batches)
        bar.set_description("epoch %d" % epoch)
        bar.set_postfix(loss="%.4f" % loss, refresh=False)
        bar.update(1)
        if batch == batches:
            bar.reset(total=batches)

    def log(message):
        if bar.disable:
            cli.note(message)
        else:
            bar.write(message, file=sys.stderr)
    def title(results):
        first = results[0].metrics
        return ("%s on %s, global batch %d on %s (%d worker%s), kvstore %s, hybridize %s"
                % (args.model, args.dataset, args.batch_size * first["num_workers"], first["contexts"],
                   first["num_workers"], "s" if first["num_workers"] > 1 else "", args.kvstore,
                   args.hybridize) + precision_label(args.dtype)
                + ("" if args.optimizer == "sgd" else ", optimizer %s" % args.optimizer))
    finished = []

    def epoch_done(results):
        finished[:] = results

    def stopped():  # a run stopped part-way keeps the epochs it finished (worker 0 writes them)
        return [r for r in finished if r.metrics["rank"] == 0]
    with bar, cli.keep_on_stop(stopped, args, lambda: title(finished), EPOCH_COLUMNS, ctxs,
                               also=(lambda records: plot(records, args.plot)) if args.plot else None):
        results = fit(config, ctxs, progress=progress, log=log, epoch_done=epoch_done)
    if results[0].metrics["rank"] != 0:  # in a dist run only worker 0 reports and writes files
        return 0
    cli.emit(results, args, ctxs, columns=EPOCH_COLUMNS, title=title(results))
    if args.target_top1 is not None:
        print(target_line(results[-1].metrics))
    if args.plot:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    cli.run(main, PROG)

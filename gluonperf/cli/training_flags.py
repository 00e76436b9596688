"""The training-configuration flags that train, profile and bench time-to-accuracy share.

`add_training_flags` adds them to a parser (names, types, defaults and help in one place);
`fraction` is the argparse type of --target-top1; `config_from` turns the parsed flags into a
`TrainConfig`; `check_kvstore`, `check_optimizer_flags` and `note_optimizer` check them and
say on stderr what was chosen for the user.
"""
import argparse

from .. import UserError
from . import common as cli
from ..config import DATASETS, DEFAULT_LR, HYBRIDIZE, KVSTORES, LR_DECAYS, OPTIMIZER_FLAGS, OPTIMIZERS, TrainConfig
from ..runtime.precision import DTYPES


# The flags of a training configuration (TrainConfig fields), in the order --help shows
# them; other commands that run a training configuration (gluonperf.profile) add the
# ones they take with `add_training_flags`, so names, checks and help stay one.
TRAINING_FLAGS = ("model", "list_models", "hybridize", "dataset", "data_dir", "limit", "workers", "loader",
                  "bad_images", "batch_size",
                  "epochs", "lr", "lr_scale", "optimizer", "momentum", "wd", "beta1", "beta2", "epsilon",
                  "warmup_epochs", "lr_decay",
                  "kvstore", "seed", "log_interval", "dtype")

# --target-top1 (train, bench time-to-accuracy): a test accuracy above 0 and at most 1
fraction = cli.checked(float, "a number", lambda v: 0 < v <= 1, "must be above 0 and at most 1 (e.g. 0.9)")


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
        "model": lambda: cli.add_model_flags(p, d.model),
        "list_models": lambda: p.add_argument(
            "--list-models", action="store_true", help="list the names --model accepts and exit"),
        "hybridize": lambda: p.add_argument(
            "--hybridize", choices=list(HYBRIDIZE), default=d.hybridize,
            help="none: imperative; hybrid: hybridize(); static: hybridize(static_alloc=True, "
                 "static_shape=True) (default: %(default)s)"),
        "dataset": lambda: p.add_argument(
            "--dataset", type=dataset_name, default=d.dataset, metavar="{%s} or PATH" % ",".join(DATASETS),
            help="fashion-mnist: the IDX files in --data-dir (downloaded when online); digits: "
                 "the UCI handwritten digits resized to 28x28, works offline; synthetic: "
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
                 "weight decay): the methods of the book's optimization chapter, with MXNet's optimizers "
                 "and fused update operators (default: %(default)s)"),
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
                 "the same decay, the book's gamma (default: 0.9)"),
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
                 "once), local (on the CPU), nccl (GPUs), dist_sync / dist_device_sync (MXNet's parameter "
                 "server, across processes and machines, started by python -m gluonperf.launch), horovod "
                 "(Horovod's allreduce, one process per device, started by horovodrun or "
                 "python -m gluonperf.launch --engine horovod) (default: flat on several CPU "
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


def config_from(args, ctxs, spec=None, kvstore=None):
    """The TrainConfig of the parsed flags, its model `spec` (the ModelSpec `cli.resolve_model`
    returned: passed on, not parsed again) and its kvstore `kvstore` (the one `check_kvstore`
    chose), each when given."""
    from ..config import config_fields
    values = {name: getattr(args, name) for name in config_fields() if hasattr(args, name)}
    if values.get("momentum", 0) is None:  # --momentum not given: TrainConfig's (which checkpoints compare)
        del values["momentum"]
    if values["workers"] is None:
        values["workers"] = 0 if all(c.device_type == "cpu" for c in ctxs) else TrainConfig.workers
    if spec is not None:
        values["model"] = spec
    if kvstore is not None:
        values["kvstore"] = kvstore
    return TrainConfig(**values)


KVSTORE_NOTE = ("note: --kvstore unset, so gluonperf sums the gradients of the %d CPU contexts with flat "
                "(each context sums and updates its share once; it trained faster than MXNet's device "
                "kvstore here, docs/levers.md); --kvstore device for MXNet's")


def check_kvstore(args, ctxs):
    """The kvstore the run uses: --kvstore, or when it is left unset flat on several CPU contexts
    (gluonperf.training.flat, measured faster there), device otherwise, said on stderr once the
    command's work starts; nccl refused off GPUs. For train and profile."""
    kvstore = args.kvstore
    if kvstore is None:
        from ..training.trainers import default_kvstore
        kvstore = default_kvstore(ctxs)
        if kvstore == "flat":
            cli.note_later(KVSTORE_NOTE % len(ctxs))
    if kvstore == "nccl" and any(c.device_type != "gpu" for c in ctxs):
        raise UserError("--kvstore nccl sums gradients between GPUs only; with --ctx %s use flat, device or local"
                        % args.ctx)
    return kvstore


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
    from ..training.optimizers import note
    line = note(args.optimizer, TrainConfig.momentum if args.momentum is None else args.momentum, ctxs)
    if line:
        cli.note_later("note: " + line)

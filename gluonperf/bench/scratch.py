"""python -m gluonperf.bench scratch: the book's LeNet trained data-parallel from scratch."""
from ..cli import common as cli

NAME = "scratch"
QUICK = ["--epochs", "1", "--limit", "512"]
RECORDS = ("scratch",)
TITLE = "Data parallelism from scratch"
COLUMNS = ["epoch", "time_s", "images_per_s", "train_loss", "test_acc"]


def add_parser(sub, common):
    from ..config import ALLREDUCE_METHODS, DATASETS
    p = sub.add_parser(
        "scratch", parents=[common],
        help="the book's LeNet trained data-parallel from scratch (get_params, allreduce, split_and_load)",
        description="Train the chapter's NDArray LeNet data-parallel over the contexts of --ctx with the "
                    "from-scratch helpers (get_params, split_and_load, allreduce, train_batch), by default on "
                    "synthetic Fashion-MNIST-shaped data (1x28x28, 10 classes, learnable class patterns plus "
                    "noise). Reports per-epoch training time (each batch ends in a sync, as in the book), images/s, "
                    "mean training loss and test accuracy (on the first context).")
    p.add_argument("--epochs", type=cli.positive_int, default=4, help="epochs (default: %(default)s)")
    p.add_argument("--batch-size", type=cli.positive_int, default=256,
                   help="global batch size, split over the contexts (default: %(default)s)")
    p.add_argument("--lr", type=float, default=0.2, help="SGD learning rate (default: %(default)s, as in the book)")
    p.add_argument("--method", default="book",
                   help="allreduce method: %s (default: %%(default)s)" % ", ".join(ALLREDUCE_METHODS))
    p.add_argument("--init-scale", type=float, default=0.1,
                   help="std of the normal initial weights (default: %(default)s; the book's 0.01 needs "
                        "hundreds of steps to leave chance level, more than the default data gives)")
    p.add_argument("--dataset", choices=list(DATASETS), default="synthetic",
                   help="synthetic (6000 train / 1000 test images), digits (UCI's, shipped, offline) or "
                        "fashion-mnist (IDX files in --data-dir) (default: %(default)s)")
    p.add_argument("--data-dir", metavar="DIR", help="where the Fashion-MNIST .gz files are")
    p.add_argument("--limit", type=cli.positive_int, metavar="N",
                   help="use only the first N training (and test) images")
    p.add_argument("--seed", type=cli.non_negative_int, default=0, help="seed for data and weights (default: %(default)s)")


def measure(args):
    """Check the flags, train: (records, the contexts, (training images, test images))."""
    import math
    from .. import UserError
    from ..training.data import load_dataset
    from ..experiments.from_scratch import check_method, init_params, loaders, train
    check_method(args.method)
    ctxs = cli.contexts(args)
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the %d contexts; each needs at least one sample"
                        % (args.batch_size, len(ctxs)))
    if not (args.lr > 0 and math.isfinite(args.lr)) or not (args.init_scale > 0 and math.isfinite(args.init_scale)):
        raise UserError("--lr and --init-scale must be positive numbers")
    cli.check_outputs(args)
    train_set, test_set = load_dataset(args.dataset, args.data_dir, args.limit, args.seed)
    if len(train_set) < args.batch_size:
        raise UserError("--batch-size %d is larger than the %d training images; lower it or raise --limit"
                        % (args.batch_size, len(train_set)))
    train_iter, test_iter = loaders(train_set, test_set, args.batch_size, len(ctxs), seed=args.seed)
    with cli.progress_bar(args.epochs * len(train_iter), "scratch") as bar:
        results = train(ctxs, train_iter, test_iter, epochs=args.epochs, lr=args.lr, method=args.method,
                        params=init_params(scale=args.init_scale, seed=args.seed), progress=bar.update)
    return results, ctxs, (len(train_set), len(test_set))


def show(args, results, ctxs, images):
    """The terminal's table."""
    cli.emit(results, args, ctxs,
             title="LeNet from scratch on %s, %s (%d train / %d test), batch %d, lr %g, allreduce %s"
                   % (",".join(map(str, ctxs)), args.dataset, images[0], images[1], args.batch_size,
                      args.lr, args.method),
             columns=COLUMNS)


def section(records):
    """The report's block: the epochs, test accuracy and images/s."""
    from ..render.figures import per_epoch
    from ..render.kinds import Block, Table
    m = records[-1].metrics
    return Block("the book's LeNet from scratch on %s, allreduce %s" % (m.get("contexts"), m.get("method")),
                 [Table(records, COLUMNS)],
                 per_epoch(records, [("test_acc", "o-")], "images_per_s", "images/s"),
                 "epoch %s: test accuracy %.3g, %.4g images/s" % (m["epoch"], m["test_acc"], m["images_per_s"]))

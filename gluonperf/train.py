"""python -m gluonperf.train: data-parallel training with gluon.Trainer on several contexts.

Parses and checks the flags, calls `gluonperf.training.loop.fit` (or
`gluonperf.training.device_scaling.scaling`), and hands the per-epoch records to
`gluonperf.cli.common.emit`. Nothing is computed here.
"""
import argparse
import sys

from . import UserError
from .cli import common as cli

# As a command, choose MXNet's thread count before MXNet is loaded (by `main`, once the flags are
# parsed: --help and a bad flag answer without loading it).
THREADS_NOTE = cli.thread_defaults(sys.argv[1:]) if __name__ == "__main__" else None
# and, for --dtype bfloat16, oneDNN's instruction set and the AMX permission (gluonperf.runtime.precision)
DTYPE_NOTE = cli.dtype_defaults(sys.argv[1:]) if __name__ == "__main__" else None

from .config import JOB_KVSTORES, TrainConfig  # noqa: E402
from .cli.training_flags import (add_training_flags, check_kvstore, check_optimizer_flags, config_from,  # noqa: E402
                                 fraction, note_optimizer)

PROG = "python -m gluonperf.train"

# in the order a person reads them: a table narrower than all of them leaves out the last first
EPOCH_COLUMNS = ["epoch", "loss", "train_top1", "test_top1", "epoch_s", "train_images_per_s", "train_top5", "test_top5",
                 "lr"]
SCALING_COLUMNS = ["devices", "batch_size", "step_s", "iqr_s", "t1_s", "t2_s", "update_s",
                   "overlap_model_s", "serial_model_s", "images_per_s", "speedup", "speedup_ci_low",
                   "speedup_ci_high", "efficiency", "noisy"]




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
    p.add_argument("--export", metavar="PREFIX",
                   help="after training, write the trained model as deployed: PREFIX-symbol.json and "
                        "PREFIX-0000.params, as HybridBlock.export names them (the hybridized graph, float32 "
                        "weights), checked by loading them back with SymbolBlock.imports; serve it with "
                        "python -m gluonperf.infer --model PREFIX-symbol.json")
    p.add_argument("--checkpoint-segments", type=cli.non_negative_int, default=d.checkpoint_segments, metavar="N",
                   help="gradient checkpointing: cut the model into N segments, keep only their inputs in the "
                        "forward and recompute each segment's activations in the backward: less memory for "
                        "about one more forward pass (0: off; default: %(default)s). Segments are hybridized "
                        "without static_alloc. See python -m gluonperf.bench footprint")
    p.add_argument("--target-top1", type=fraction, metavar="X",
                   help="time to accuracy: stop once the test top-1 reaches X (e.g. 0.9), and report the wall time, "
                        "epochs and training images it took, or that --epochs were not enough")
    p.add_argument("--scaling", action="store_true",
                   help="instead of training: time --steps steps on 1, 2, ... N of the contexts with the "
                        "same per-device batch (--batch-size / N); report speedup, efficiency and each "
                        "step split into compute t1 and communication t2")
    p.add_argument("--steps", type=cli.positive_int, default=d.steps,
                   help="timed steps per device count for --scaling (default: %(default)s)")
    return p


def target_line(last):
    """The time-to-accuracy sentence of a run's last epoch record (train --target-top1)."""
    if last["target_reached"]:
        return ("target test top-1 %g reached at epoch %d (test top-1 %.4f): %.1f s wall time (training and "
                "evaluations), %d training images" % (last["target_top1"], last["epochs_to_target"],
                                                      last["test_top1"], last["time_to_target_s"],
                                                      last["images_to_target"]))
    return ("target test top-1 %g not reached in %d epoch(s): best test top-1 %.4f; train longer (--epochs) or "
            "change the settings" % (last["target_top1"], last["epoch"], last["best_test_top1"]))


def check_flags(args):
    """Refuse bad input that the flags alone show, before MXNet loads (a second or two): at once."""
    check_optimizer_flags(args)
    cli.check_outputs(args)
    cli.check_output_path(args.plot, "--plot")
    cli.check_output_dir(args.save, "--save")


def check(args, ctxs):
    """Refuse bad input before any long work starts (after `check_flags`); the run's TrainConfig
    (its model the ModelSpec, its kvstore the one `check_kvstore` chose)."""
    from .training.models import get_model
    kvstore = check_kvstore(args, ctxs)
    from .training.data import classes
    spec = cli.resolve_model(args, classes(args.dataset))  # unknown names and models that do not run fail here
    config = config_from(args, ctxs, spec, kvstore)
    if args.batch_size < len(ctxs):
        raise UserError("--batch-size %d is smaller than the number of contexts (%d); every context "
                        "needs at least one sample per batch" % (args.batch_size, len(ctxs)))
    if args.checkpoint_segments:
        from .training.recompute import check_segments
        check_segments(get_model(spec), args.checkpoint_segments)
        if args.scaling:
            raise UserError("--scaling times the plain step; drop --checkpoint-segments (bench footprint measures it)")
    if args.dtype == "bfloat16" and args.checkpoint_segments:  # flags that conflict on any machine: said first
        raise UserError("--checkpoint-segments does not work with --dtype bfloat16 (MXNet 1.9.1's AMP breaks "
                        "the recomputed segments' backward); use one or the other")
    from .runtime.precision import check_flag
    check_flag(args.dtype, ctxs)
    if not args.scaling and args.warmup_epochs > args.epochs:  # training.lr_schedule cuts it to the run
        cli.note("note: --warmup-epochs %d is longer than the run (%d epoch(s)): the warm-up takes the whole run "
                 "and reaches --lr %g only at its end" % (args.warmup_epochs, args.epochs, config.learning_rate))
    if kvstore in JOB_KVSTORES and args.scaling:
        raise UserError("--scaling compares the contexts of one machine; use --kvstore flat, device or local")
    if args.scaling and args.target_top1 is not None:
        raise UserError("--target-top1 stops a training run; --scaling only times steps: use one or the other")
    check_export(args, spec)
    from .training.data import check_available
    check_available(args.dataset, args.data_dir, spec, args.loader)
    if args.resume:
        from .training.checkpoints import check_resumable, read_checkpoint
        _, meta = read_checkpoint(args.resume)
        check_resumable(config, meta, args.resume)
    return config


def check_export(args, spec):
    """--export: a model (`spec`) with a graph (one that hybridizes), files that can be written, a
    run that trains."""
    if args.export is None:
        return
    if args.scaling:
        raise UserError("--export writes the trained model; --scaling only times steps: use one or the other")
    if not spec.hybridizable:
        raise UserError("--export: --model %s cannot be hybridized (%s), so it has no graph to export"
                        % (spec.label, spec.why_not_hybrid))
    for suffix in ("-symbol.json", "-0000.params"):
        cli.check_output_path(args.export + suffix, "--export")


def exporter(args, spec, ctxs):
    """(the `trained` callback of `fit` that writes --export's files of the model `spec`, the list
    it appends export_trained's (symbol, params, largest difference) to)."""
    from .inference.exported import export_trained
    from .training.data import classes, sample_shape
    written = []

    def trained(net):
        try:  # under bfloat16 AMP the check compares float32 files with bfloat16 outputs
            written.append(export_trained(net, spec, classes(args.dataset),
                                          sample_shape(args.dataset, spec), ctxs[0], args.export,
                                          5e-2 if args.dtype == "bfloat16" else 1e-4))
        except ValueError as e:
            raise UserError("--export %s: %s" % (args.export, e)) from None
    return trained, written


def one_device(spec, ctxs):
    """With --kvstore horovod: this process's device (one process per device), and Horovod
    there to run it."""
    from .training import horovod
    horovod.load()
    try:
        return [horovod.device_of(ctxs)]
    except ValueError as e:
        raise UserError("--ctx %s: %s (e.g. horovodrun -np 2 ... --ctx gpu0,gpu1, or --ctx cpu)"
                        % (spec, e)) from None


def memory_of(ctxs):
    """What samples memory at every training step (measure.memory.StepMemory): resident memory,
    and each GPU context's."""
    from .measure.memory import StepMemory
    return StepMemory(ctxs)


def memory_growth(memory, config, results):
    """The records of memory over the run (measure.growth.records_of) of what `memory` (a
    measure.memory.StepMemory) sampled at every training step; its first epoch is the warm-up."""
    from .measure.growth import records_of
    return records_of(memory.plain(), memory.warmup, command="train", model=config.model.text,
                      batch_size=config.batch_size, contexts=results[0].metrics["contexts"])


def run_scaling(args, ctxs, config):
    """`train --scaling`: the fixed steps on 1, 2, ... N contexts and their table."""
    from .training.device_scaling import scaling
    with cli.progress_bar(len(ctxs) * args.steps, "scaling") as bar:
        results = scaling(config, ctxs, args.steps, progress=bar.update)
    cli.emit(results, args, ctxs, columns=SCALING_COLUMNS,
             title="%s, %d images per device, %d steps per device count (kvstore %s): t1 compute, "
                   "t2 communication; a step costs ~max(t1,t2) when they overlap, t1+t2 when not"
                   % (config.model.text, results[0].metrics["per_device_batch"], args.steps, config.kvstore))
    return 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if args.list_models:
        cli.print_models()
        return 0
    check_flags(args)
    from .training.loop import fit
    from .render.plots import plot_epochs
    ctxs = cli.contexts(args)
    if args.kvstore == "horovod":
        ctxs = one_device(args.ctx, ctxs)
    config = check(args, ctxs)
    cli.advise(ctxs, THREADS_NOTE)
    note_optimizer(args, ctxs)
    from .runtime.precision import hint, precision_label
    for line in (DTYPE_NOTE if args.dtype == "bfloat16" else None, hint(args.dtype, ctxs)):
        if line:
            cli.note_later("note: " + line)
    if args.checkpoint_segments and args.hybridize == "static":
        cli.note_later("note: with --checkpoint-segments the model is hybridized without static_alloc/static_shape: "
                 "static buffers would keep every segment's recomputed activations allocated")
    if args.scaling:
        return run_scaling(args, ctxs, config)

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
                % (config.model.label, args.dataset, args.batch_size * first["num_workers"], first["contexts"],
                   first["num_workers"], "s" if first["num_workers"] > 1 else "", config.kvstore,
                   args.hybridize) + precision_label(args.dtype)
                + ("" if args.optimizer == "sgd" else ", optimizer %s" % args.optimizer))
    finished = []

    def epoch_done(results):
        finished[:] = results

    def stopped():  # a run stopped part-way keeps the epochs it finished (worker 0 writes them)
        return [r for r in finished if r.metrics["rank"] == 0]
    trained, written = exporter(args, config.model, ctxs) if args.export else (None, [])
    memory = memory_of(ctxs)  # every step's memory, for the growth verdict (measure.growth)
    with bar, cli.keep_on_stop(stopped, args, lambda: title(finished), EPOCH_COLUMNS, ctxs,
                               also=(lambda records: plot_epochs(records, args.plot)) if args.plot else None):
        results = fit(config, ctxs, progress=progress, log=log, epoch_done=epoch_done, trained=trained,
                      memory=memory)
    if results[0].metrics["rank"] != 0:  # in a dist run only worker 0 reports and writes files
        return 0
    growth = memory_growth(memory, config, results)  # first in --json; its sentence under the table
    cli.emit(results, args, ctxs, columns=EPOCH_COLUMNS, title=title(results), records=growth + results)
    cli.note("\n".join(r.metrics["finding"] for r in growth))
    if args.target_top1 is not None:
        print(target_line(results[-1].metrics))
    if args.plot:
        plot_epochs(results, args.plot)
    for symbol, params, diff in written:
        print("exported %s and %s; SymbolBlock.imports gives the trained model's outputs (largest difference %.3g)"
              % (symbol, params, diff))
    return 0


if __name__ == "__main__":
    cli.run(main, PROG)

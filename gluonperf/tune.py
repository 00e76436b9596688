"""What settings make my model train fastest on this machine? What do I change in my script?

`python -m gluonperf.tune --model resnet18 --ctx cpu0,cpu1 --batch-sizes 64,128` sweeps the
levers one at a time, keeping the best of each (gluonperf.tuning's one coordinate search; the
runners and their levers: gluonperf.training.runners and gluonperf.training.levers).
`python -m gluonperf.tune [--levers ...] -- python train.py` does the same for a training
script, unmodified, and prints a recipe (the command's half: gluonperf.cli.tune_script).

This command only parses, checks, calls `tuning.model.tune` (or the script's half) and prints.
How it works: docs/commands/tune.md and docs/faster_script.md.
"""
import argparse
import sys
from dataclasses import dataclass

from . import UserError
from .cli.tune_flags import add_rounds, rounds_policy
from .training import levers as model_levers
from .training import runners
from .tuning import model as model_tune
from .tuning.schedule import Sweeps, machine_notes


def build_parser():
    from .cli import common as cli_common
    from .cli.common import positive_int
    p = argparse.ArgumentParser(
        prog="python -m gluonperf.tune",
        description="Find the settings (environment variables and flags) that train a model fastest "
                    "here: each lever tried in fresh processes, interleaved, scored as a ratio to the "
                    "best so far; prints a ranked table and the winning command line.")
    cli_common.add_model_flags(p, "resnet18")
    p.add_argument("--ctx", default="cpu", help="contexts to consider, e.g. cpu or cpu0,cpu1; with several, "
                                                "one context vs all of them (per --kvstore) is a lever "
                                                "(default: %(default)s)")
    p.add_argument("--batch-sizes", default="64", help="comma-separated global batch sizes, each tuned "
                                                       "separately (default: %(default)s)")
    p.add_argument("--steps", type=positive_int, default=10, help="timed training steps per run (default: %(default)s)")
    add_rounds(p, budget=600)
    from .cli.common import add_threshold
    add_threshold(p)
    p.add_argument("--kvstore", default=None, help="comma-separated kvstores to try with several contexts "
                                                   "(default: flat,device on CPU contexts, device otherwise)")
    p.add_argument("--levers", help="only these levers, comma-separated: threads,hybridize,data (DataLoader "
                                    "workers, train runner only),engine,onednn,allocator (jemalloc/tcmalloc "
                                    "through LD_PRELOAD, when installed; glibc's transparent huge pages, "
                                    "where the kernel leaves them to madvise),bulk (bulk execution),optimizer "
                                    "(MXNet's multi-tensor SGD update against gluonperf's per-parameter one),"
                                    "openmp (thread binding),contexts,dtype (bfloat16 mixed precision; train runner, "
                                    "CPUs with AMX or AVX512-BF16) (default: all)")
    p.add_argument("--dataset", default="synthetic", metavar="NAME or PATH",
                   help="what the train runner trains on: a named set (synthetic, digits, fashion-mnist) or real "
                        "images, a folder of class subfolders or a .rec with its .idx (gluonperf.train --dataset); "
                        "the data lever then tries DataLoader worker processes and, for a .rec, MXNet's "
                        "ImageRecordIter (default: %(default)s)")
    from .config import OPTIMIZERS
    p.add_argument("--optimizer", choices=OPTIMIZERS, default=None,
                   help="train every candidate with this optimizer, at its default hyper-parameters (train runner "
                        "only; default: train's, sgd)")
    p.add_argument("--runner", choices=("auto", "train", "steprate"), default="auto",
                   help="what runs a candidate: gluonperf.train --dataset synthetic, or the small "
                        "gluonperf.workers.steprate worker (default: train when it exists)")
    p.add_argument("--timeout", type=positive_int, default=900, help="seconds before one run is abandoned "
                                                                     "(default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON lines, with the environment")
    cli_common.add_wide(p)
    return p


@dataclass(frozen=True)
class Checked:
    """What `parse_args` made of the flags: the model's ModelSpec, what is tried (a
    `tuning.model.Space`), the runner (given the spec: its candidates' flags from the object), the
    rounds policy, and the levers of --levers that have nothing to try here (each with what it needs)."""
    spec: object
    space: model_tune.Space
    runner: object
    rounds: object
    idle: tuple = ()


def parse_args(argv):
    """The flags, and what they make (a `Checked`); bad input: UserError, one line."""
    args = build_parser().parse_args(argv)
    from .cli.common import check_output_path
    from .runtime.contexts import parse_contexts, describe
    contexts = tuple(describe(parse_contexts(args.ctx)).split(","))
    try:
        batch_sizes = tuple(int(b) for b in args.batch_sizes.split(","))
    except ValueError:
        raise UserError("--batch-sizes %r must be whole numbers, comma-separated, e.g. 64,128" % args.batch_sizes)
    if any(b < len(contexts) for b in batch_sizes):
        raise UserError("--batch-sizes must be at least the number of contexts (%d)" % len(contexts))
    kvstore = args.kvstore
    if kvstore is None:
        kvstore = "flat,device" if all(c.startswith("cpu") for c in contexts) else "device"
    kvstores = tuple(k.strip() for k in kvstore.split(",") if k.strip())
    known = ("flat", "device", "local", "nccl")
    if not kvstores or any(k not in known for k in kvstores):
        raise UserError("--kvstore %r: choose from %s, comma-separated" % (kvstore, ", ".join(known)))
    only = None
    if args.levers:
        only = tuple(l.strip() for l in args.levers.split(","))
        bad = [l for l in only if l not in model_levers.LEVER_NAMES]
        if bad:
            raise UserError("--levers %s: unknown lever(s) %s; choose from %s"
                            % (args.levers, ",".join(bad), ",".join(model_levers.LEVER_NAMES)))
    from .cli.common import resolve_model
    # unknown names and models that do not run fail here, in one line; the spec is parsed once, here
    spec = resolve_model(args)
    check_output_path(args.json, "--json")
    runner = {"auto": runners.default_runner(), "train": runners.TRAIN, "steprate": runners.STEPRATE}[args.runner]
    if runner is runners.TRAIN and not runners.train_available():
        raise UserError("--runner train needs gluonperf/train.py, which this checkout lacks; use --runner steprate")
    if args.dataset != "synthetic":
        if not runner.takes("dataset"):
            raise UserError("--dataset trains on data: it needs the train runner (--runner train), not steprate")
        from .training.data import check_available
        check_available(args.dataset, None, spec)  # one line for bad data, before any run
        runner = runner.on_dataset(args.dataset)
    if args.optimizer is not None and not runner.takes("optimizer"):
        raise UserError("--optimizer needs --runner train; the steprate worker trains with SGD only")
    space = model_tune.Space(contexts, batch_sizes, kvstores, only, args.optimizer)
    idle = ()
    if only:
        to_try = model_tune.levers_to_try(space, runner)
        idle = tuple("%s (needs %s)" % (l, model_levers.LEVER_NEEDS[l]) for l in only if l not in to_try)
        if not to_try:
            raise UserError("--levers %s: nothing to try here: %s" % (args.levers, "; ".join(idle)))
    # the runner for the spec: its candidates' flags from the object, not their text
    return args, Checked(spec, space, runner.for_model(spec), rounds_policy(args), idle)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" in argv:
        from .cli.tune_script import main as main_script
        return main_script(argv)
    return main_model(argv)


def main_model(argv=None):
    from .cli.common import advise, emit, guard_command, keep_on_stop, note, progress_bar
    from .tuning.search import Observers, Settings
    args, checked = parse_args(argv)
    space, runner = checked.space, checked.runner
    # each run is bounded by --timeout; the guard catches a hang of tune itself between runs
    guard_command(args, "python -m gluonperf.tune", stall_timeout=args.timeout + 120)
    advise(list(space.contexts), prefix="this shell's settings: ")
    total = model_tune.count_runs(space, runner, checked.rounds)
    for idle in checked.idle:
        note("note: --levers: nothing to try here for %s" % idle)
    note("tune: %s%d runs of %s, each in a fresh process" % ("at least " if args.rounds == "auto" else "", total,
                                                            runner.module))
    bar = progress_bar(total, "tune")
    title = "tune: %s on %s, images/s per candidate, ratio to the lever's baseline (geometric mean of %s " \
            "interleaved rounds; 95%% intervals held together over every candidate planned in every lever%s, so " \
            "that the winning settings hold it as a whole)" % (
                checked.spec.label, ",".join(space.contexts), "auto" if args.rounds == "auto" else args.rounds,
                " and the looks" if args.rounds == "auto" else "")
    columns = ["batch_size", "lever", "rank", "name", "images_per_s", "ratio", "ratio_ci_low", "ratio_ci_high",
               "rounds", "verdict", "error"]
    sweeps = Sweeps()
    try:
        with keep_on_stop(sweeps.results, args, title, columns):
            results = model_tune.tune(checked.spec, space, runner,
                                      Settings(checked.rounds, args.steps, args.timeout, args.threshold),
                                      Observers(progress=bar.update, sweeps=sweeps))
    finally:
        bar.close()
    table = [r for r in results if r.name != "best"]
    emit(table, args, title=title, columns=columns, records=results)  # the files also get the winners ('best')
    for line in machine_notes(table):
        note("note: " + line)
    failed = []
    for best in (r for r in results if r.name == "best"):
        m = best.metrics
        bases = [r.metrics for r in table if r.metrics.get("batch_size") in (m["batch_size"], None)
                 and r.metrics.get("verdict") == "baseline"]
        if bases and not any(b.get("images_per_s") for b in bases):
            failed.append(m["batch_size"])
            print("\nat batch %d no run of the baseline finished (%s): nothing was compared"
                  % (m["batch_size"], bases[0].get("error", "no figure")))
            continue
        if m["kept_levers"] and m["verdict"] == "not confirmed":
            print("\nbest at batch %d (kept: %s), %s" % (m["batch_size"], ", ".join(m["kept_levers"]),
                                                      m["verdict_text"]))
        elif m["kept_levers"]:
            print("\nbest at batch %d (kept: %s), confirmed against the defaults in one interleaved run: %s"
                  % (m["batch_size"], ", ".join(m["kept_levers"]), m["verdict_text"]))
        else:
            print("\nbest at batch %d: the defaults (no lever was faster than its baseline beyond the noise)"
                  % m["batch_size"])
        print("  " + m["command"])
        for w in m["warnings"]:
            print("  warning: " + w)
        for lever, why in m.get("unsettled", {}).items():
            print("  not settled: %s: %s" % (lever, why))
        for lever, why in m.get("unreached", {}).items():
            print("  not reached: %s: %s" % (lever, why))
    if failed:
        note("python -m gluonperf.tune: error: every baseline run failed at batch %s; see the table's error column"
             % ",".join(map(str, failed)))
        return 1
    return 0


if __name__ == "__main__":
    from .cli.common import run
    run(main, "python -m gluonperf.tune")

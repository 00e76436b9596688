"""What settings make my model train fastest on this machine? What do I change in my script?

`python -m gluonperf.tune --model resnet18 --ctx cpu0,cpu1 --batch-sizes 64,128`
sweeps the levers one at a time, keeping the best of each before trying the next
(coordinate search): threads, hybridize, the engine, oneDNN, the allocator, the contexts
and more, every candidate in a fresh process, interleaved with its lever's baseline and
scored by its images/s ratio to it (gluonperf.experiments.sweep, the engine).

`python -m gluonperf.tune [--levers ...] -- python train.py` does the same for a training script
gluonperf has never seen: the script, unmodified, run again and again, each run under one
candidate change (environment variables, or changes made from outside through the hooks of
`profile --`: hybridize the model, DataLoader workers, bfloat16 AMP), and prints a recipe:
what to change, where in the script, and how much faster it was here, with its interval
(gluonperf.experiments.script_tune).

This command only parses, checks, calls `sweep.tune` (or `script_tune`) and prints.
"""
import argparse
import sys

from . import UserError
from .experiments import sweep
from .measure import machine
from .training.model_spec import label


def _rounds(text):
    if text in ("auto", "exhaustive"):
        return text
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("%r is not a whole number of rounds (at least 1), auto or exhaustive" % text)
    return value


ROUNDS_HELP = ("interleaved rounds per lever: auto: each candidate until its verdict is settled (faster or slower "
               "beyond the noise, or unable to reach the smallest speed-up worth a change), at most %d rounds, "
               "with intervals that stay valid under that stopping (a group-sequential plan: docs/verdicts.md); "
               "exhaustive: at least 5 rounds, then until every candidate's 95%%%% interval is within +-5%%%% (at "
               "most 30; slow); or a number of rounds (default: %%(default)s)")


def rounds_policy(args):
    """The sweep's Rounds from --rounds and --budget."""
    if args.rounds == "auto":
        return sweep.Rounds(budget=args.budget)
    if args.rounds == "exhaustive":
        return sweep.Rounds(exhaustive=True)
    return sweep.Rounds(fixed=args.rounds)


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
    p.add_argument("--rounds", type=_rounds, default="auto", help=ROUNDS_HELP % sweep.Rounds().maximum)
    p.add_argument("--budget", type=positive_int, default=600, metavar="SEC",
                   help="with --rounds auto: seconds per lever after which no new round starts; a safety cap, "
                        "the intervals stay valid when it stops the rounds (default: %(default)s)")
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


def parse_args(argv):
    args = build_parser().parse_args(argv)
    from .cli.common import check_output_path
    from .runtime.contexts import parse_contexts, describe
    args.contexts = describe(parse_contexts(args.ctx)).split(",")
    try:
        args.batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        raise UserError("--batch-sizes %r must be whole numbers, comma-separated, e.g. 64,128" % args.batch_sizes)
    if any(b < len(args.contexts) for b in args.batch_sizes):
        raise UserError("--batch-sizes must be at least the number of contexts (%d)" % len(args.contexts))
    if args.kvstore is None:
        args.kvstore = "flat,device" if all(c.startswith("cpu") for c in args.contexts) else "device"
    args.kvstores = [k.strip() for k in args.kvstore.split(",") if k.strip()]
    known = ("flat", "device", "local", "nccl")
    if not args.kvstores or any(k not in known for k in args.kvstores):
        raise UserError("--kvstore %r: choose from %s, comma-separated" % (args.kvstore, ", ".join(known)))
    args.only = None
    if args.levers:
        args.only = [l.strip() for l in args.levers.split(",")]
        bad = [l for l in args.only if l not in sweep.LEVER_NAMES]
        if bad:
            raise UserError("--levers %s: unknown lever(s) %s; choose from %s"
                            % (args.levers, ",".join(bad), ",".join(sweep.LEVER_NAMES)))
    from .cli.common import resolve_model
    resolve_model(args)  # unknown names and models that do not run fail here, in one line
    check_output_path(args.json, "--json")
    runner = {"auto": sweep.default_runner(), "train": sweep.TRAIN, "steprate": sweep.STEPRATE}[args.runner]
    if runner is sweep.TRAIN and not sweep.train_available():
        raise UserError("--runner train needs gluonperf/train.py, which this checkout lacks; use --runner steprate")
    if args.dataset != "synthetic":
        if runner is not sweep.TRAIN:
            raise UserError("--dataset trains on data: it needs the train runner (--runner train), not steprate")
        from .training.data import check_available
        check_available(args.dataset, None, args.model)  # one line for bad data, before any run
        runner = sweep.Runner(sweep.TRAIN.module, ("--dataset", args.dataset) + sweep.TRAIN.fixed[2:],
                              sweep.TRAIN.steps_flag)
    args.runner_obj = runner
    if args.optimizer is not None and runner.module != sweep.TRAIN.module:
        raise UserError("--optimizer needs --runner train; the steprate worker trains with SGD only")
    args.rounds_policy = rounds_policy(args)
    if args.only:
        to_try = sweep.levers_to_try(args.contexts, args.batch_sizes, args.kvstores, args.only, runner,
                                     args.optimizer)
        idle = ["%s (needs %s)" % (l, sweep.LEVER_NEEDS[l]) for l in args.only if l not in to_try]
        if not to_try:
            raise UserError("--levers %s: nothing to try here: %s" % (args.levers, "; ".join(idle)))
        args.idle_levers = idle
    return args


SCRIPT_USAGE = ("%(prog)s [--levers L,...|all] [--rounds auto|exhaustive|N] [--steps N] [--warmup K] [--json PATH] "
                "-- COMMAND...")


def build_script_parser():
    from .cli import common as cli_common
    from .experiments import script_tune
    p = argparse.ArgumentParser(
        prog="python -m gluonperf.tune", usage=SCRIPT_USAGE,
        description="What to change in a training script, measured on it: the unmodified command (python train.py "
                    "ARGS) is run once as it is (a probe: its Trainer, model, DataLoaders, waits for the engine and "
                    "for data, and its operators), then again and again under each candidate change, interleaved "
                    "with runs as it is; each run is a fresh process stopped after its timed steps (Trainer.step "
                    "calls). Each candidate runs until its verdict is settled. Prints each candidate's speed against "
                    "the script as it is (a ratio with its interval and verdict) and a recipe: what to change, where "
                    "in the script, how much faster; only changes judged faster are in it.")
    p.add_argument("--levers", help="only these levers, comma-separated, tried even where the probe's bound says "
                                    "they cannot pay: %s; or all (default: every lever that can change something "
                                    "in this script here and whose best case reaches the threshold)"
                                    % ",".join(script_tune.LEVER_NAMES))
    p.add_argument("--steps", type=cli_common.positive_int, default=20,
                   help="timed steps per run, after --warmup (default: %(default)s)")
    p.add_argument("--min-time", type=cli_common.positive_float, default=1.0, metavar="SEC",
                   help="the probe times at least --steps steps, SEC seconds and as long as the script took to start "
                        "(importing MXNet, building its data), so that a run measures at least as long as it starts; "
                        "every run after it times as many steps (default: %(default)s)")
    p.add_argument("--warmup", type=cli_common.positive_int, default=5,
                   help="steps run before the timed ones in every run, at least 2: a change to the model is made "
                        "in the second (default: %(default)s)")
    p.add_argument("--rounds", type=_rounds, default="auto", help=ROUNDS_HELP % sweep.Rounds().maximum)
    p.add_argument("--budget", type=cli_common.positive_int, default=300, metavar="SEC",
                   help="with --rounds auto: seconds per lever after which no new round starts; a safety cap, the "
                        "intervals stay valid when it stops the rounds (default: %(default)s)")
    cli_common.add_threshold(p)
    p.add_argument("--timeout", type=cli_common.positive_int, default=600,
                   help="seconds before one run of the script is abandoned (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the results and the recipe as JSON lines")
    p.add_argument("--csv", metavar="PATH", help="also write the results and the recipe as CSV")
    cli_common.add_wide(p)
    return p


def _script_levers(text):
    """--levers: (the levers named, whether the probe's bounds apply), or UserError."""
    from .experiments import script_tune
    if not text:
        return None, True
    only = [l.strip() for l in text.split(",") if l.strip()]
    if only == ["all"]:
        return list(script_tune.LEVER_NAMES), False
    bad = [l for l in only if l not in script_tune.LEVER_NAMES]
    if bad or not only:
        raise UserError("--levers %s: unknown lever(s) %s; choose from %s, or all"
                        % (text, ",".join(bad), ",".join(script_tune.LEVER_NAMES)))
    return only, False


def _probe(args, command, what):
    """The probe's run of the script: (runner, its records), or the script's own exit status when it
    failed as it is; UserError when it cannot be tuned."""
    from .cli.common import say
    from .experiments import script_tune
    runner, found, done, error = script_tune.probe(command, args.warmup, args.steps, args.timeout,
                                                   min_seconds=args.min_time, window="startup")
    if not error:
        return runner, found
    if done is not None and done.returncode != 0 and "rate" not in found:  # the script's own failure
        sys.stderr.write(done.stderr)
        say("python -m gluonperf.tune: the script failed as it is (%s); nothing was tuned" % error)
        return None, done.returncode
    if not found or found.get("exit", {}).get("steps_seen") == 0:
        raise UserError("`%s` never called gluon.Trainer.step: tune counts a script's steps there, so it needs a "
                        "script that trains with a gluon.Trainer" % what)
    raise UserError("`%s`: %s; give the script more steps, or lower --warmup/--steps" % (what, error))


def main_script(argv):
    """`tune -- COMMAND`: the levers tried on the user's script, and the recipe."""
    import os
    import shutil
    import time
    from .cli.common import check_outputs, emit, guard_command, keep_on_stop, note, write_outputs
    from .cli.profile_script import shown, split_argv
    from .experiments import script_tune
    from .runtime.threads import physical_cores
    began = time.monotonic()
    ours, command = split_argv(argv)
    args = build_script_parser().parse_args(ours)
    if not command:
        raise UserError("no command after --: give the training command, e.g. -- python train.py")
    if shutil.which(command[0]) is None:
        raise UserError("cannot run %r: no such program" % command[0])
    if args.warmup < 2:
        raise UserError("--warmup %d: at least 2 steps (a change to the model is made in the second)" % args.warmup)
    only, bounds = _script_levers(args.levers)
    check_outputs(args)
    what = shown(command)
    guard_command(args, "python -m gluonperf.tune", stall_timeout=args.timeout + 120)
    note("tune: a first run of `%s` as it is (a probe: its Trainer, model, DataLoaders, waits and operators)"
         % what)
    runner, found = _probe(args, command, what)
    if runner is None:
        return found
    probe = found.get("probe", {})
    if probe.get("error"):
        note("note: the probe could not describe the script (%s)" % probe["error"])
    cores = physical_cores()
    stages, idle = script_tune.script_levers(probe, cores, only, measured=found, threshold=args.threshold,
                                             bounds=bounds)
    note("tune: %s" % script_tune.found_text(probe, found["rate"], os.getcwd()))
    left = script_tune.left_alone(probe)
    if left:
        note("note: " + left)
    for lever, why in idle.items():
        note("note: not tried: %s: %s" % (lever, why))
    rounds = rounds_policy(args)
    results, confirm, kept, runs = _run_levers(args, runner, stages, rounds, idle, what, cores)
    took = time.monotonic() - began
    advice = script_tune.recipe(results, confirm, kept, probe, runner.runs.get("as it is", []) + [found["rate"]],
                                os.getcwd(), script_tune.tried_text(results, idle),
                                took=dict(wall_s=took, runs=runs + 1, levers=[s[0] for s in stages], idle=idle))
    table = [r for r in results if r.metrics.get("lever") != "confirm"]
    if table:
        emit(table, args, title=_script_title(what, runner, args, cores), columns=SCRIPT_COLUMNS,
             records=results + advice)
    else:
        write_outputs(advice, args)
    print()
    print("\n".join(script_tune.recipe_lines(advice)))
    for line in script_tune.failure_notes(results):
        note(line)
    return 0


SCRIPT_COLUMNS = ["lever", "name", "images_per_s", "ratio", "ratio_ci_low", "ratio_ci_high", "rounds", "verdict",
                  "error"]


def _script_title(what, runner, args, cores):
    from .measure.harness import cpu_model
    how = ("each candidate until its verdict is settled (at most %d rounds), 95%% intervals held over the "
           "candidates and the looks (a group-sequential plan)" % sweep.Rounds().maximum if args.rounds == "auto"
           else "%s interleaved rounds, 95%% interval corrected for the candidates tried" % args.rounds)
    return ("tune: `%s` on %s (%d cores), images/s per candidate (Trainer.step's batch_size over %d timed steps after "
            "%d), ratio to the lever's baseline, geometric mean of its rounds; %s"
            % (what, cpu_model(), cores, runner.steps, args.warmup, how))


def _run_levers(args, runner, stages, rounds, idle, what, cores):
    """tune_script under a progress bar and a stop guard: (results, confirm, kept, runs made)."""
    from .cli.common import keep_on_stop, note, progress_bar
    from .experiments import script_tune
    total = script_tune.count_runs(stages, rounds)
    if total:
        note("tune: at most %d runs of the script, each a fresh process%s" % (
            total,
            "; each candidate stops once its verdict is settled" if rounds.kind == "sequential" else ""))
    sweeps = sweep.Sweeps()
    bar = progress_bar(total, "tune")
    watch = _Remaining(bar)
    try:
        with keep_on_stop(sweeps.results, args, _script_title(what, runner, args, cores), SCRIPT_COLUMNS):
            results, confirm, kept = script_tune.tune_script(runner, stages, rounds, watch.ran, args.timeout, sweeps,
                                                             args.threshold, left=watch.left, idle=idle)
    finally:
        bar.close()
    return results, confirm, kept, bar.done


class _Remaining:
    """The progress bar's plan, kept as the candidates leave; where the bar is not shown (stderr is not a
    terminal), a line every half minute: the runs done, the most still to come, the time left at most."""
    EVERY = 30.0

    def __init__(self, bar):
        import time
        self.bar, self.began, self.said = bar, time.monotonic(), time.monotonic()

    def ran(self):
        self.bar.update()

    def left(self, runs):
        import time
        from .cli.common import note
        from .experiments import script_tune
        self.bar.replan(runs)
        now = time.monotonic()
        if self.bar.disable and now - self.said >= self.EVERY and self.bar.done:
            self.said = now
            per_run = (now - self.began) / self.bar.done
            note("tune: %d runs done, at most %d to come (about %s at most)"
                 % (self.bar.done, runs, script_tune.duration(per_run * runs)))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" in argv:
        return main_script(argv)
    return main_model(argv)


def main_model(argv=None):
    from .cli.common import advise, emit, guard_command, keep_on_stop, note, progress_bar
    args = parse_args(argv)
    # each run is bounded by --timeout; the guard catches a hang of tune itself between runs
    guard_command(args, "python -m gluonperf.tune", stall_timeout=args.timeout + 120)
    advise(args.contexts, prefix="this shell's settings: ")
    total = sweep.count_runs(args.model, args.contexts, args.batch_sizes, args.rounds_policy, args.kvstores,
                             args.only, args.runner_obj, args.optimizer)
    for idle in getattr(args, "idle_levers", ()):
        note("note: --levers: nothing to try here for %s" % idle)
    note("tune: %s%d runs of %s, each in a fresh process" % ("at least " if args.rounds == "auto" else "", total,
                                                            args.runner_obj.module))
    bar = progress_bar(total, "tune")
    title = "tune: %s on %s, images/s per candidate, ratio to the lever's baseline (geometric mean of %s " \
            "interleaved rounds, 95%% interval corrected for the candidates tried)" % (
                label(args.model), ",".join(args.contexts), "auto" if args.rounds == "auto" else args.rounds)
    columns = ["batch_size", "lever", "rank", "name", "images_per_s", "ratio", "ratio_ci_low", "ratio_ci_high",
               "rounds", "verdict", "error"]
    sweeps = sweep.Sweeps()
    try:
        with keep_on_stop(sweeps.results, args, title, columns):
            results = sweep.tune(args.model, args.contexts, args.batch_sizes, args.steps, args.rounds_policy,
                                 args.kvstores, args.runner_obj, args.only, bar.update, args.timeout, sweeps,
                                 args.threshold, args.optimizer)
    finally:
        bar.close()
    table = [r for r in results if r.name != "best"]
    emit(table, args, title=title, columns=columns, records=results)  # the files also get the winners ('best')
    warned = sorted({w for r in table for w in r.metrics.get("machine_warnings", ())})
    if warned:
        note(machine.warning_line(warned))
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
        if m["kept_levers"]:
            print("\nbest at batch %d (kept: %s), confirmed against the defaults in one interleaved run: %s"
                  % (m["batch_size"], ", ".join(m["kept_levers"]), m["verdict_text"]))
        else:
            print("\nbest at batch %d: the defaults (no lever was faster than its baseline beyond the noise)"
                  % m["batch_size"])
        print("  " + m["command"])
        for w in m["warnings"]:
            print("  warning: " + w)
    if failed:
        note("python -m gluonperf.tune: error: every baseline run failed at batch %s; see the table's error column"
             % ",".join(map(str, failed)))
        return 1
    return 0


if __name__ == "__main__":
    from .cli.common import run
    run(main, "python -m gluonperf.tune")

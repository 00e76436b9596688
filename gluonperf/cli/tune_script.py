"""`python -m gluonperf.tune [--levers ...] -- python train.py`: the command's half for a training
script gluonperf has never seen (dispatched from gluonperf.tune's main when its arguments hold
`--`). It parses and checks, runs the probe (gluonperf/script/runner.py: `probe`), takes the
script's levers from the script's runner (script/levers.py), hands that runner and its levers
to the one coordinate search (gluonperf/tuning/search.py: `coordinate`), and prints each
candidate's result and the recipe (script/advice.py, script/text.py). What runs inside each
run of the script is gluonperf/script/listener.py.
"""
import argparse
import os
import shutil
import sys
import time

from .. import UserError
from ..script import advice as script_advice
from ..script import levers as script_levers
from ..script import runner as script_runner
from ..script import text
from ..script.wire import split_argv
from ..tuning import search
from ..tuning.candidates import Candidate
from ..tuning.schedule import Sweeps, machine_notes
from . import common as cli
from .tune_flags import add_rounds, rounds_policy

PROG = "python -m gluonperf.tune"
USAGE = ("%(prog)s [--levers L,...|all] [--rounds auto|exhaustive|N] [--steps N] [--warmup K] [--json PATH] "
         "-- COMMAND...")
MIN_TIME = 1.0  # --min-time's floor by default (seconds), beside the script's start-up
# --budget's default, by the probe's run: (up to SEC, budget) and beyond the last, BUDGET_RUNS runs' time
BUDGETS, BUDGET_RUNS = ((10, 300), (20, 600)), 30
BUDGET_RULE = ("5 minutes for a script whose run (the probe's) takes up to 10 s, 10 minutes up to 20 s, the time of %d "
               "runs beyond" % BUDGET_RUNS)
COLUMNS = ["lever", "name", "images_per_s", "ratio", "ratio_ci_low", "ratio_ci_high", "rounds", "verdict", "error"]


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG, usage=USAGE,
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
                                    % ",".join(script_levers.LEVER_NAMES))
    p.add_argument("--steps", type=cli.positive_int, default=20,
                   help="timed steps per run, after --warmup (default: %(default)s)")
    p.add_argument("--min-time", type=cli.positive_float, metavar="SEC",
                   help="the probe times at least --steps steps and SEC seconds; every run after it times as many "
                        "steps (default: %.0f s and as long as the script took to start, importing MXNet and "
                        "building its data, so that a run measures at least as long as it starts)" % MIN_TIME)
    p.add_argument("--warmup", type=cli.positive_int, default=5,
                   help="steps run before the timed ones in every run, at least 2: a change to the model is made "
                        "in the second (default: %(default)s)")
    add_rounds(p, budget=None, budget_help=BUDGET_RULE)
    cli.add_threshold(p)
    p.add_argument("--timeout", type=cli.positive_int, default=600,
                   help="seconds before one run of the script is abandoned (default: %(default)s)")
    p.add_argument("--json", metavar="PATH", help="also write the results and the recipe as JSON lines")
    p.add_argument("--csv", metavar="PATH", help="also write the results and the recipe as CSV")
    cli.add_wide(p)
    return p


def parse_levers(text):
    """--levers: (the levers named, whether the probe's bounds apply), or UserError."""
    names = script_levers.LEVER_NAMES
    if not text:
        return None, True
    only = [l.strip() for l in text.split(",") if l.strip()]
    if only == ["all"]:
        return list(names), False
    bad = [l for l in only if l not in names]
    if bad or not only:
        raise UserError("--levers %s: unknown lever(s) %s; choose from %s, or all"
                        % (text, ",".join(bad), ",".join(names)))
    return only, False


def parse_args(argv):
    """(args, the user's command, (the levers of --levers or None: all, whether their bounds apply)),
    checked: UserError for what cannot run."""
    ours, command = split_argv(argv)
    args = build_parser().parse_args(ours)
    if not command:
        raise UserError("no command after --: give the training command, e.g. -- python train.py")
    if shutil.which(command[0]) is None:
        raise UserError("cannot run %r: no such program" % command[0])
    if args.warmup < 2:
        raise UserError("--warmup %d: at least 2 steps (a change to the model is made in the second)" % args.warmup)
    levers = parse_levers(args.levers)
    cli.check_outputs(args)
    return args, command, levers


def probe(args, command, what):
    """The probe's run of the script: (runner, its records), or the script's own exit status when it
    failed as it is; UserError when it cannot be tuned."""
    given = args.min_time is not None  # a time the user chose is the time; by default, at least the start-up's
    runner, found, done, error = script_runner.probe(command, args.warmup, args.steps, args.timeout,
                                                     min_seconds=args.min_time if given else MIN_TIME,
                                                     window=None if given else "startup")
    if not error:
        return runner, found
    if done is not None and done.returncode != 0 and "rate" not in found:  # the script's own failure
        sys.stderr.write(done.stderr)
        cli.say("%s: the script failed as it is (%s); nothing was tuned" % (PROG, error))
        return None, done.returncode
    if not found or found.get("exit", {}).get("steps_seen") == 0:
        raise UserError("`%s` never called gluon.Trainer.step: tune counts a script's steps there, so it needs a "
                        "script that trains with a gluon.Trainer" % what)
    raise UserError("`%s`: %s; give the script more steps, or lower --warmup/--steps" % (what, error))


def main(argv):
    """`tune -- COMMAND`: the levers tried on the user's script, and the recipe."""
    from ..runtime.threads import physical_cores
    began = time.monotonic()
    args, command, (only, bounds) = parse_args(argv)
    what = text.shown(command)
    cli.guard_command(args, PROG, stall_timeout=args.timeout + 120)
    cli.note("tune: a first run of `%s` as it is (a probe: its Trainer, model, DataLoaders, waits and operators)"
             % what)
    probed = time.monotonic()
    runner, found = probe(args, command, what)
    if runner is None:
        return found
    run_s = time.monotonic() - probed  # the first guess of a run's time, until runs are seen
    described = found.get("probe", {})
    if described.get("error"):
        cli.note("note: the probe could not describe the script (%s)" % described["error"])
    cores = physical_cores()
    stages, idle = runner.levers(cores, only, threshold=args.threshold, bounds=bounds)
    cli.note("tune: %s" % text.found_text(described, found["rate"], os.getcwd()))
    left = text.left_alone(described)
    if left:
        cli.note("note: " + left)
    for lever, why in idle.items():
        cli.note("note: not tried: %s: %s" % (lever, why))
    rounds = rounds_policy(args, default_budget(run_s), run_s)
    if rounds.budget is not None:
        rounds.budget.start(began)  # the probe's time is the tune's too
        why = "" if args.budget else " (the probe's run took %s; --budget's default: %s)" % (
            text.duration(run_s), BUDGET_RULE)
        cli.note("tune: a budget of %s for the whole tune%s" % (text.duration(rounds.budget.seconds), why))
    heading = title(what, runner, args, cores, search.family_size(stages, Candidate(runner.baseline)))
    done, runs = run_levers(args, runner, stages, heading, rounds)
    for lever, why in done.idle.items():  # found with nothing to try once the levers before it were kept
        if lever not in idle:
            cli.note("note: not tried: %s: %s" % (lever, why))
    idle = dict(idle, **done.idle)
    for lever, why in done.unreached.items():
        cli.note("note: not reached: %s: %s" % (lever, why))
    wall = time.monotonic() - began
    advice = script_advice.recipe(
        done, described, runner.runs.get(runner.baseline, []) + [found["rate"]],
        os.getcwd(), text.tried_text(done.results, dict(idle, **done.unreached)),
        took=dict(wall_s=wall, runs=runs + 1, levers=[s[0] for s in stages], idle=idle, unreached=done.unreached,
                  unsettled=done.unsettled,
                  budget_s=rounds.budget.seconds if rounds.budget else None, run_s=wall / (runs + 1)),
        command=what)
    table = [r for r in done.results if r.metrics.get("lever") != "confirm"]
    if table:
        cli.emit(table, args, title=heading, columns=COLUMNS, records=done.results + advice)
    else:
        cli.write_outputs(advice, args)
    print()
    print("\n".join(text.recipe_lines(advice)))
    for line in text.failure_notes(done.results):
        cli.note(line)
    for line in machine_notes(done.results):
        cli.note("note: " + line)
    return 0


def default_budget(run_s):
    """--budget's default for a script whose run takes `run_s` seconds (BUDGET_RULE)."""
    return next((budget for upto, budget in BUDGETS if run_s <= upto), BUDGET_RUNS * run_s)


def title(what, runner, args, cores, family):
    from ..measure.harness import cpu_model
    from ..tuning.rounds import Rounds
    held = ("95%% intervals held together over the %d candidates planned in every lever%s: when no change pays, "
            "the recipe names one at most 5%% of the time" % (family, " and the looks (a group-sequential plan)"
                                                              if args.rounds == "auto" else ""))
    how = ("each candidate until its verdict is settled (at most %d rounds); %s" % (Rounds().maximum, held)
           if args.rounds == "auto" else "%s interleaved rounds; %s" % (args.rounds, held))
    return ("tune: `%s` on %s (%d cores), images/s per candidate (Trainer.step's batch_size over %d timed steps after "
            "%d), ratio to the lever's baseline, geometric mean of its rounds; %s"
            % (what, cpu_model(), cores, runner.steps, args.warmup, how))


def run_levers(args, runner, stages, heading, rounds):
    """The one coordinate search (tuning/search.py) on the script's runner, under a progress bar and a
    stop guard: (its Search, runs made)."""
    base = Candidate(runner.baseline)
    total = _within(search.planned_runs(stages, base, rounds), rounds.budget)
    if total:
        cli.note("tune: at most %d runs of the script, each a fresh process%s" % (
            total, "; each candidate stops once its verdict is settled" if rounds.kind == "sequential" else ""))
    sweeps = Sweeps()
    bar = cli.progress_bar(total, "tune")
    watch = _Remaining(bar, rounds.budget)
    try:
        with cli.keep_on_stop(sweeps.results, args, heading, COLUMNS):
            done = search.coordinate(runner, base, stages,
                                     search.Settings(rounds, runner.steps, args.timeout, args.threshold),
                                     search.Observers(progress=watch.ran, left=watch.left, sweeps=sweeps))
    finally:
        bar.close()
    return done, bar.done


class _Remaining:
    """The progress bar's plan, kept as the candidates leave; where the bar is not shown (stderr is not a
    terminal), a line every half minute: the runs done, the most still to come, and the time left at most,
    the budget's (which never rises: no round starts that would end past it)."""
    EVERY = 30.0

    def __init__(self, bar, budget=None):
        self.bar, self.budget, self.said = bar, budget, time.monotonic()

    def ran(self):
        self.bar.update()

    def left(self, runs):
        runs = _within(runs, self.budget)
        self.bar.replan(runs)
        now = time.monotonic()
        if self.bar.disable and now - self.said >= self.EVERY and self.bar.done:
            self.said = now
            cli.note("tune: %d runs done, at most %d to come%s" % (
                self.bar.done, runs, " (%s at most)" % text.duration(self.budget.left()) if self.budget else ""))


def _within(runs, budget):
    """At most `runs` runs, and no more than the budget left holds at the longest run seen so far."""
    if budget is None or budget.per_run <= 0:
        return runs
    return min(runs, int(budget.left() // budget.per_run))

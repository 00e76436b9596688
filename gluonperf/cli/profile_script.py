"""`python -m gluonperf.profile [--steps N] [--warmup K] [--json PATH] -- COMMAND...`: a
training script gluonperf has never seen, profiled from outside, unmodified.

The command runs as a child in its own session, with this terminal: its output and exit status
are the script's; signals go on to its process group, which is killed when it ends
(`runtime.guard.run_foreground`, with guard.FOREGROUND_GRACE). The hooks (workers/script_site;
inside the script, script/driver.py) write what they measure through the wire (script/wire.py)
into a temporary folder; once the child has ended, this command measures the machine's
ceiling, summarises (script/summary.py, script/advice.py) and prints the report after the
script's own output (script/tables.py, script/text.py). Dispatched from gluonperf.profile's
main when its arguments hold `--`. What a user sees, failures and signals included:
docs/your_script.md.
"""
import argparse
import os
import shutil
import signal
import sys
import tempfile

from .. import UserError
from ..runtime import guard
from ..script import wire
from . import common as cli

PROG = "python -m gluonperf.profile"
BULK_OFF = {"MXNET_EXEC_BULK_EXEC_TRAIN": "0", "MXNET_EXEC_BULK_EXEC_INFERENCE": "0"}  # --split-bulk


def build_parser():
    p = argparse.ArgumentParser(
        prog=PROG, usage="%(prog)s [--steps N] [--warmup K] [--json PATH] [...] -- COMMAND...",
        description="Profile an unmodified Python training command (python train.py ARGS, python -m pkg.train "
                    "ARGS) from outside: its output and exit status pass through; then the step's time and "
                    "images/s, its share waiting for data with an input-bound verdict, the update's share, the top "
                    "operators against this machine's ceiling, the model's Blocks and the peak memory. Steps are "
                    "found through gluon.Trainer.step(batch_size), waits for data through the iteration of "
                    "DataLoader and MXNet's data iterators; the measured steps are fenced (mx.nd.waitall()).")
    p.add_argument("--steps", type=cli.positive_int, default=20,
                   help="measured steps, after --warmup; then --operator-steps more under MXNet's profiler "
                        "(default: %(default)s)")
    p.add_argument("--warmup", type=cli.non_negative_int, default=3,
                   help="steps run before the measured ones, not counted (default: %(default)s)")
    p.add_argument("--operator-steps", type=cli.non_negative_int, default=5, metavar="N",
                   help="steps after the measured ones with MXNet's profiler on, for the operator table (0: no "
                        "table; the profiler slows every operator, so it has steps of its own) (default: "
                        "%(default)s)")
    p.add_argument("--depth", type=cli.non_negative_int, default=2,
                   help="the Blocks table: the model's Blocks down to this depth, each timed alone after the "
                        "measured steps (0 leaves it out) (default: %(default)s)")
    p.add_argument("--ceiling", choices=["full", "quick", "off"], default="full",
                   help="problem sizes of the peak FLOP/s measured after the script ends, when the model's FLOPs "
                        "are known (off: no fraction of the ceiling) (default: %(default)s)")
    p.add_argument("--stop", action="store_true",
                   help="stop the script once its steps are measured (exit status 0), instead of letting it run on")
    p.add_argument("--split-bulk", action="store_true",
                   help="run the whole script with MXNet's bulk execution off (MXNET_EXEC_BULK_EXEC_TRAIN=0 and "
                        "MXNET_EXEC_BULK_EXEC_INFERENCE=0), so that a hybridized model's operators are timed one by "
                        "one and get their GFLOP/s; the steps are then timed in that setting too")
    p.add_argument("--trace", metavar="PATH", help="keep the Chrome trace of the --operator-steps")
    p.add_argument("--timeout", type=cli.non_negative_float, default=0, metavar="SEC",
                   help="stop the script (as Ctrl-C does) after SEC seconds and report what was measured (0: never) "
                        "(default: %(default)g)")
    p.add_argument("--json", metavar="PATH", help="also write the results as JSON lines, with the environment")
    p.add_argument("--csv", metavar="PATH", help="also write the results as CSV")
    cli.add_threshold(p)  # the input verdict's
    cli.add_wide(p)
    return p


def child_environment(tmp, args):
    """The script's environment (wire.environment) with the settings profile's driver reads."""
    settings = {"warmup": args.warmup, "steps": args.steps, "operator_steps": args.operator_steps,
                "depth": args.depth, "stop": args.stop, "trace": os.path.abspath(args.trace) if args.trace else None}
    return wire.environment(tmp, wire.PROFILE, settings)


def run_child(command, env, timeout=0):
    """guard.run_foreground, with a command that cannot start said in one line."""
    try:
        return guard.run_foreground(command, env, timeout)
    except FileNotFoundError:
        raise UserError("cannot run %r: no such program" % command[0])
    except PermissionError:
        raise UserError("cannot run %r: permission denied" % command[0])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    ours, command = wire.split_argv(argv)
    args = build_parser().parse_args(ours)
    if not command:
        raise UserError("no command after --: give the training command, e.g. -- python train.py")
    cli.check_outputs(args)
    cli.check_output_path(args.trace, "--trace")
    if shutil.which(command[0]) is None:
        raise UserError("cannot run %r: no such program" % command[0])
    if args.split_bulk:  # for the script (its environment is this one's), and so the records say how it ran
        os.environ.update(BULK_OFF)
    tmp = tempfile.mkdtemp(prefix="gluonperf-script-")
    try:
        sys.stdout.flush()
        proc, stopped, timed_out = run_child(command, child_environment(tmp, args), args.timeout)
        return report(args, command, tmp, guard.status_code(proc.returncode), stopped, timed_out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(args, command, tmp, code, stopped, timed_out):
    """Print what the child's processes measured; return the child's exit status."""
    from ..script import advice, summary as sp, tables, text
    from ..script.text import shown
    runs, sites = wire.read_runs(tmp)
    why = sp.nothing_measured(runs, sites)
    what = shown(command)
    ended = ("was stopped by --timeout" if timed_out else "was stopped by %s" % signal.Signals(stopped).name
             if stopped else "exited with status %d" % code if code else None)
    if why:
        cli.say("%s: %s%s" % (PROG, why, "; the script %s" % ended if ended else ""))
        return code
    run, others = sp.choose(runs)
    if run.get("process", {}).get("rank") not in (None, 0):
        return code  # a dist_sync worker of rank > 0 (launch ... -- profile -- ...): rank 0 reports
    if ended and not stopped and not timed_out:  # the script failed: its traceback stands; one line of ours
        summary = sp.summarise(run, what, args.threshold)
        summary["advice"] = advice.advice(summary, what, os.getcwd())
        cli.write_outputs(_records(summary), args, _contexts(run))
        cli.say("%s: the script %s; %s" % (PROG, ended, sp.one_line(run)))
        return code
    peak, devices, ceiling_note = None, 1, None
    if sp.needs_ceiling(run) and args.ceiling != "off" and not stopped:
        peak, devices, ceiling_note = _ceiling(run, args.ceiling)
    summary = sp.summarise(run, what, args.threshold, peak, devices)
    summary["advice"] = advice.advice(summary, what, os.getcwd())
    sections = tables.sections(summary, args.warmup, "`%s`" % what)
    print()
    cli.emit_sections(sections, args, _contexts(run), records=_records(summary))
    print(summary["input"][0].metrics["finding"])
    for r in summary.get("growth", []):  # memory over the whole run (script/memory.py)
        print(r.metrics["finding"])
    print()
    print("\n".join(text.advice_lines(summary["advice"])))
    if args.split_bulk:
        summary["notes"].append("note: --split-bulk: the script ran with MXNet's bulk execution off, so its steps "
                                "were timed in that setting (a hybridized model's steps often a little slower)")
    for line in summary["notes"] + ([ceiling_note] if ceiling_note else []) + (["note: " + others] if others else []):
        cli.say(line)
    if stopped or timed_out:
        cli.say("%s: the script %s; the report holds the steps measured until then" % (PROG, ended))
    elif summary["steps"][0].metrics["partial"]:
        cli.say("%s: the script ended after %d measured steps, before all of --warmup %d, --steps %d and "
                "--operator-steps %d" % (PROG, summary["steps"][0].metrics["steps"], args.warmup, args.steps,
                                          args.operator_steps))
    if args.trace and summary["operators"]:
        cli.say("wrote profiler trace %s (the --operator-steps; open in ui.perfetto.dev)" % args.trace)
    return code


def _records(summary):
    return (summary["steps"] + summary["input"] + summary["operators"] + summary["blocks"] + summary["memory"]
            + summary.get("waits", []) + summary.get("hybridize", []) + summary.get("growth", [])
            + summary.get("advice", []))


def _contexts(run):
    from ..runtime.contexts import parse_contexts
    try:
        return parse_contexts((run.get("process") or {}).get("contexts") or "cpu")
    except ValueError:
        return []


def _ceiling(run, size):
    """The peak FLOP/s of one of the script's contexts, measured now (the script has ended),
    with the thread settings the script had (this environment); how many of it the script's
    contexts hold; and a note."""
    from ..measure.ceiling import ceiling_devices, ceiling_flops, measure_ceiling
    ctxs = _contexts(run)
    with cli.progress_bar(3 * 5, "ceiling") as bar:
        ceiling = measure_ceiling(ctxs[0], size, progress=bar.update)
    return (ceiling_flops(ceiling), ceiling_devices(ctxs),
            "note: the ceiling, %.4g GFLOP/s on %s (%s sizes), was measured after the script ended, with its thread "
            "settings" % (ceiling_flops(ceiling) / 1e9, ctxs[0], size))


if __name__ == "__main__":
    cli.run(main, PROG)

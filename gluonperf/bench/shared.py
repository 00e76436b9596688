"""What the bench subcommands share: their common flags and a subcommand's flags as keyword
arguments (run_with), the --trace flag, the notes on noisy and unstable measurements, and the
two devices of parallel and overlap. (Comma-separated lists and sections of tables are every
command's: gluonperf.cli.common.)"""
import argparse

from ..cli import common as cli
from ..cli.processes import add_processes


def common_flags():
    """The flags every subcommand takes: --ctx, --json, --csv, --stall-timeout, --processes."""
    common = cli.common_parser()
    add_processes(common)
    return common


def namespace(add_parser, **flags):
    """The command line of the subcommand that `add_parser` adds, parsed with its defaults and
    then `flags`: keyword arguments named as its flags' dests (batch_size=8 for --batch-size 8),
    each value as the command line writes it (sizes="4K,4M", parsed by the flag's type) or as
    parsed (sizes=[4096, 4194304]). A flag the subcommand requires must be given; one it does
    not have is a TypeError, as for any function."""
    sub = argparse.ArgumentParser().add_subparsers()
    add_parser(sub, common_flags())
    parser = next(iter(sub.choices.values()))
    actions = {a.dest: a for a in parser._actions if a.dest not in ("help", argparse.SUPPRESS)}
    for dest in flags:
        if dest not in actions:
            raise TypeError("run_with() got an unexpected keyword argument %r (bench %s has no --%s)"
                            % (dest, parser.prog.split()[-1], dest.replace("_", "-")))
    for action in actions.values():
        if action.required:
            if action.dest not in flags:
                raise TypeError("run_with() needs %s= (%s)" % (action.dest, action.option_strings[0]))
            action.required = False
    given = {dest: actions[dest].type(value) if isinstance(value, str) and actions[dest].type is not None else value
             for dest, value in flags.items()}
    return argparse.Namespace(**dict(vars(parser.parse_args([])), **given))


def warn_unstable(results):
    """A note when the machine was unstable during the measurement (gluonperf.measure.machine)."""
    from ..measure.machine import warning_line
    line = warning_line(next((r.metrics["machine_warnings"] for r in results if r.metrics.get("machine_warnings")),
                             None))
    if line:
        cli.note("note: " + line)


def add_trace(p, what="one more run of the measured code, untimed, so the profiler's overhead stays "
                       "out of the timings"):
    p.add_argument("--trace", metavar="PATH",
                   help="also write an MXNet profiler trace (Chrome trace JSON: open in ui.perfetto.dev or "
                        "chrome://tracing) of %s" % what)


def write_trace(trace):
    """Write --trace's file, if asked for (measure.trace.Trace)."""
    if trace:
        trace.dump()


def wrote_trace(path):
    """The note that --trace's file is written."""
    if path:
        cli.note("wrote profiler trace %s (open in ui.perfetto.dev or chrome://tracing)" % path)


def warn_noisy(results):
    if any(r.metrics.get("noisy") for r in results):
        cli.note("note: some results are noisy (IQR above 10% of the median); "
                 "close other work or raise --repeat")


def add_device_sizes(p, repeat):
    p.add_argument("--cpu-size", type=cli.positive_int, default=1000,
                   help="n of the n x n matrix on a CPU context (default: %(default)s)")
    p.add_argument("--gpu-size", type=cli.positive_int, default=6000,
                   help="n of the n x n matrix on a GPU context (default: %(default)s, as in the chapter)")
    p.add_argument("--products", type=cli.positive_int, default=10,
                   help="matrix products per run (default: %(default)s, as in the chapter)")
    p.add_argument("--repeat", type=cli.positive_int, default=repeat,
                   help="timed repeats of each variant, interleaved (default: %(default)s)")
    add_trace(p)


def pair_used(args, pick):
    from ..experiments import auto_parallel
    return list(getattr(auto_parallel, pick)(cli.contexts(args)))


STAND_IN_TEXT = "two CPU contexts stand in for two devices; they share the same cores"


def stand_in_note(stand_in):
    """The terminal title's word on CPU contexts standing in for two devices."""
    return " [no GPU: %s]" % STAND_IN_TEXT if stand_in else ""


def stand_in_reading(m):
    """The report reading's word on it, from a record's metrics."""
    return " (%s)" % STAND_IN_TEXT if m.get("stand_in") else ""

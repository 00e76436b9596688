"""python -m gluonperf.bench <experiment>: a thin command line over the experiment modules.

One module per subcommand, named after it where Python allows:

=================  ===============================
subcommand         module
=================  ===============================
hybridize          gluonperf.bench.hybridize
async              gluonperf.bench.asynchronous
memory             gluonperf.bench.memory
parallel           gluonperf.bench.parallel
overlap            gluonperf.bench.overlap
allreduce          gluonperf.bench.allreduce
scratch            gluonperf.bench.scratch
footprint          gluonperf.bench.footprint
optimizers         gluonperf.bench.optimizers
input              gluonperf.bench.input
time-to-accuracy   gluonperf.bench.time_to_accuracy
=================  ===============================

A subcommand's module registers itself by being in this package and naming itself: `NAME` (the
subcommand), `add_parser(sub, common)` (its flags; sets `run`), `run(args)`. Optional:
`AT_LEAST_CONTEXTS` (CPU contexts it runs at once whatever --ctx says, default 1),
`contexts_at_once(argv)` (the same, read from the command line), `STAND_IN` (its CPU contexts
stand in for devices, default False). `ORDER` below places the subcommands in --help; one it
does not name comes after them. Each subcommand parses its flags, calls one experiment
function, and hands the records to `gluonperf.cli.common.emit`. Nothing is computed here.
Shared helpers: gluonperf.bench.shared.
"""
import argparse
import importlib
import pkgutil

from ..cli import common as cli
from ..cli.processes import add_processes

PROG = "python -m gluonperf.bench"

# The subcommands' order in --help: the chapter's experiments first, in the chapter's order.
ORDER = ["hybridize", "async", "memory", "parallel", "overlap", "allreduce", "scratch", "footprint", "optimizers",
         "input", "time-to-accuracy"]


def _subcommands():
    """The modules of this package that name a subcommand, in ORDER, then the others by name."""
    found = [importlib.import_module("%s.%s" % (__name__, m.name)) for m in pkgutil.iter_modules(__path__)
             if not m.name.startswith("_")]
    found = [m for m in found if hasattr(m, "NAME")]
    order = {name: i for i, name in enumerate(ORDER)}
    return sorted(found, key=lambda m: (order.get(m.NAME, len(order)), m.NAME))


SUBCOMMANDS = _subcommands()
BY_NAME = {m.NAME: m for m in SUBCOMMANDS}
# Experiments that run more CPU contexts at once than --ctx names (parallel and overlap pair a
# single context with the next one; allreduce with --ctx cpu uses cpu0..cpuN-1)
AT_LEAST_CONTEXTS = {m.NAME: m.AT_LEAST_CONTEXTS for m in SUBCOMMANDS if getattr(m, "AT_LEAST_CONTEXTS", 1) > 1}
# Experiments whose CPU contexts stand in for devices: glibc keeps freed memory, as a GPU's pool does
# (gluonperf.runtime.allocator); not bench memory or footprint, which measure the process's memory.
STAND_IN_COMMANDS = tuple(m.NAME for m in SUBCOMMANDS if getattr(m, "STAND_IN", False))


def contexts_at_once(argv):
    """The fewest CPU contexts the subcommand in `argv` runs at once (read before argparse)."""
    module = BY_NAME.get(cli.subcommand_in_argv(argv))
    if module is None:
        return 1
    if hasattr(module, "contexts_at_once"):
        return module.contexts_at_once(argv)
    return getattr(module, "AT_LEAST_CONTEXTS", 1)


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure the computational performance of MXNet Gluon code. Every timed "
                    "region ends in mx.nd.waitall(), is warmed up, repeated, and reported as a "
                    "median with its spread.")
    sub = parser.add_subparsers(dest="command", metavar="EXPERIMENT")
    sub.required = True
    common = cli.common_parser()
    add_processes(common)
    for module in SUBCOMMANDS:
        module.add_parser(sub, common)
    return parser


def main(argv=None, threads_note=None, malloc_note=None, dtype_note=None):
    """The command: parse `argv`, run the subcommand. The notes say what bench/__main__.py set
    before MXNet loaded (None when called from Python, where nothing is set)."""
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if not getattr(args, "list_models", False):
        used = getattr(args, "contexts_used", cli.contexts)
        cli.advise(used(args), threads_note)
    if malloc_note:
        cli.note_later("note: " + malloc_note)
    args.dtype_note = dtype_note
    return args.run(args)

"""python -m gluonperf.bench <experiment>: the chapter's experiments, one module per subcommand:
hybridize          gluonperf.bench.hybridize
async              gluonperf.bench.asynchronous
memory             gluonperf.bench.memory
parallel           gluonperf.bench.parallel
overlap            gluonperf.bench.overlap
allreduce          gluonperf.bench.allreduce
scratch            gluonperf.bench.scratch
engines            gluonperf.bench.engines
footprint          gluonperf.bench.footprint
optimizers         gluonperf.bench.optimizers
input              gluonperf.bench.input
time-to-accuracy   gluonperf.bench.time_to_accuracy

Importing this package loads no MXNet. What a subcommand's module holds: docs/internals.md."""
import argparse
import importlib
import pkgutil

from ..cli import common as cli
from . import shared

PROG = "python -m gluonperf.bench"

# The subcommands' order in --help (one not named here comes after them, by name).
ORDER = ["hybridize", "async", "memory", "parallel", "overlap", "allreduce", "scratch", "engines", "footprint",
         "optimizers", "input", "time-to-accuracy"]


def _subcommands():
    """The modules of this package that name a subcommand, in ORDER, then the others by name."""
    found = [importlib.import_module("%s.%s" % (__name__, m.name)) for m in pkgutil.iter_modules(__path__)
             if not m.name.startswith("_")]
    order = {name: i for i, name in enumerate(ORDER)}
    return sorted((m for m in found if hasattr(m, "NAME")), key=lambda m: (order.get(m.NAME, len(order)), m.NAME))


SUBCOMMANDS = _subcommands()
BY_NAME = {m.NAME: m for m in SUBCOMMANDS}
# Experiments that run more CPU contexts at once than --ctx names (parallel and overlap pair a
# single context with the next one; allreduce with --ctx cpu uses cpu0..cpuN-1)
AT_LEAST_CONTEXTS = {m.NAME: m.AT_LEAST_CONTEXTS for m in SUBCOMMANDS if getattr(m, "AT_LEAST_CONTEXTS", 1) > 1}
# Experiments whose CPU contexts stand in for devices: glibc keeps freed memory, as a GPU's pool does
# (gluonperf.runtime.allocator); not bench memory or footprint, which measure the process's memory.
STAND_IN_COMMANDS = tuple(m.NAME for m in SUBCOMMANDS if getattr(m, "STAND_IN", False))


def contexts_at_once(argv):
    """The fewest CPU contexts the subcommand in `argv` runs at once (read before argparse); 0
    for one whose work runs in commands it starts (`RUNS_COMMANDS`), which choose their own."""
    module = BY_NAME.get(cli.subcommand_in_argv(argv))
    if module is None:
        return 1
    if getattr(module, "RUNS_COMMANDS", False):
        return 0
    if hasattr(module, "contexts_at_once"):
        return module.contexts_at_once(argv)
    return getattr(module, "AT_LEAST_CONTEXTS", 1)


def run_with(name, **flags):
    """The records of `bench NAME` from Python, nothing printed and no file written but
    --trace's: flags as keyword arguments named as argparse names them
    (`run_with("hybridize", model="mlp", batch_size=8)`; a list flag as the command line
    writes it, `sizes="4K,4M"`, or parsed, `sizes=[4096, 4194304]`: `shared.namespace`)."""
    if name not in BY_NAME:
        raise ValueError("no bench subcommand %r; choose from %s" % (name, ", ".join(BY_NAME)))
    module = BY_NAME[name]
    return module.measure(shared.namespace(module.add_parser, **flags))[0]


def kinds():
    """The report's kinds of records that the subcommands draw (gluonperf.render.kinds.Kind)."""
    from ..render.kinds import Kind
    return [Kind(m.RECORDS, m.TITLE, m.section) for m in SUBCOMMANDS if hasattr(m, "section")]


def build_parser():
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Measure the computational performance of MXNet Gluon code. Every timed "
                    "region ends in mx.nd.waitall(), is warmed up, repeated, and reported as a "
                    "median with its spread.")
    sub = parser.add_subparsers(dest="command", metavar="EXPERIMENT")
    sub.required = True
    common = shared.common_flags()
    for module in SUBCOMMANDS:
        module.add_parser(sub, common)
    return parser


def main(argv=None, threads_note=None, malloc_note=None, dtype_note=None):
    """The command: parse `argv`, run the subcommand. The notes say what bench/__main__.py set
    before MXNet loaded (None when called from Python, where nothing is set)."""
    args = build_parser().parse_args(argv)
    cli.guard_command(args, PROG)
    if getattr(args, "list_models", False):
        cli.print_models()
        return 0
    module = BY_NAME[args.command]
    # bad output paths are refused before MXNet loads (cli.contexts below loads it): at once, not after 1.5 s
    cli.check_outputs(args)
    if hasattr(module, "check"):
        module.check(args)
    used = getattr(args, "contexts_used", cli.contexts)
    if not getattr(module, "RUNS_COMMANDS", False):  # those commands advise on their own threads
        cli.advise(used(args), threads_note)
    if malloc_note:
        cli.note_later("note: " + malloc_note)
    args.dtype_note = dtype_note
    module.show(args, *module.measure(args))
    return 0

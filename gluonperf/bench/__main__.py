"""`python -m gluonperf.bench`: what the command sets before MXNet loads, then the command.

MXNet reads its thread count (and glibc its allocator settings, oneDNN its instruction set)
once, when it loads; importing gluonperf.bench loads no MXNet, so these are set here, before
any experiment does."""
import sys

from ..cli import common as cli
from . import PROG, STAND_IN_COMMANDS, contexts_at_once, main

if __name__ == "__main__":
    argv = sys.argv[1:]
    # MXNet's thread count: one thread per core, shared among the CPU contexts that run at once
    at_once = contexts_at_once(argv)
    threads_note = cli.thread_defaults(argv, at_once) if at_once else None
    # CPU contexts that stand in for devices: glibc keeps freed memory, as a GPU's pool does
    malloc_note = cli.allocator_defaults(argv, STAND_IN_COMMANDS)
    # footprint --dtype bfloat16: oneDNN's instruction set for the workers (each asks for AMX itself)
    dtype_note = cli.dtype_defaults(argv)
    cli.run(lambda args: main(args, threads_note, malloc_note, dtype_note), PROG)

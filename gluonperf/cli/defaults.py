"""Settings gluonperf makes for the user before a command loads MXNet, which reads them once
when it loads: OpenMP threads (`thread_defaults`), glibc's allocator (`allocator_defaults`),
bfloat16's instruction set (`dtype_defaults`), each read from the command line before argparse
and each returning the note that says what it set. `advise` (cli.common) shows the notes."""


def asks_help(argv):
    """True for -h/--help: the command will only print its help, so nothing is set or sampled."""
    return any(a in ("-h", "--help") for a in argv)


def thread_defaults(argv, at_least=1):
    """For a command about to load MXNet: set OMP_NUM_THREADS to one thread per core,
    shared among the CPU contexts that run at once (those of --ctx, and at least
    `at_least`, or the processes of a Horovod job on this machine), unless the user set it. MXNet reads it once, when loaded, and by
    default gives each operator only half the processors.
    Returns the note to show, or None when nothing was changed."""
    if asks_help(argv):
        return None
    from ..runtime.threads import apply_thread_defaults, cpu_contexts_in_argv, job_processes_here
    here = job_processes_here()
    if here > 1:  # a Horovod job's processes on this machine share its cores (one device each, of a
        # --ctx list with one per process); its siblings, starting now, are no other work to leave cores for
        named = cpu_contexts_in_argv(argv, at_least)
        return apply_thread_defaults(1 if named == here else named, taken=0, processes=here)
    return apply_thread_defaults(cpu_contexts_in_argv(argv, at_least))


def subcommand_in_argv(argv):
    """The subcommand of a command line (its first word that is not a flag), read before argparse."""
    return next((a for a in argv if not a.startswith("-")), None)


def allocator_defaults(argv, stand_in_commands):
    """For `python -m gluonperf.bench <command>` about to load MXNet: when the command is one
    of `stand_in_commands` (CPU contexts standing in for devices) and --ctx names no GPU,
    keep glibc from giving freed memory back (gluonperf.runtime.allocator). Returns the note to show,
    or None when nothing was changed."""
    if asks_help(argv):
        return None
    from ..runtime.threads import ctx_in_argv
    if subcommand_in_argv(argv) not in stand_in_commands or "gpu" in ctx_in_argv(argv).lower():
        return None
    from ..runtime.allocator import keep_freed_memory
    return keep_freed_memory()


def dtype_defaults(argv):
    """For a command about to load MXNet with --dtype bfloat16: what gluonperf.runtime.precision.prepare
    sets (the AMX permission, oneDNN's instruction set). Returns the note to show, or None."""
    if asks_help(argv):
        return None
    from ..runtime.precision import dtype_in_argv, prepare
    return prepare(dtype_in_argv(argv))

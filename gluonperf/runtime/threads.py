"""Settings that silently leave a large share of the machine idle, and their fixes.

`idle_warnings(contexts)` looks at the environment MXNet reads at start-up and
returns one line per trap found. The big one on CPUs: without OMP_NUM_THREADS,
MXNet on x86 gives each operator half the processors, assuming two hyper-threads
per core (src/engine/openmp.cc). On a machine without hyper-threading (most cloud
VMs) that leaves half the cores idle: on the 2-core box gluonperf was built on,
ResNet-18 training runs at about half speed (see docs/levers.md).
"""
import os
import platform
import re
import time

import psutil

from .wire import CORES_TAKEN, LOCAL_WORKERS

# Fraction of the cores below which a setting counts as leaving the machine idle.
IDLE_SHARE = 0.75


def logical_cpus():
    """Processors this process may run on (what OpenMP's omp_get_num_procs sees)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def physical_cores():
    """Cores this process may use, hyper-threads not counted."""
    logical = logical_cpus()
    physical = psutil.cpu_count(logical=False) or logical
    per_core = max(1, (psutil.cpu_count(logical=True) or logical) // physical)
    return max(1, logical // per_core)


def _kind(ctx):
    return ctx.device_type if hasattr(ctx, "device_type") else str(ctx).rstrip("0123456789:()").lower()


def _int(env, name):
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def omp_threads(env=None, logical=None):
    """OpenMP threads MXNet gives each CPU operator under `env` (as MXNet 1.x decides it)."""
    env = os.environ if env is None else env
    logical = logical or logical_cpus()
    if _int(env, "MXNET_OMP_MAX_THREADS") is not None:
        return max(1, _int(env, "MXNET_OMP_MAX_THREADS"))
    if _int(env, "OMP_NUM_THREADS") is not None:
        return max(1, _int(env, "OMP_NUM_THREADS"))
    halves = platform.machine().lower() in ("x86_64", "amd64", "i386", "i686", "x86")
    return max(1, logical // 2) if halves else logical


def idle_warnings(contexts, env=None, cores=None, logical=None):
    """One-line warnings (with the fix) about settings that leave much of the machine idle.

    `contexts`: mx.Context objects or names ('cpu0', 'gpu1'); `env`: the
    environment MXNet starts with (default os.environ); `cores`/`logical`: physical
    cores and processors (default: this machine's)."""
    env = dict(os.environ if env is None else env)
    cores = cores or physical_cores()
    logical = logical or logical_cpus()
    cpu_contexts = sum(1 for c in contexts if _kind(c) == "cpu")
    out = []
    engine = env.get("MXNET_ENGINE_TYPE", "ThreadedEnginePerDevice")
    if engine == "NaiveEngine":
        out.append("MXNET_ENGINE_TYPE=NaiveEngine runs every operator one after another in the Python thread: "
                   "no overlap between devices, copies and compute; unset it (default ThreadedEnginePerDevice)")
    if env.get("MXNET_MKLDNN_ENABLED", "1").strip() in ("0", "false", "False"):
        out.append("MXNET_MKLDNN_ENABLED=0 runs convolutions and batch norm on MXNet's slow reference kernels "
                   "instead of oneDNN (about 2x slower training here); unset it")
    # dist workers that gluonperf.launch started on this machine share its cores too
    local = _int(env, LOCAL_WORKERS) or job_processes_here(env)
    at_once = cpu_contexts * local
    label = ("%d CPU context(s)" % at_once if local == 1 else
             "%d CPU contexts (of %d workers on this machine)" % (at_once, local))
    # cores other processes held when the thread default was chosen (apply_thread_defaults)
    free = max(1, cores - (_int(env, TAKEN_VARIABLE) or 0))
    if cpu_contexts and cores > 1:
        threads = omp_threads(env, logical)
        workers = _int(env, "MXNET_CPU_WORKER_NTHREADS") or 1
        parallel = at_once * workers if engine != "NaiveEngine" else local
        busy = threads * parallel
        best = max(1, free // at_once)
        if busy < IDLE_SHARE * free:
            why = ("OMP_NUM_THREADS=%s" % env["OMP_NUM_THREADS"] if "OMP_NUM_THREADS" in env
                   else "MXNET_OMP_MAX_THREADS=%s" % env["MXNET_OMP_MAX_THREADS"] if "MXNET_OMP_MAX_THREADS" in env
                   else "OMP_NUM_THREADS unset (MXNet then uses half of the %d processors, assuming "
                        "hyper-threading)" % logical)
            out.append("%s: %s x %d OpenMP thread(s) keep %d of %d cores busy; "
                       "set OMP_NUM_THREADS=%d before starting Python"
                       % (why, label, threads, busy, cores, best))
        elif busy > cores and at_once > 1 and threads > best:
            out.append("%s x %d OpenMP threads = %d threads on %d cores oversubscribe them "
                       "(threads wait on each other); set OMP_NUM_THREADS=%d"
                       % (label, threads, busy, cores, best))
    temp_copy = _int(env, "MXNET_CPU_TEMP_COPY")
    if cpu_contexts > 1 and engine != "NaiveEngine" and (temp_copy or 4) < 16:
        out.append("%s: %d CPU contexts share %d temporary workspace(s) and wait for each other (they ran "
                   "at the same time for 12%% of their work in a traced ResNet-18 step); set "
                   "MXNET_CPU_TEMP_COPY=%d"
                   % ("MXNET_CPU_TEMP_COPY=%s" % env["MXNET_CPU_TEMP_COPY"] if temp_copy
                      else "MXNET_CPU_TEMP_COPY unset", cpu_contexts, temp_copy or 4, TEMP_COPY_FOR_CONTEXTS))
    if cpu_contexts > cores:
        out.append("%d CPU contexts on %d cores: the contexts queue for the same cores; use at most %d"
                   % (cpu_contexts, cores, cores))
    return out


def load_warning(cores=None, interval=0.2, busy=None):
    """A line when other processes keep more than half the cores busy now (figures are then
    noisy, and settings that use every core look worse than they would on an idle machine),
    else None.

    `busy`: the cores other processes keep busy (default: this process's `busy_cores`
    reading of the last READING_SECONDS, the one the thread default was chosen from at
    start-up, else one measured now over `interval` seconds). Not the load average: it lags
    by a minute, so a command started just after heavy work ended would call an idle
    machine busy."""
    cores = cores or physical_cores()
    if busy is None:
        busy = recent_busy_cores(interval)
    if busy is None or busy <= 0.5 * cores:
        return None
    return ("the machine is busy (other processes take %.1f of the %d cores now): they compete for the cores, "
            "so figures are noisy and all-core thread settings lose more than on an idle machine"
            % (busy, cores))


def recommended_threads(contexts=1, cores=None, taken=0):
    """OpenMP threads per operator that keep every core busy without oversubscribing:
    the cores, less the `taken` ones other processes keep busy, shared among the CPU
    contexts that run operators at the same time."""
    cores = cores or physical_cores()
    return max(1, (cores - max(0, taken)) // max(1, contexts))


TAKEN_VARIABLE = CORES_TAKEN  # set with the thread default when other processes held cores


def threads_chosen(environ=None):
    """True when the user chose MXNet's OpenMP threads (OMP_NUM_THREADS or
    MXNET_OMP_MAX_THREADS): gluonperf's thread default then stays out of the way."""
    environ = os.environ if environ is None else environ
    return "OMP_NUM_THREADS" in environ or "MXNET_OMP_MAX_THREADS" in environ


# Variables MXNet 1.9.1 parses when it loads or first runs (dmlc's GetEnv): anything else than a
# whole number (spaces and a sign allowed, or empty), or true/false/1/0 for the second group,
# aborts the process ("terminate called after throwing an instance of 'dmlc::ParamError'")
# or raises from the first operator; checked on MXNet 1.9.1, 2026-11-29.
MXNET_WHOLE_NUMBERS = ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "MXNET_CPU_WORKER_NTHREADS",
                       "MXNET_CPU_PRIORITY_NTHREADS", "MXNET_CPU_TEMP_COPY")
MXNET_SWITCHES = ("MXNET_MKLDNN_ENABLED", "MXNET_EXEC_BULK_EXEC_TRAIN")


def unreadable_setting(environ=None):
    """The one line that says which of those variables MXNet could not read, and what to set
    instead; None when every one that is set reads."""
    environ = os.environ if environ is None else environ
    for name in MXNET_WHOLE_NUMBERS:
        value = environ.get(name)
        if value is not None and value.strip() and not re.fullmatch(r"\s*[+-]?\d+\s*", value):
            return ("%s=%r: MXNet reads it as a whole number and stops on anything else; set a number of "
                    "threads such as %d, or unset it" % (name, value, physical_cores()))
    for name in MXNET_SWITCHES:
        value = environ.get(name)
        if value is not None and value.lower() not in ("true", "false", "1", "0"):
            return ("%s=%r: MXNet reads it as true/false (or 1/0) and stops on anything else; set 1 or 0, "
                    "or unset it" % (name, value))
    return None


def thread_settings(contexts=1, taken=0, cores=None):
    """The variables of the thread default: OMP_NUM_THREADS = `recommended_threads` with
    `taken` cores left out (at most all but one: the command keeps a core), and
    TAKEN_VARIABLE recording how many were left out, when any were."""
    cores = cores or physical_cores()
    taken = max(0, min(taken, cores - 1))
    out = {"OMP_NUM_THREADS": str(recommended_threads(contexts, cores, taken))}
    if taken:
        out[TAKEN_VARIABLE] = str(taken)
    return out


READING_SECONDS = 30.0  # how long a `busy_cores` reading stands for the machine now
_last_reading = []  # [monotonic time, cores] of this process's last `busy_cores` reading


def busy_cores(interval=0.2):
    """Cores other processes keep busy now: the machine's busy share over `interval`
    seconds, measured while this process sleeps (psutil), in cores (hyper-threads not
    counted). A load average would lag by a minute and count jobs that just ended."""
    share = psutil.cpu_percent(interval=interval) / 100.0
    busy = share * logical_cpus() * physical_cores() / max(1, psutil.cpu_count(logical=True) or 1)
    _last_reading[:] = [time.monotonic(), busy]
    return busy


def recent_busy_cores(interval=0.2):
    """`busy_cores`: this process's reading of the last READING_SECONDS when it has one (no
    second wait after the thread default's), else one measured now; None without /proc/stat."""
    if _last_reading and time.monotonic() - _last_reading[0] <= READING_SECONDS:
        return _last_reading[1]
    try:
        return busy_cores(interval)
    except (OSError, RuntimeError):  # no /proc/stat (a restricted container)
        return None


def cores_taken(interval=0.2):
    """Whole cores other processes hold now (a core counts from half busy)."""
    try:
        return int(busy_cores(interval) + 0.5)
    except (OSError, RuntimeError):  # no /proc/stat (a restricted container)
        return 0


# Temporary workspaces MXNet keeps for all CPU contexts together (MXNET_CPU_TEMP_COPY) when
# several CPU contexts run at once. Operators that use the same workspace wait for each
# other, and MXNet's default of a few workspaces, shared round-robin by every CPU context,
# serialises two contexts' work: in a traced ResNet-18 step on cpu0,cpu1 the two contexts
# ran at the same time for 11-12% of their busy time with the default, 78-80% with 16 and
# 92-94% with 64, for +5% peak memory (docs/levers.md, "Two CPU contexts that wait").
TEMP_COPY_FOR_CONTEXTS = 64


def apply_thread_defaults(contexts=1, environ=None, taken=None, processes=1):
    """Set OMP_NUM_THREADS to `recommended_threads` and, when several CPU contexts run
    at once, MXNET_CPU_TEMP_COPY to TEMP_COPY_FOR_CONTEXTS, each only when the user has
    not set it.

    The threads leave out the cores other processes hold when the command starts
    (`taken`; default: measured, `cores_taken`): an OpenMP team on a core another
    process holds waits at every barrier, and ResNet-18 training with 2 threads on 2
    cores ran at 0.47x of 1 thread while one other process was busy (docs/levers.md).

    `processes`: this command's processes on this machine (a Horovod job's), which share the
    cores as contexts do.

    Must run before MXNet is imported (MXNet reads them once, at start-up): call it at
    the top of a CLI module, before `import mxnet`. Returns a one-line note saying
    what was set, or None when nothing was (already set, or MXNet already loaded)."""
    import sys
    environ = os.environ if environ is None else environ
    if "mxnet" in sys.modules:
        return None
    notes = []
    if not threads_chosen(environ):
        cores = physical_cores()
        settings = thread_settings(contexts * processes, cores_taken() if taken is None else taken, cores)
        environ.update(settings)
        threads, taken = int(settings["OMP_NUM_THREADS"]), int(settings.get(TAKEN_VARIABLE, 0))
        free = ("" if not taken else ", %d of the %d cores being busy with other processes when it started"
                % (taken, cores))
        share = ("one thread per %score" % ("free " if taken else "") if contexts * processes == 1 else
                 "the %d %scores shared by the %d CPU contexts that run at once%s"
                 % (cores - taken, "free " if taken else "", contexts * processes,
                    "" if processes == 1 else " in the job's %d processes on this machine" % processes))
        notes.append("OMP_NUM_THREADS was unset, so gluonperf set it to %d (%s%s); MXNet's own default "
                     "would use half the processors" % (threads, share, free))
    if contexts > 1 and "MXNET_CPU_TEMP_COPY" not in environ:
        environ["MXNET_CPU_TEMP_COPY"] = str(TEMP_COPY_FOR_CONTEXTS)
        notes.append("MXNET_CPU_TEMP_COPY was unset, so gluonperf set it to %d: with MXNet's few shared "
                     "temporary workspaces the %d CPU contexts would wait for each other"
                     % (TEMP_COPY_FOR_CONTEXTS, contexts))
    return "; ".join(notes) or None


def job_processes_here(environ=None):
    """Processes of a Horovod job on this machine (HOROVOD_LOCAL_SIZE, which horovodrun sets
    for each of them), or 1 outside one."""
    environ = os.environ if environ is None else environ
    try:
        return max(1, int(environ.get("HOROVOD_LOCAL_SIZE", 1)))
    except ValueError:
        return 1


def ctx_in_argv(argv, default="cpu"):
    """The value of --ctx in a command line (`default` when absent), read before argparse."""
    spec = default
    for i, arg in enumerate(argv):
        if arg == "--ctx" and i + 1 < len(argv):
            spec = argv[i + 1]
        elif arg.startswith("--ctx="):
            spec = arg.split("=", 1)[1]
    return spec


def cpu_contexts_in_argv(argv, at_least=1):
    """How many CPU contexts a command line's --ctx names (1 when absent; at least
    `at_least`, for experiments that run more contexts than --ctx names), read before
    argparse and MXNet, so `apply_thread_defaults` can share the cores among them."""
    items = [s.strip().lower() for s in ctx_in_argv(argv).split(",") if s.strip()]
    return max(1, at_least, sum(1 for s in items if s.startswith("cpu")))

"""The wire between gluonperf and the processes it starts: the environment variables that cross
the boundary, named once, and the fresh transport (settings in as one JSON argument, the answer
back as the child's last line of stdout, a JSON object).

- the parent: `run_worker(module, settings, what)` starts `python -m <module> '<json>'` through
  `guard.run` (its own process group, stopped with the command) and returns the answer, or
  raises `WorkerFailed` ('WHAT failed: why', one line); `answer(stdout, who)` reads an answer;
- the child, a module under gluonperf/workers/: `worker_main(work, module, command)` calls
  `work(settings)` and prints what it returns.

Only the launchers start processes: `runtime/guard.py` (every child of a command, each in its own
process group, registered so that a signal or a stall stops it) and `runtime/ps_launcher.py`
(launch's parameter-server job, whose processes it supervises itself); `LAUNCHERS` names them.
multiprocessing appears elsewhere only for a temporary folder (`worker_temp`), a shared counter
(`training/image_data.py`) and shared memory (`inference/samples.py`); MXNet's DataLoader starts
its own workers.

Channels not on this wire, and why:

- the user's script (`profile --`, `tune --`): the names are here, the records files and the
  environment are `script/wire.py`'s, since a script prints what it likes on its stdout;
- tune's warm runner (`training/runners.py` `Worker`, `workers/steprate.py --serve`): `run N` on
  stdin, `{"ready": true}` then one JSON line per run: it stays up between runs;
- infer's instances (`inference/instances.py`, `workers/serving.py`): a byte-line protocol
  (`ready`, `w`/`t`, `c`/`d`, `s`, `q`), since each query's answer is on LoadGen's clock;
- infer's samples: shared memory (`inference/samples.py`), mapped by every instance, never copied;
- LoadGen runs in this process and calls back (`inference/loadgen.py`); Horovod's ranks are
  started by horovodrun (`runtime/horovod_launcher.py`): their options and files (`--out`, a plan)
  are horovodrun's, as the PS job's `DMLC_*` variables are ps-lite's.

This file needs only the standard library (json is imported where used): the package root
(`runtime/operator_code.py`) and the script's sitecustomize load it by its path.
"""
import os
import sys

PREFIX = "GLUONPERF_"                       # every name below starts with it
SCRIPT_OUT = "GLUONPERF_SCRIPT_OUT"         # profile/tune --: the folder the script's processes write into
SCRIPT_SETTINGS = "GLUONPERF_SCRIPT_SETTINGS"  # JSON: what the script's entry point is told
SCRIPT_HOOKS = "GLUONPERF_SCRIPT_HOOKS"     # module:function the script's sitecustomize calls once MXNet loads
SCRIPT_ROOT = "GLUONPERF_SCRIPT_ROOT"       # the folder that holds this gluonperf, for that import
LOCAL_WORKERS = "GLUONPERF_LOCAL_WORKERS"   # launch: the job's workers on this machine (they share its cores)
CORES_TAKEN = "GLUONPERF_CORES_TAKEN"       # cores other processes held when the thread default was chosen
PROCESS = "GLUONPERF_PROCESS"               # --processes N: which child of N this is
MALLOC = "GLUONPERF_MALLOC"                 # set when gluonperf kept glibc's freed memory (results say so)
OPERATOR_CACHE = "GLUONPERF_OPERATOR_CACHE"  # 0: MXNet compiles its operator code as usual
LOADER_DELAY = "GLUONPERF_LOADER_DELAY_S"   # tests: seconds the image loader waits per image

# the modules that start processes (tests/test_wire.py checks that no other does)
LAUNCHERS = ("gluonperf/runtime/guard.py", "gluonperf/runtime/ps_launcher.py")


class WorkerFailed(RuntimeError):
    """A child that exited non-zero or gave no answer; the message is one line."""


def answer(stdout, who):
    """The answer in a child's stdout: its last line, a JSON value. WorkerFailed naming `who`
    when it printed nothing or its last line is not JSON (it crashed half-way)."""
    import json
    lines = (stdout or "").strip().splitlines()
    if not lines:
        raise WorkerFailed("%s printed no answer" % who)
    try:
        return json.loads(lines[-1])
    except ValueError:
        raise WorkerFailed("%s gave no answer (its last line is not JSON: %.80r)" % (who, lines[-1]))


def why_failed(proc):
    """One phrase for a finished child that exited non-zero: its signal, or its last line of stderr."""
    from . import guard
    if proc.returncode < 0:
        return "killed by signal %d (out of memory?)" % -proc.returncode
    return guard.last_line(proc.stderr, "exit %d" % proc.returncode)


def run_worker(module, settings, what, timeout=None, env=None):
    """`python -m <module> '<settings as JSON>'` in a fresh process, with this gluonperf first on
    its path and `env` (a dict) added to this environment; its answer. WorkerFailed 'WHAT failed:
    why' when it fails or gives no answer; subprocess.TimeoutExpired (after killing its group)."""
    import json
    from . import guard
    proc = guard.run([sys.executable, "-m", module, json.dumps(settings)], timeout=timeout,
                     env=guard.package_env(dict(os.environ, **(env or {}))))
    if proc.returncode != 0:
        raise WorkerFailed("%s failed: %s" % (what, why_failed(proc)))
    return answer(proc.stdout, what)


def worker_main(work, module, command, argv=None):
    """A worker's `__main__`: `work(settings)` with the JSON argument `run_worker` passed, and what
    it returns (unless None) printed as one JSON line. Run by hand (no JSON argument): one line
    naming `command` to run instead, exit 2. An error: one line on stderr, exit 1."""
    import json
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].startswith("{"):
        sys.stderr.write("python -m %s: error: this module is a worker process of %s; run that (see its --help)\n"
                         % (module, command))
        sys.exit(2)
    try:
        found = work(json.loads(argv[0]))
    except Exception as e:  # noqa: BLE001 (one line for the parent, which reports it)
        from gluonperf import error_line
        sys.stderr.write("%s: %s\n" % (type(e).__name__, error_line(e)))
        sys.stderr.flush()
        sys.exit(1)
    if found is not None:
        sys.stdout.write(json.dumps(found) + "\n")
        sys.stdout.flush()

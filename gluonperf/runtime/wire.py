"""The wire between gluonperf and the processes it starts: the environment variables that cross
the boundary, named once, and the fresh transport (settings in as one JSON argument, the answer
back as the child's last line of stdout, a JSON value).

- the parent: `guard.run_worker(module, settings, what)` starts `command(module, settings)` in
  its own process group (stopped with the command) and returns `answer(stdout, who)`, or raises
  `WorkerFailed` ('WHAT failed: why', one line);
- the child, a module under gluonperf/workers/: `worker_main(work, module, command)` calls
  `work(settings)` and prints what it returns.

gluonperf's own commands run as children (`--processes N`, profile's run, compare's sides,
predict --validate's and tune's training runs) take their flags and answer with their `--json`
records, the one schema-versioned form, read with `records.files.read_jsonl`.

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
  started by horovodrun (`runtime/horovod_launcher.py`): their flags and files (`--out`, a plan)
  pass through horovodrun, as the PS job's `DMLC_*` variables are ps-lite's, read in launch's
  workers by their exit guard (`workers/launch_site/`, put first on their PYTHONPATH).

This file imports nothing of gluonperf's and only the standard library (json where used): the
package root (`runtime/operator_code.py`) and the script's sitecustomize load it by its path.
"""
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


def command(module, settings):
    """The argv that starts worker `module` (gluonperf.workers.X) with `settings` (JSON-able)."""
    import json
    return [sys.executable, "-m", module, json.dumps(settings)]


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

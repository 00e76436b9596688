"""The wire between gluonperf and the processes it starts: the environment variables that cross
the boundary, named once; the answer a child gives, one line under the wire's schema version
(`say`: {"wire": VERSION, "answer": ...}; `hear` and `answer` read it, and a child that speaks
another version is a one-line WorkerFailed); and the child's side of two transports behind one
interface, `call(settings)` -> the answer, and `close()`:

- fresh (`transport.Fresh`; `transport.run_worker` for a worker): a new process per call, the
  settings in its argv (a worker's one JSON argument, `command`, read by `worker_main`; a tune runner's
  flags), its answer its last line of stdout;
- warm (`transport.Warm`; tune's warm runners): one process, started once, that warms up, says
  `READY` and answers each request line on stdin (`request`: the settings as JSON) with one line, until
  its stdin ends (`serve`).

Either fails with WorkerFailed, 'WHAT failed: why' in one line, or with subprocess.TimeoutExpired
once the child's process group is killed. The parent's side is `runtime/transport.py`'s, whose
processes the launcher `runtime/guard.py` starts: this file starts nothing and imports only the
standard library (json where used), since the package root, the script's sitecustomize and the
benchmarks' PyTorch processes (a venv without gluonperf) load it by its path.

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
- infer's instances (`inference/instances.py`, `workers/serving.py`): a byte-line protocol
  (`ready`, `w`/`t`, `c`/`d`, `s`, `q`), since each query's answer is on LoadGen's clock;
- infer's samples: shared memory (`inference/samples.py`), mapped by every instance, never copied;
- LoadGen runs in this process and calls back (`inference/loadgen.py`); Horovod's ranks are
  started by horovodrun (`runtime/horovod_launcher.py`): their flags and files (`--out`, a plan)
  pass through horovodrun, as the PS job's `DMLC_*` variables are ps-lite's, read in launch's
  workers by their exit guard (`workers/launch_site/`, put first on their PYTHONPATH).
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

VERSION = 1                                 # the schema version of what a child answers (`say`)
READY = {"ready": True}                     # a warm child's first answer, once it has warmed up

# the modules that start processes (tests/test_wire.py checks that no other does)
LAUNCHERS = ("gluonperf/runtime/guard.py", "gluonperf/runtime/ps_launcher.py")


class WorkerFailed(RuntimeError):
    """A child that exited non-zero or gave no answer; the message is one line."""


def say(found):
    """The line (without its newline) a child prints to answer: `found`, any JSON value, under the
    wire's schema version, {"wire": VERSION, "answer": found}."""
    import json
    return json.dumps({"wire": VERSION, "answer": found})


def hear(line, who):
    """The answer in one line a child printed (`say`). WorkerFailed naming `who` when the line is not
    JSON (it crashed half-way) or not this wire's version."""
    import json
    try:
        said = json.loads(line)
    except ValueError:
        raise WorkerFailed("%s gave no answer (not JSON: %.80r)" % (who, line.strip()))
    version = said.get("wire") if isinstance(said, dict) and "answer" in said else None
    if version != VERSION:
        raise WorkerFailed("%s speaks %s, this gluonperf wire version %d (%.80r)"
                           % (who, "no wire version" if version is None else "wire version %r" % (version,),
                              VERSION, line.strip()))
    return said["answer"]


def answer(stdout, who):
    """The answer in a fresh child's stdout: its last line (`hear`). WorkerFailed naming `who` when it
    printed nothing, or its last line is not the wire's."""
    lines = (stdout or "").strip().splitlines()
    if not lines:
        raise WorkerFailed("%s printed no answer" % who)
    return hear(lines[-1], who)


def request(settings):
    """The line a parent writes on a warm child's stdin to ask for one answer: `settings` as JSON."""
    import json
    return json.dumps(settings) + "\n"


def serve(work, ready=READY, stdin=None, stdout=None):
    """A warm child's loop, once it has warmed up: says `ready`, then answers every request line on
    stdin (`request`) with `say(work(settings))`, until stdin ends or a line is blank. An error in
    `work` is the child's (it exits, and the parent reports its last line of stderr)."""
    import json
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    stdout.write(say(ready) + "\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            break
        stdout.write(say(work(json.loads(line))) + "\n")
        stdout.flush()


def command(module, settings):
    """The argv that starts worker `module` (gluonperf.workers.X) with `settings` (JSON-able)."""
    import json
    return [sys.executable, "-m", module, json.dumps(settings)]


def worker_main(work, module, command, argv=None):
    """A worker's `__main__`: `work(settings)` with the JSON argument `run_worker` passed, and what
    it returns (unless None) printed as one line (`say`). Run by hand (no JSON argument): one line
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
        sys.stdout.write(say(found) + "\n")
        sys.stdout.flush()

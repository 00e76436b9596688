"""The wire between gluonperf and the processes it starts: every GLUONPERF_ variable, named once;
a child's one-line answer under VERSION (`say`; `hear`, `answer` read it); the child's side of the
transports (`worker_main`, `serve`). Loaded by its path: starts nothing, imports only the stdlib.
Only `LAUNCHERS` start processes: runtime/guard.py (each child in its own process group) and
runtime/ps_launcher.py (launch's job). Not on this wire, and why (docs/internals.md, "The wire"):

- the user's script (`profile --`, `tune --`): script/wire.py, as it prints what it likes;
- gluonperf's commands run as children: flags in, `--json` records out, already versioned;
- infer's instances: a byte-line protocol (inference/instances.py), each answer on LoadGen's clock;
- infer's samples: shared memory (inference/samples.py), mapped by every instance, never copied;
- LoadGen: runs in this process and calls back (inference/loadgen.py);
- Horovod's ranks: started by horovodrun, which passes their flags and files (`--out`, a plan);
- the PS job's `DMLC_*` variables: ps-lite's, read by the workers' exit guard (launch_site/);
- DataLoader workers: MXNet starts them (a shared counter: training/image_data.py; worker_temp).
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

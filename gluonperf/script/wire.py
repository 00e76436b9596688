"""The wire between gluonperf's process and the user's script it runs: the one place that names
the environment variables and the entry points, builds the child's environment (for `profile
--` and `tune --` alike), writes (in the child) and reads (in the parent) the records the
child leaves.

The parent starts the user's command with `environment(out_dir, entry, settings)`: this
environment, gluonperf's hooks first on PYTHONPATH (gluonperf/workers/script_site, whose
sitecustomize reads ENV_HOOKS, ENV_ROOT and ENV_OUT, named in gluonperf/runtime/wire.py as every
variable that crosses a process boundary is) and the settings as JSON in ENV_SETTINGS. Once the script has imported MXNet,
the sitecustomize calls `entry` (PROFILE: script/driver.py, TUNE: script/listener.py), which
reads `settings()` and writes through a `Writer`: one JSON object a line, each with its `kind`,
into `<ENV_OUT>/<pid>.jsonl`, flushed a line at a time (a script that raises or is stopped
leaves what was measured); the sitecustomize leaves `<pid>.site` in every Python process it
ran in. `read_runs(out_dir)` gives the parent each process's records.
"""
import json
import os

from ..runtime import guard
from ..runtime.wire import SCRIPT_HOOKS as ENV_HOOKS, SCRIPT_OUT as ENV_OUT, SCRIPT_ROOT as ENV_ROOT
from ..runtime.wire import SCRIPT_SETTINGS as ENV_SETTINGS
PROFILE = "gluonperf.script.driver:install"    # profile --'s driver
TUNE = "gluonperf.script.listener:install"     # tune --'s listener
SITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(guard.__file__))), "workers",
                    "script_site")  # the hooks' sitecustomize


def split_argv(argv):
    """(gluonperf's flags, the user's command) of an argv holding `--`."""
    at = argv.index("--")
    return argv[:at], argv[at + 1:]


def environment(out_dir, entry, settings, env=()):
    """The environment of the user's command: this one, with `env` ((name, value) pairs: a
    candidate's variables), gluonperf's hooks first on PYTHONPATH (the user's PYTHONPATH after
    them), and what the hooks read."""
    out = dict(os.environ)
    out.update(dict(env))
    out["PYTHONPATH"] = os.pathsep.join(p for p in (SITE, os.environ.get("PYTHONPATH")) if p)
    out.update({ENV_OUT: out_dir, ENV_SETTINGS: json.dumps(settings), ENV_HOOKS: entry, ENV_ROOT: guard.PACKAGE_ROOT})
    return out


# --- in the child -------------------------------------------------------------------------

def settings():
    """What the parent told the entry point (`environment`'s settings)."""
    return json.loads(os.environ.get(ENV_SETTINGS) or "{}")


def plain(value):
    """JSON for numpy scalars (their Python value) and anything else (its text)."""
    return value.item() if hasattr(value, "item") else str(value)


class Writer:
    """The child's records: `write(kind=..., **fields)`, a line of `<out_dir>/<pid>.jsonl` at a
    time, flushed; nothing from a forked process (a DataLoader's worker)."""

    def __init__(self, out_dir=None):
        self.pid = os.getpid()
        self.folder = out_dir or os.environ[ENV_OUT]
        self.out = open(os.path.join(self.folder, "%d.jsonl" % self.pid), "a")

    def write(self, **line):
        if os.getpid() != self.pid:  # a forked DataLoader worker
            return
        self.out.write(json.dumps(line, default=plain) + "\n")
        self.out.flush()

    def flush(self):
        self.out.flush()


# --- in the parent ------------------------------------------------------------------------

def read_runs(out_dir):
    """What each process of the script wrote: a list of runs (dicts: pid, steps (every `step`
    line), errors (every `error` line) and, by kind, the last line of each other kind without its
    `kind`), in the order of their files' names; and the pids in which the hooks' sitecustomize
    ran (`<pid>.site`), whether or not they imported MXNet."""
    runs, sites = [], []
    for name in sorted(os.listdir(out_dir)):
        pid, _, ext = name.partition(".")
        if ext == "site":
            sites.append(int(pid))
        if ext != "jsonl":
            continue
        run = {"pid": int(pid), "steps": [], "errors": []}
        with open(os.path.join(out_dir, name)) as f:
            for text in f:
                try:
                    line = json.loads(text)
                except ValueError:  # the last line of a process killed while writing it
                    continue
                kind = line.pop("kind", None)
                if kind == "step":
                    run["steps"].append(line)
                elif kind == "error":
                    run["errors"].append(line)
                elif kind:
                    run[kind] = line
        runs.append(run)
    return runs, sites

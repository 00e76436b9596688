"""The script's runner for tuning (`tune -- python train.py`): it spawns the user's command for
a candidate, in a fresh process with the hooks, and reads the images/s the listener timed; it
never times anything itself. It answers tuning's runner protocol (gluonperf/tuning/runner.py)
without importing tuning: the command hands it to the search.

`probe(...)`: the first run of the script as it is, which also describes it (its Trainer, the
model, its DataLoaders, the waits and the operators: script/listener.py); its records decide
which levers run (`ScriptRunner.levers`, script/levers.py).
"""
import os
import subprocess

from ..runtime import guard
from . import levers, wire
from .text import shown


class ScriptRunner:
    """Runs the user's command for a candidate (a candidate: environment variables, and the
    listener's changes as flags) and reads its images/s. Keeps every finished run's record by
    candidate name (`runs`), the waits with them; after `probe`, the probe's records (`found`)."""
    name = "the script"
    baseline = "as it is"
    warm = False  # every run is a fresh process, stopped after its timed steps

    def __init__(self, command, warmup, steps, cwd=None, min_seconds=0.0, window=None):
        self.command, self.warmup, self.steps = list(command), warmup, steps
        self.min_seconds = min_seconds  # the probe's; the runs after it time the steps the probe timed
        self.window = window            # the probe's: "startup" times at least as long as the start-up took
        self.cwd = cwd or os.getcwd()
        self.runs = {}
        self.found = {}

    def settings(self, flags, probe=False):
        """What the listener is told (wire.ENV_SETTINGS): the candidate's changes (`flags`) among them."""
        return {"warmup": self.warmup, "steps": self.steps, "probe": probe,
                "min_seconds": self.min_seconds if probe else 0, "window": self.window if probe else None,
                "levers": {k: _value(v) for k, v in flags}}

    def run(self, env, flags, timeout, probe=False):
        """One run under a candidate's variables (`env`) and changes (`flags`): (its records by kind,
        the CompletedProcess or None, an error or None)."""
        with guard.temp_dir(prefix="gluonperf-tune-") as tmp:
            env = wire.environment(tmp, wire.TUNE, self.settings(flags, probe), env)
            try:
                done = guard.run(self.command, env=env, cwd=self.cwd, timeout=timeout)
            except subprocess.TimeoutExpired:
                return {}, None, "timed out after %ds" % timeout
            lines = timed_run(wire.read_runs(tmp)[0])
        if "rate" in lines:
            return lines, done, None
        if done.returncode != 0:
            return lines, done, "exit %d: %s" % (done.returncode, guard.last_line(done.stderr, "no message"))
        seen = lines.get("exit", {}).get("steps_seen")
        if seen is None:
            return lines, done, ("the script never imported MXNet under gluonperf's hooks" if not lines else
                                 "the script ended before its steps were counted")
        return lines, done, ("the script ended after %d Trainer.step calls, before the %d tune needs (--warmup %d, "
                             "--steps %d)" % (seen, self.warmup + self.steps, self.warmup, self.steps))

    # the runner protocol (gluonperf/tuning/runner.py)

    def measure(self, candidate, steps, timeout):
        """(images_per_s, None) or (None, one-line error) of one run of the script under `candidate`
        (it times the steps the probe timed: `steps` is not read)."""
        lines, _, error = self.run(candidate.env, candidate.flags, timeout)
        if error:
            return None, error
        self.runs.setdefault(candidate.name, []).append(lines["rate"])
        return lines["rate"]["images_per_s"], None

    def start(self, candidate, timeout):
        raise ValueError("the script's runs are fresh processes: it has no warm worker")

    def command_line(self, candidate, steps=None):
        import shlex
        env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in candidate.env)
        changes = ", ".join("%s=%s" % kv for kv in candidate.flags)
        line = (env + " " if env else "") + shown(self.command)
        return line + (" (with %s)" % changes if changes else "")

    def levers(self, cores, only=None, environ=None, threshold=None, bounds=True):
        """The levers that can change something in this script here (script/levers.py), from what the
        probe found: (stages, {lever: why it has nothing to try})."""
        extra = {} if threshold is None else {"threshold": threshold}
        return levers.script_levers(self.found.get("probe", {}), cores, only, environ,
                                    measured=dict(self.found, runs=self.runs),
                                    bounds=bounds, **extra)

    def threads(self, contexts):
        return None  # the script runs with the thread settings it is given

    def takes(self, setting):
        return False  # tune --model's settings (optimizer, dataset) are the script's own business


def _value(text):
    """A flag's text as the in-script value: whole numbers as ints, else the text."""
    try:
        return int(text)
    except ValueError:
        return text


def timed_run(runs):
    """The records of the process that timed the steps (or of the first process that wrote any),
    by kind; {} when no process wrote any."""
    wrote = [run for run in runs if set(run) - {"pid", "steps", "errors"}]
    return next((run for run in wrote if "rate" in run), wrote[0] if wrote else {})


def probe(command, warmup, steps, timeout, cwd=None, min_seconds=1.0, window=None):
    """One run of the script as it is, describing it and timing at least `steps` steps and
    `min_seconds` seconds (or every step the script has, if fewer): (runner, the probe's records,
    the CompletedProcess, an error or None). The runner then times as many steps as the probe did
    (fewer when the probe reached the script's end, so that every run stops inside the script)."""
    runner = ScriptRunner(command, warmup, steps, cwd, min_seconds, window)
    lines, done, error = runner.run((), (), timeout, probe=True)
    runner.found = lines
    if not error:
        timed = lines["rate"]["steps"]
        runner.steps = max(steps, timed - 1 if lines["rate"].get("at_exit") else timed)
    return runner, lines, done, error

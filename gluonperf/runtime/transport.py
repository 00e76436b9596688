"""The wire's two transports behind one interface, `call(settings)` -> the answer, and `close()`
(runtime/wire.py says what travels): `Fresh`, a new process per call, and `Warm`, one process
started once that answers request after request; `run_worker` runs a gluonperf worker fresh.
Their processes are started by the launcher, `runtime/guard.py` (`run`, `popen`: each in its
own process group, stopped with the command).
"""
import os
import select
import subprocess
import tempfile

from . import wire
from .guard import kill_group, package_env, popen, run, why_failed


class Fresh:
    """The wire's fresh transport (runtime/wire.py): every `call(settings)` runs `argv(settings)` in a
    new process through `run` (its own process group, killed whole on a timeout), in `env` and `cwd`,
    and returns its answer, `read(stdout)` (default: `wire.answer`, its last line). wire.WorkerFailed
    'WHAT failed: why' when it exits non-zero; subprocess.TimeoutExpired after `timeout` seconds,
    once it is killed. `close()` has nothing to stop."""

    def __init__(self, argv, what, timeout=None, env=None, cwd=None, read=None):
        self.argv, self.what, self.timeout, self.env, self.cwd = argv, what, timeout, env, cwd
        self.read = read or (lambda stdout: wire.answer(stdout, what))

    def call(self, settings):
        proc = run(self.argv(settings), timeout=self.timeout, env=self.env, cwd=self.cwd)
        if proc.returncode != 0:
            raise wire.WorkerFailed("%s failed: %s" % (self.what, why_failed(proc)))
        return self.read(proc.stdout)

    def close(self):
        pass


class Warm:
    """The wire's warm transport (runtime/wire.py): `argv` started once (`popen`: its own process
    group) in `env` and `cwd`; it warms up and says it is ready (`wire.serve`; its answer is
    `ready`). Every `call(settings)` writes `wire.request(settings)` on its stdin and returns the
    answer it prints (`wire.hear`). Each line is awaited at most `timeout` seconds: then its group
    is killed and subprocess.TimeoutExpired raised; wire.WorkerFailed 'WHAT failed: why' when it
    exited, or naming WHAT when it printed what is not the wire's (one line). A failure (in the
    warm-up too, which does not raise: `ready` is then None) kills its group, and every later call
    raises it again. `close()`: its stdin closed, its exit awaited (60 s), its group killed."""

    def __init__(self, argv, what, timeout, env=None, cwd=None):
        self.argv, self.what, self.timeout = argv, what, timeout
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = popen(argv, env=env, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                          text=True, bufsize=1)
        self.failed = None
        self.ready = self._next_or_keep()

    def call(self, settings):
        if self.failed is None:
            self._send(settings)
            found = self._next_or_keep()
            if self.failed is None:
                return found
        raise self.failed

    def _next_or_keep(self):
        """The child's next answer (`_next`), or None with the failure kept in `failed` and the child's
        group killed: a child that failed once is not asked again."""
        try:
            return self._next()
        except (wire.WorkerFailed, subprocess.TimeoutExpired) as e:
            self.failed = e
            kill_group(self.proc)
            return None

    def _send(self, settings):
        try:
            self.proc.stdin.write(wire.request(settings))
            self.proc.stdin.flush()
        except OSError:  # it exited (a broken pipe): its exit says why
            pass

    def _next(self):
        """The child's next answer; WorkerFailed once it exited or spoke off the wire; TimeoutExpired
        (its group killed) when no line came within `timeout`."""
        if not select.select([self.proc.stdout], [], [], self.timeout)[0]:
            kill_group(self.proc)
            raise subprocess.TimeoutExpired(self.argv, self.timeout)
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            self.err.seek(0)
            ended = subprocess.CompletedProcess(self.argv, self.proc.returncode, None, self.err.read())
            raise wire.WorkerFailed("%s failed: %s" % (self.what, why_failed(ended)))
        return wire.hear(line, self.what)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass
        kill_group(self.proc)  # also reaps it, and anything it started
        self.err.close()


def run_worker(module, settings, what, timeout=None, env=None):
    """Worker `module` (gluonperf.workers.X) with `settings` in a fresh process (`Fresh`, `wire.command`),
    with this gluonperf first on its path and `env` (a dict) added to this environment; its answer
    (`wire.answer`). wire.WorkerFailed 'WHAT failed: why' when it fails or gives no answer;
    subprocess.TimeoutExpired after killing it."""
    env = package_env(dict(os.environ, **(env or {})))
    return Fresh(lambda s: wire.command(module, s), what, timeout, env).call(settings)

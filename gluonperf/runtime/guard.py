"""What keeps a gluonperf command from hanging silently or leaving things behind.

- `StallGuard`: a watchdog thread (a hung MXNet call never returns to Python); commands `beat`
  (every `cli.progress_bar` update), and after `timeout` seconds without one the command stops
  with one line naming what it waited on, exit code 3.
- `popen` / `run` / `run_all`: children in their own session (process group), registered so that
  `cleanup` stops them and theirs (the wire's transports, runtime/transport.py, use them).
- `temp_dir` / `temp_path`: temporary paths registered for removal.
- `install_signal_handlers`: SIGINT, SIGTERM, SIGHUP handled by a thread (`signal.set_wakeup_fd`),
  so they work while MXNet blocks; `on_stop`: what a command still writes when it is stopped.
- `run_foreground`: a child that owns the terminal (`profile --`'s script), signals passed on.

Nothing here imports MXNet. What a user sees: docs/measuring.md, "Common to every command".
"""
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

STALL_EXIT = 3
DEFAULT_STALL_TIMEOUT = 300.0

_lock = threading.RLock()
_children = set()
_temp_paths = set()
_guard = None
_stopping = threading.Event()  # set by `cleanup` when the process is about to exit
_on_stop = []  # what a stopped command still does first (`on_stop`, run by `run_on_stop`)
KEEP_TIMEOUT = 60.0  # seconds an on_stop function may take before the process exits without it


def hold_if_stopping():
    """Once the process is stopping (signal, stall), the main thread must not start a
    new child or make a new temporary path behind cleanup's back, nor report as a failure a
    child that cleanup killed (`bench engines` said "the run of engine horovod failed (exit
    143)" and exited 2 on Ctrl-C): it waits for the exit the stopping thread makes."""
    if _stopping.is_set() and threading.current_thread() is threading.main_thread():
        threading.Event().wait()


# --- children and temporary paths -------------------------------------------------

def popen(argv, **kwargs):
    """subprocess.Popen in a new session (its own process group), registered for `cleanup`."""
    while True:
        hold_if_stopping()  # outside the lock: cleanup needs it
        with _lock:  # registered before cleanup's snapshot, or not started at all
            if not _stopping.is_set():
                proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
                _children.add(proc)
                return proc


def kill_group(proc, grace=2.0):
    """SIGTERM the child's process group, SIGKILL it after `grace` seconds, and reap the child."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=grace)
            if sig == signal.SIGTERM:  # the leader is gone; grandchildren of the group may not be
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            break
        except subprocess.TimeoutExpired:
            continue
    with _lock:
        _children.discard(proc)


def run(argv, timeout=None, **kwargs):
    """Like subprocess.run(capture_output=True, text=True) but the child runs in its own
    process group, which is killed whole on a timeout, an error or a signal.
    Raises subprocess.TimeoutExpired after killing it."""
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        kill_group(proc)
        raise
    finally:
        with _lock:
            _children.discard(proc)
    _kill_what_is_left(proc)
    hold_if_stopping()  # a signal or a stall is stopping the command, which killed this child: its end is moot
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_what_is_left(proc):
    """A finished child may have left processes of its own in its group: kill them."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_all(argvs, timeout=None, **kwargs):
    """`run` for several children started at once (to run side by side): each in its own
    process group, its stderr kept (in a temporary file, so that no child waits on a full pipe
    while another is read) and its stdout dropped. Waits for all of them; on a timeout (all of
    them share `timeout`), an error or a signal, kills every group left and raises
    (subprocess.TimeoutExpired on a timeout). Returns a CompletedProcess per child, in order."""
    deadline = None if timeout is None else time.monotonic() + timeout
    procs, errs = [], []
    try:
        for argv in argvs:
            errs.append(tempfile.TemporaryFile(mode="w+"))
            procs.append(popen(argv, stdout=subprocess.DEVNULL, stderr=errs[-1], text=True, **kwargs))
        for proc in procs:
            proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        hold_if_stopping()  # killed because the command is being stopped: not a failure to report
        done = []
        for argv, proc, err in zip(argvs, procs, errs):
            err.seek(0)
            done.append(subprocess.CompletedProcess(argv, proc.returncode, None, err.read()))
        return done
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill_group(proc)
            else:
                _kill_what_is_left(proc)
            with _lock:
                _children.discard(proc)
        for err in errs:
            err.close()


def last_line(text, default):
    """The last non-blank line of a process's stderr (where a failing gluonperf command
    puts its one-line error), or `default` when there is none."""
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1] if lines else default


def why_failed(proc):
    """One phrase for a finished child that exited non-zero: its signal, or its last line of stderr."""
    if proc.returncode < 0:
        return "killed by signal %d (out of memory?)" % -proc.returncode
    return last_line(proc.stderr, "exit %d" % proc.returncode)


PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def package_env(env=None, drop=()):
    """The environment of a child that runs gluonperf: `env` (default this process's) without
    the variables whose names start with one of `drop`, and with this gluonperf first on
    PYTHONPATH, so that the child imports the same gluonperf (a checkout or an install)."""
    drop = tuple(drop)
    out = {k: v for k, v in (os.environ if env is None else env).items() if not (drop and k.startswith(drop))}
    out["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_ROOT, out.get("PYTHONPATH")) if p)
    return out


@contextlib.contextmanager
def temp_dir(prefix="gluonperf-", **kwargs):
    """A temporary directory removed on exit, on a signal and on a stall."""
    path = None
    while path is None:
        hold_if_stopping()
        with _lock:
            if not _stopping.is_set():
                path = tempfile.mkdtemp(prefix=prefix, **kwargs)
                _temp_paths.add(path)
    with temp_path(path):
        yield path


@contextlib.contextmanager
def temp_path(path):
    """Register `path` (file or directory) for removal by `cleanup`; removes it on exit."""
    with _lock:
        _temp_paths.add(path)
    try:
        yield path
    finally:
        _remove(path)
        with _lock:
            _temp_paths.discard(path)


def _remove(path):
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


def cleanup(stopping=False):
    """Stop every registered child (process groups) and remove every registered path.
    `stopping`: the process exits next; from now on no new child or path is made."""
    with _lock:
        if stopping:
            _stopping.set()
        children, paths = list(_children), list(_temp_paths)
    for proc in children:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    for proc in children:
        kill_group(proc, grace=2.0)
    for path in paths:
        _remove(path)
    if stopping:  # the exit is os._exit, which skips multiprocessing's removal of its folder (DataLoader workers')
        from .worker_temp import remove_now
        remove_now()


@contextlib.contextmanager
def on_stop(fn):
    """While inside this block, a signal or a stall that stops the process first calls `fn()`,
    from the thread that stops it, with the main thread held: how a long command keeps the
    results it has finished. `fn` returns a line to print on stderr, or None."""
    with _lock:
        _on_stop.append(fn)
    try:
        yield
    finally:
        with _lock:
            _on_stop.remove(fn)


def stopping():
    """True once a signal or a stall is stopping the process (its children are being killed:
    a run that ends now failed because of it)."""
    return _stopping.is_set()


def run_on_stop(timeout=None):
    """Mark the process as stopping, then run the `on_stop` functions; the lines they return.
    An error in one is one of the lines: the process is exiting anyway. Each runs in a
    thread of its own, given `timeout` seconds (default KEEP_TIMEOUT): a function stuck on
    a hung MXNet must not turn a stall or a Ctrl-C into a process that never exits."""
    with _lock:
        _stopping.set()
        fns = list(_on_stop)
    timeout = KEEP_TIMEOUT if timeout is None else timeout
    lines = []
    for fn in fns:
        out = {}

        def call(fn=fn, out=out):
            try:
                out["line"] = fn()
            except Exception as e:  # noqa: BLE001 (a full disk must not keep the children running)
                out["line"] = "could not keep the finished results: %s: %s" % (type(e).__name__, e)
        worker = threading.Thread(target=call, name="gluonperf-keep", daemon=True)
        worker.start()
        worker.join(timeout)
        line = out.get("line") if not worker.is_alive() else (
            "could not keep the finished results: still writing after %g s" % timeout)
        if line:
            lines.append(line)
    return lines


# --- the stall guard ----------------------------------------------------------------

def threads_in_force():
    """The thread settings in force, as one phrase for an error line."""
    from .threads import omp_threads
    names = ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE",
             "MXNET_CPU_TEMP_COPY")
    shown = ["%s=%s" % (n, os.environ[n]) for n in names if n in os.environ]
    return "%s (%d OpenMP thread(s) per operator)" % (", ".join(shown) or "no thread variables set",
                                                       omp_threads())


def where_main_waits(depth=3):
    """'waitall (mxnet/ndarray/ndarray.py:211) from gluonperf/measure/harness.py:26 sync <- ...'."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    if frame is None:
        return "an unknown place"
    ours = []
    f = frame
    while f is not None:
        path = f.f_code.co_filename.replace(os.sep, "/")
        if "/gluonperf/" in path and not path.endswith(("/gluonperf/runtime/guard.py", "/gluonperf/cli/common.py")):
            ours.append("gluonperf/%s:%d %s" % (path.rsplit("/gluonperf/", 1)[1], f.f_lineno, f.f_code.co_name))
        f = f.f_back
    path = frame.f_code.co_filename.replace(os.sep, "/")
    text = "%s (%s:%d)" % (frame.f_code.co_name, "/".join(path.split("/")[-3:]), frame.f_lineno)
    if ours and "/gluonperf/" in path and ours[0].startswith("gluonperf/" + path.rsplit("/gluonperf/", 1)[1]):
        ours = ours[1:]
    if ours:
        text += " from " + " <- ".join(ours[:depth])
    return text


class StallGuard:
    """Exit with STALL_EXIT when `beat` has not been called for `timeout` seconds."""

    def __init__(self, timeout, prog, poll=None):
        self.timeout, self.prog = float(timeout), prog
        self.poll = poll or min(1.0, self.timeout / 4)
        self.what = "start-up"
        self.last = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="gluonperf-stall-guard", daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()

    def beat(self, what=None):
        self.last = time.monotonic()
        if what:
            self.what = what

    def _watch(self):
        while not self._stop.wait(self.poll):
            idle = time.monotonic() - self.last
            if idle > self.timeout:
                where = where_main_waits()  # before the main thread is held
                try:
                    kept = run_on_stop()
                    message = ("%s: stalled: no progress for %.0f s while %s; the main thread waits in %s; "
                               "thread settings: %s. %s If a step is just slow, raise --stall-timeout"
                               % (self.prog, idle, self.what, where, threads_in_force(),
                                  "; ".join(kept) + "." if kept else "Nothing was written."))
                    sys.stderr.write("\n" + message + "\n")
                    sys.stderr.flush()
                finally:
                    cleanup(stopping=True)
                    os._exit(STALL_EXIT)


def start_stall_guard(timeout, prog):
    """Start the process's stall guard (replacing an earlier one); timeout 0 turns it off."""
    global _guard
    if _guard is not None:
        _guard.stop()
    _guard = StallGuard(timeout, prog).start() if timeout and timeout > 0 else None
    return _guard


def stop_stall_guard():
    start_stall_guard(0, "")


def beat(what=None):
    """Report progress to the stall guard (a no-op without one)."""
    if _guard is not None:
        _guard.beat(what)


# --- signals --------------------------------------------------------------------------

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_installed = False


def install_signal_handlers(prog):
    """On SIGINT, SIGTERM or SIGHUP: one line, stop every child, remove temporary paths,
    exit 128 + signal number. Works while the main thread is blocked in C code (a Python
    handler alone would only run once it returns). Main thread only; idempotent."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    for sig in _SIGNALS:
        signal.signal(sig, lambda signum, frame: None)  # the watcher thread acts
    signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def watch():
        while True:
            data = os.read(read_fd, 1)
            if not data:
                return
            signum = data[0]
            if signum not in [int(s) for s in _SIGNALS]:
                continue
            name = signal.Signals(signum).name
            try:
                kept = run_on_stop()
                sys.stderr.write("\n%s: %s received; stopped%s\n"
                                 % (prog, name, " its child processes too" if _children else ""))
                for line in kept:
                    sys.stderr.write("%s: %s\n" % (prog, line))
                sys.stderr.flush()
            finally:
                cleanup(stopping=True)
                os._exit(128 + signum)

    threading.Thread(target=watch, name="gluonperf-signals", daemon=True).start()
    os.register_at_fork(after_in_child=_default_signals)
    _installed = True


def _default_signals():
    """In a forked child (a DataLoader worker process): the default handlers, and no wake-up fd.
    Inherited, they made the child ignore the SIGTERM its pool stops it with (the pool then
    waits for ever) and wrote that signal into the parent's pipe, whose watcher then stopped
    the parent as if it had received it."""
    if threading.current_thread() is threading.main_thread():
        signal.set_wakeup_fd(-1)
        for sig in _SIGNALS:
            signal.signal(sig, signal.SIG_DFL)


# --- a child in the foreground -------------------------------------------------------------

FOREGROUND_GRACE = 10.0  # seconds a foreground child gets to end after a signal is passed on, before SIGTERM, SIGKILL


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_foreground(command, env, timeout=0, grace=FOREGROUND_GRACE):
    """Run `command` in its own session with this terminal's input and output; pass SIGINT,
    SIGTERM and SIGHUP on to its group (a second signal: SIGKILL at once); after `grace` seconds
    SIGTERM, then SIGKILL; after `timeout` seconds (0: never), SIGINT as Ctrl-C would. Whatever
    it left in its group is killed once it ends. Returns (Popen, the signal that stopped it or
    None, whether `timeout` did). FileNotFoundError / PermissionError when it cannot start."""
    got, first, child = [], [], []  # the signals received; when the first came; the child, once started

    def forward(signum, frame):
        got.append(signum)
        first[:] = first or [time.monotonic()]
        if child:
            _signal_group(child[0].pid, signum if len(got) == 1 else signal.SIGKILL)  # a second Ctrl-C: at once
    previous = {s: signal.signal(s, forward) for s in _SIGNALS}  # before the child starts: none is missed
    try:
        proc = subprocess.Popen(command, env=env, start_new_session=True)
        child.append(proc)
        if got:
            _signal_group(proc.pid, got[0])
        started, timed_out, escalated = time.monotonic(), False, 0
        while proc.poll() is None:
            try:
                proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass
            now = time.monotonic()
            if timeout and not got and now - started > timeout:
                timed_out = True
                forward(signal.SIGINT, None)
            if first and escalated < 2 and now - first[0] > grace * (escalated + 1):
                escalated += 1  # the child did not end: SIGTERM, then SIGKILL
                _signal_group(proc.pid, signal.SIGTERM if escalated == 1 else signal.SIGKILL)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    _signal_group(proc.pid, signal.SIGKILL)  # what the child left behind in its group (DataLoader workers)
    return proc, (got[0] if got and not timed_out else None), timed_out


def status_code(returncode):
    """A shell-style exit status: the code, or 128 + the signal's number."""
    return 128 - returncode if returncode < 0 else returncode

"""Writing an output file (--json, --csv, --plot, --trace, -o) so that nothing is lost and
nothing that is not gluonperf's is replaced.

A regular file or a new path is written atomically (a temporary file in its directory, made if
missing, renamed over it; the user's umask), a symlink onto its target (the link stays); anything
else (a pipe, a FIFO, a device, /dev/stdout, /dev/fd/N) straight through, never replaced, and one
of this process's own descriptors after what Python buffered for it. `output_problem(path)`
checks before work; `write_output(path, data)` writes bytes; `staging_file` / `move_into_place`
give another writer (MXNet's profiler) a file, then put it where `path` says.

Every write error is an `OutputError` (an OSError) naming `path`, for `cli.run` to make one line.
Nothing here imports MXNet.
"""
import errno
import os
import re
import stat
import sys
import tempfile

from . import guard

_LINKS_FOLLOWED = 40  # as the kernel's own limit (ELOOP)
_OWN_FD_DIR = re.compile(r"/proc/(\d+)(?:/task/\d+)?/fd")


class OutputError(OSError):
    """An output file could not be written; `filename` is the path the user gave."""


class _Plan:
    """How `path` is written: `directory` (a directory is there: not writable as a file),
    `through` (straight through, not renamed over), `fd` (one of this process's own
    descriptors), `target` (the path after symlinks: what an atomic write renames onto)."""

    def __init__(self, target, through=False, fd=None, directory=False):
        self.target, self.through, self.fd, self.directory = target, through, fd, directory


def _in_proc(directory):
    return directory == "/proc" or directory.startswith("/proc/")


def _own_fd(directory, name):
    """The descriptor `directory`/`name` names when it is this process's /proc/PID/fd/N, else None."""
    match = _OWN_FD_DIR.fullmatch(directory)
    if not match or int(match.group(1)) != os.getpid() or not name.isdigit():
        return None
    try:
        os.fstat(int(name))
    except OSError:
        return None
    return int(name)


def _plan(path):
    """Follow `path`'s symlinks one at a time and decide how it is written. Raises OSError
    (ELOOP) for a symlink loop."""
    p = os.path.abspath(path)
    for _ in range(_LINKS_FOLLOWED):
        directory = os.path.realpath(os.path.dirname(p))
        name = os.path.basename(p)
        p = os.path.join(directory, name)
        if _in_proc(directory):  # /dev/stdout, /dev/fd/N: a link under /proc names an open file, not a path
            fd = _own_fd(directory, name)
            return _Plan(p, through=fd is not None or os.path.exists(p), fd=fd)
        if not os.path.islink(p):
            break
        p = os.path.join(directory, os.readlink(p))
    else:
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
    try:
        mode = os.stat(p).st_mode
    except OSError:  # a new path (or one under a regular file: the writable-directory check says so)
        return _Plan(p)
    if stat.S_ISDIR(mode):
        return _Plan(p, directory=True)
    return _Plan(p, through=not stat.S_ISREG(mode))


def output_problem(path):
    """Why `path` cannot be written as an output file, as the words that follow it in an
    error ("is a directory; give a file path", "cannot be written (...)"), or None when it can.
    For an atomic write, the directory that will hold the temporary file is tried for real
    (a temporary file made and removed, or a temporary directory where directories are
    missing): a permission check says yes to root in /proc or on a read-only mount."""
    try:
        plan = _plan(path)
    except OSError as e:
        return "cannot be written (%s)" % (e.strerror or e)
    if plan.directory:
        return "is a directory; give a file path"
    if plan.through:
        if plan.fd is not None:
            import fcntl
            if fcntl.fcntl(plan.fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                return "cannot be written (descriptor %d is open for reading only)" % plan.fd
            return None
        return None if os.access(plan.target, os.W_OK) else "cannot be written (permission denied)"
    return directory_problem(os.path.dirname(plan.target))


def directory_problem(directory):
    """Why files cannot be made in `directory` (made, with its missing parents, if it does not
    exist), as in `output_problem`, or None when they can."""
    directory = os.path.abspath(directory)
    existing = directory
    while not os.path.lexists(existing):
        existing = os.path.dirname(existing)
    try:
        if existing == directory and os.path.isdir(directory):
            fd, probe = tempfile.mkstemp(dir=directory, prefix=".tmp-probe-")
            os.close(fd)
            os.unlink(probe)
        else:
            os.rmdir(tempfile.mkdtemp(dir=existing, prefix=".tmp-probe-"))
    except OSError:
        return "cannot be written (%s is not a writable directory)" % existing
    return None


def umask_mode(mode=0o666):
    """`mode` less the process's umask: what open() would have given a new file."""
    umask = os.umask(0)
    os.umask(umask)
    return mode & ~umask


def _failed(error, path):
    return OutputError(error.errno, error.strerror or str(error), path)


def _checked_plan(path):
    try:
        plan = _plan(path)
    except OSError as e:
        raise _failed(e, path) from e
    if plan.directory:
        raise OutputError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    return plan


def write_output(path, data):
    """Write the bytes `data` to `path`: atomically for a regular file or a new path
    (through a symlink, onto its target), straight through for anything else."""
    plan = _checked_plan(path)
    try:
        if plan.through:
            _write_through(path, plan, data)
        else:
            _write_atomic(plan.target, data)
    except OutputError:
        raise
    except OSError as e:
        raise _failed(e, path) from e


def _write_through(path, plan, data):
    if plan.fd is None:
        with open(path, "wb") as f:  # a pipe, FIFO or device: truncation means nothing to it
            f.write(data)
        return
    for stream in (sys.stdout, sys.stderr):  # what was printed before comes first
        try:
            if stream is not None and stream.fileno() == plan.fd:
                stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    view = memoryview(data)
    while view:
        view = view[os.write(plan.fd, view):]


def _write_atomic(target, data):
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(target))
    with guard.temp_path(tmp):  # removed on any failure, and by a signal mid-write
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, umask_mode())  # mkstemp makes it 0600, and the mode would survive the rename
        os.replace(tmp, target)


def staging_file(path, suffix=""):
    """A new, empty temporary file for a writer that must be given a file name (MXNet's
    profiler), to be put at `path` by `move_into_place`: beside `path`'s target when that
    is renamed over, else in the system's temporary directory. The caller removes it if it
    never calls `move_into_place`."""
    plan = _checked_plan(path)
    directory = None if plan.through else os.path.dirname(plan.target)
    try:
        if directory:
            os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=suffix)
    except OSError as e:
        raise _failed(e, path) from e
    os.close(fd)
    return tmp


def move_into_place(tmp, path):
    """Put the finished file `tmp` (from `staging_file`) at `path`, as `write_output` would:
    renamed onto a regular file or a new path when it is in the same directory, else
    copied through; `tmp` is gone afterwards, whatever happens."""
    try:
        plan = _checked_plan(path)
        if not plan.through and os.path.dirname(os.path.abspath(tmp)) == os.path.dirname(plan.target):
            try:
                os.chmod(tmp, umask_mode())
                os.replace(tmp, plan.target)
            except OSError as e:
                raise _failed(e, path) from e
            return
        with open(tmp, "rb") as f:
            data = f.read()
        write_output(path, data)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)

"""DataLoader worker processes leave nothing in the temporary directory.

A DataLoader worker (num_workers > 0, not thread_pool) sends each batch's shared memory through
multiprocessing's resource sharer, a Unix socket in a `pymp-*` folder it makes and removes, by a
finalizer, when it exits normally; one that its pool's SIGTERM ends while it works leaves both.
`share_with_workers()` (`share_before_pools()`: before any process pool of a script gluonperf's
hooks are in) makes that folder in the process that forks the workers: they inherit it
(`current_process()._config['tempdir']`) and make none, and this process's finalizer removes it
at exit, sockets and all. `remove_now()` removes it at once, for an exit that runs no finalizer
(`os._exit` after a signal or a stall: runtime.guard).
"""
import os
import shutil
import sys


def share_with_workers():
    """Make multiprocessing's temporary directory in this process (once; later calls return the
    same), so that the worker processes started from now on share it: its path."""
    from multiprocessing import util
    return util.get_temp_dir()


def share_before_pools():
    """From now on, `share_with_workers()` before each process pool of this process (a
    DataLoader's, or the script's own) starts its workers: for a script gluonperf's hooks are in
    (profile --, tune --). Lazily, not at once: a script that starts no pool makes no folder
    (one made at start would stay behind when a script is killed by SIGTERM, as tune's timeouts
    and Ctrl-C end it). Once per process."""
    from multiprocessing import pool
    original = pool.Pool.__init__
    if getattr(original, "_gluonperf_shares", False):
        return

    def __init__(self, *args, **kwargs):
        if not isinstance(self, pool.ThreadPool):  # threads share this process's folder anyway
            share_with_workers()
        original(self, *args, **kwargs)
    __init__._gluonperf_shares = True
    __init__.__wrapped__ = original
    pool.Pool.__init__ = __init__


def remove_now():
    """Remove this process's multiprocessing temporary directory, if it made one (for an exit
    through os._exit, which skips multiprocessing's finalizer)."""
    if "multiprocessing.util" not in sys.modules:
        return
    from multiprocessing import process
    path = process.current_process()._config.get("tempdir")
    if path and os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)

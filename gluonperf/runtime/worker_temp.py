"""DataLoader worker processes leave nothing in the temporary directory.

MXNet's DataLoader with worker processes (num_workers > 0, not thread_pool) sends each batch
back from a worker as shared memory whose file descriptor goes through Python's
multiprocessing resource sharer: the worker listens on a Unix socket in multiprocessing's
temporary directory, a `pymp-*` folder it makes the first time it needs one and removes, by a
finalizer, when it exits normally. The pool ends its workers with SIGTERM (when the loader is
deleted, or the process exits): a worker killed while it prepares the next batch never runs
that finalizer, and its folder and socket stay behind. `tune --` left one for each run of a
script it ended with DataLoader workers (21 from one tune of a newcomer's MLP script),
`train --workers` on image data one a run.

`share_with_workers()`, called in the process that makes the loader before its workers are
forked (`share_before_pools()`: before any process pool of this process starts its workers, for
a script gluonperf's hooks are in), makes that directory there: the workers inherit it (multiprocessing's
`current_process()._config['tempdir']`, copied into every process it starts) and make none of
their own; this process's multiprocessing removes it, with the workers' sockets in it, when it
exits (its finalizer, at exit, after the pools are terminated). `remove_now()` removes it at
once, for an exit that runs no finalizer (`os._exit` after a signal or a stall: runtime.guard).
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

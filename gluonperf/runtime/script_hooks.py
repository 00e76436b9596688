"""The hooks of `python -m gluonperf.profile -- COMMAND` inside a script gluonperf never saw:
wrappers around what every Gluon training loop calls, which report to a listener.

- `Trainer.step` / `update`: `listener.before_update(trainer, batch_size)`, `after_update(...)`;
- `DataLoader`, `mx.io.DataIter`: `data_wait(seconds, loader)`, time in `next()` (nested: once);
- `install(listener, waits=True)`: `engine_wait(seconds, what, file, line)`, the script's waits;
- outermost Blocks: `block_called(block, args)` per call (costly: `watch_blocks(True)` alone) and,
  with `watch_construction(True)`, `block_made(block, file, line)`;
- `watch_loaders(True)`: `loader_arguments(loader, args, kwargs)` (it may return others) and
  `loader_made(loader, file, line)`.

`install(listener)` puts in all but the Block hook; `remove()` takes them out. A listener that
raises is dropped (one line on stderr) and the script runs on unhooked. Nothing here measures.
"""
import os
import sys
import sysconfig
import threading
import time

_originals = {}       # (class, attribute name) -> the function it had before install
_listener = None
_local = threading.local()  # depth of data iterators and Block calls on this thread


def _drop(error):
    global _listener
    if _listener is not None:
        sys.stderr.write("gluonperf: stopped profiling this script (a hook failed: %s: %s); the script runs on\n"
                         % (type(error).__name__, error))
        sys.stderr.flush()
    _listener = None


def _tell(method, *args):
    """Call the listener's `method`, if there is a listener; a failure drops it."""
    listener = _listener
    if listener is None:
        return None
    try:
        return getattr(listener, method)(*args)
    except Exception as e:  # noqa: BLE001 (the user's script must run on)
        _drop(e)
        return None


def _wrap_update(original):
    def step(self, batch_size, *args, **kwargs):
        if _listener is None or getattr(_local, "updating", False):
            return original(self, batch_size, *args, **kwargs)
        _local.updating = True  # Trainer.step does not count again the update it calls
        try:
            _tell("before_update", self, batch_size)
            out = original(self, batch_size, *args, **kwargs)
        finally:
            _local.updating = False
        _tell("after_update", self, batch_size)
        return out
    step.__wrapped__ = original
    step.__name__, step.__doc__ = original.__name__, original.__doc__
    return step


class _TimedIterator:
    """An iterator whose every `next()` is timed for the listener (one frame of its own in a
    traceback that passes through it)."""

    def __init__(self, inner, loader):
        self._inner, self._loader = inner, loader

    def __iter__(self):
        return self

    def __next__(self):
        if _listener is None or getattr(_local, "data_depth", 0):
            return next(self._inner)
        _local.data_depth, start = 1, time.perf_counter()
        try:
            return next(self._inner)
        finally:
            _local.data_depth = 0
            _tell("data_wait", time.perf_counter() - start, self._loader)

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _wrap_loader_iter(original):
    def __iter__(self):
        return _TimedIterator(original(self), self)
    __iter__.__wrapped__ = original
    return __iter__


def _wrap_dataiter_next(original):
    def __next__(self):
        if _listener is None or getattr(_local, "data_depth", 0):
            return original(self)
        _local.data_depth, start = 1, time.perf_counter()
        try:
            return original(self)
        finally:
            _local.data_depth = 0
            _tell("data_wait", time.perf_counter() - start, self)
    __next__.__wrapped__ = original
    return __next__


_GLUONPERF = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # this gluonperf's folder


def _not_the_script():
    """Folders whose code is not the script's: MXNet's, the standard library's, installed packages'
    (GluonCV's metric helpers, say) and this gluonperf's."""
    import mxnet
    paths = sysconfig.get_paths()
    folders = {os.path.dirname(os.path.abspath(mxnet.__file__)), _GLUONPERF.rstrip(os.sep)}
    folders.update(os.path.abspath(paths[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths)
    return tuple(sorted(f + os.sep for f in folders))


_skip = None


def is_script(filename):
    """Whether code in `filename` is the script's own (not MXNet's, the standard library's, an
    installed package's or this gluonperf's; not '<string>')."""
    global _skip
    if _skip is None:
        _skip = _not_the_script()
    return not filename.startswith(_skip) and not filename.startswith(("<", _GLUONPERF))


def script_line(frame):
    """(file, line) of the innermost frame of the script's own code at or above `frame`; None
    when gluonperf's own code made the call (a fence of the profiler), or no frame is the script's."""
    global _skip
    if _skip is None:
        _skip = _not_the_script()
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_GLUONPERF):
            return None
        if not name.startswith(_skip) and not name.startswith("<"):
            return name, frame.f_lineno
        frame = frame.f_back
    return None


def _wrap_wait(what):
    def wrap(original):
        def wait(*args, **kwargs):
            if _listener is None or getattr(_local, "waiting", False):
                return original(*args, **kwargs)
            where = script_line(sys._getframe(1))
            if where is None:
                return original(*args, **kwargs)
            _local.waiting, start = True, time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                _local.waiting = False
                _tell("engine_wait", time.perf_counter() - start, what, where[0], where[1])
        wait.__wrapped__ = original
        wait.__name__, wait.__doc__ = original.__name__, original.__doc__
        return wait
    return wrap


def _wrap_loader_init(original):
    def __init__(self, *args, **kwargs):
        if _listener is not None:
            changed = _tell("loader_arguments", self, args, kwargs)
            if changed is not None:
                args, kwargs = changed
        original(self, *args, **kwargs)
        if _listener is not None:
            where = script_line(sys._getframe(1)) or ("?", 0)
            _tell("loader_made", self, where[0], where[1])
    __init__.__wrapped__ = original
    return __init__


def _wrap_block_init(original):
    def __init__(self, *args, **kwargs):
        depth = getattr(_local, "making", 0)
        _local.making = depth + 1
        try:
            original(self, *args, **kwargs)
        finally:
            _local.making = depth
        if depth == 0 and _listener is not None:
            where = script_line(sys._getframe(1))
            if where is not None:
                _tell("block_made", self, where[0], where[1])
    __init__.__wrapped__ = original
    return __init__


def _wrap_call(original):
    def __call__(self, *args):
        depth = getattr(_local, "block_depth", 0)
        if depth == 0 and _listener is not None:
            _tell("block_called", self, args)
        _local.block_depth = depth + 1
        try:
            return original(self, *args)
        finally:
            _local.block_depth = depth
    __call__.__wrapped__ = original
    return __call__


def _patch(cls, name, wrap):
    key = (cls, name)
    if key not in _originals:
        _originals[key] = cls.__dict__[name]
        setattr(cls, name, wrap(_originals[key]))


def _unpatch(cls, name):
    original = _originals.pop((cls, name), None)
    if original is not None:
        setattr(cls, name, original)


def _targets(waits=False, data=True):
    """(class, attribute, wrapper) of every hook `install` puts in."""
    from mxnet import gluon, io, ndarray
    from mxnet.gluon.data import dataloader
    out = [(gluon.Trainer, "step", _wrap_update), (gluon.Trainer, "update", _wrap_update)]
    if data:
        out.append((io.DataIter, "__next__", _wrap_dataiter_next))
        for cls in (dataloader.DataLoader, getattr(dataloader, "DataLoaderV1", None)):
            if cls is not None and "__iter__" in cls.__dict__:
                out.append((cls, "__iter__", _wrap_loader_iter))
    if waits:
        out += [(ndarray.NDArray, "asnumpy", _wrap_wait("asnumpy")),
                (ndarray.NDArray, "wait_to_read", _wrap_wait("wait_to_read")),
                (ndarray, "waitall", _wrap_wait("waitall"))]
    return out


def install(listener, waits=False, data=True):
    """Hook Trainer.step/update and the data loaders' iteration (`data`; and with `waits`, the
    script's waits for the engine), reporting to `listener` (see the module's docstring);
    `watch_blocks(True)` adds outermost Block calls. MXNet is imported here."""
    global _listener
    from .worker_temp import share_before_pools
    share_before_pools()  # the script's DataLoader workers leave no pymp-* folder behind (runtime.worker_temp)
    for cls, name, wrap in _targets(waits, data):
        _patch(cls, name, wrap)
    _listener = listener


def watch_loaders(on):
    """Put in (True) or take out (False) the hook on DataLoader's construction."""
    from mxnet.gluon.data import dataloader
    (_patch if on else _unpatch)(dataloader.DataLoader, "__init__", *((_wrap_loader_init,) if on else ()))


def watch_construction(on):
    """Put in (True) or take out (False) the hook on Blocks' construction."""
    from mxnet import gluon
    (_patch if on else _unpatch)(gluon.Block, "__init__", *((_wrap_block_init,) if on else ()))


def watch_blocks(on):
    """Put in (True) or take out (False) the Block.__call__ hook alone."""
    from mxnet import gluon
    if on:
        _patch(gluon.Block, "__call__", _wrap_call)
    else:
        _unpatch(gluon.Block, "__call__")


def remove():
    """Take every hook out (the Block hook too): the classes get their own functions back."""
    global _listener
    _listener = None
    for cls, name in list(_originals):
        _unpatch(cls, name)


def installed():
    return _listener is not None

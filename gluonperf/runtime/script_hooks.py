"""The hooks of `python -m gluonperf.profile -- COMMAND` inside a script gluonperf never saw:
wrappers around what every Gluon training loop calls, which report to a listener.

- `gluon.Trainer.step` (and `Trainer.update`, for loops that call `allreduce_grads` and
  `update` themselves): `listener.before_update(trainer, batch_size)` just before the real
  call, `listener.after_update(trainer, batch_size)` just after it: step boundaries, and
  the images of a step (its `batch_size` argument);
- the iteration of Gluon's `DataLoader` and of MXNet's data iterators (`mx.io.DataIter`:
  `ImageRecordIter`, `NDArrayIter`, `PrefetchingIter`, ...): `listener.data_wait(seconds,
  loader)` for each batch taken, the wall time spent inside `next()` (an iterator inside
  another one counts once, for the outer one);
- `Block.__call__`, outermost calls only (not the calls of a model's children):
  `listener.block_called(block, args)`, to find the model the Trainer updates and its input.

`install(listener)` puts them in (MXNet must be imported) but the Block hook, `remove()`
takes them out; `watch_blocks(True/False)` puts in and takes out the Block hook alone (it
costs a Python call per Block call, and a frame in a traceback through a model's forward:
the listener wants it for the measured steps only). Each hook adds one frame of its own to a
traceback that passes through it. A listener that raises is dropped with one line on stderr: the script runs on, as
if nothing had been hooked. Nothing here measures: the listener (gluonperf.measure.steps)
does.
"""
import sys
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


def _targets():
    """(class, attribute, wrapper) of every hook."""
    from mxnet import gluon, io
    from mxnet.gluon.data import dataloader
    out = [(gluon.Trainer, "step", _wrap_update), (gluon.Trainer, "update", _wrap_update),
           (io.DataIter, "__next__", _wrap_dataiter_next)]
    for cls in (dataloader.DataLoader, getattr(dataloader, "DataLoaderV1", None)):
        if cls is not None and "__iter__" in cls.__dict__:
            out.append((cls, "__iter__", _wrap_loader_iter))
    return out


def install(listener):
    """Hook Trainer.step/update and the data loaders' iteration, reporting to `listener` (see the
    module's docstring); `watch_blocks(True)` adds outermost Block calls. MXNet is imported here."""
    global _listener
    for cls, name, wrap in _targets():
        _patch(cls, name, wrap)
    _listener = listener


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

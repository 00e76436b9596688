"""The sample library the system under test serves from: every sample in one shared-memory
segment (`multiprocessing.shared_memory`), made once by the parent and mapped by each worker,
so that a query carries only the indices of its samples, as MLPerf's query sample library does.

The parent owns the segment: it unlinks it when done, and `guard` removes it on a signal or a
stall (on Linux a segment is the file /dev/shm/NAME). Python's resource tracker is kept out:
before 3.13 it registers every segment a process maps, would start a tracker process in each
worker and unlink the parent's segment when the first worker exits (CPython issue 82300).
"""
import contextlib
import os
import secrets
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from ..runtime import guard

SHM_DIR = "/dev/shm"


@contextlib.contextmanager
def _untracked():
    """SharedMemory without the resource tracker (Python < 3.13 has no track=False)."""
    register, unregister = resource_tracker.register, resource_tracker.unregister
    resource_tracker.register = resource_tracker.unregister = lambda *args, **kwargs: None
    try:
        yield
    finally:
        resource_tracker.register, resource_tracker.unregister = register, unregister


class SampleLibrary:
    """Samples of one shape and dtype in shared memory. `create` (the parent, the owner) copies
    an array in; `attach` (a worker) maps it by `spec()`; `take(indices)` copies those samples
    out, in order. Use it as a context manager: the owner unlinks the segment on exit."""

    def __init__(self, shm, shape, dtype, owner):
        self._shm, self.owner = shm, owner
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.array = np.ndarray(self.shape, self.dtype, buffer=shm.buf)
        self._removal = None

    @classmethod
    def create(cls, samples, prefix="gluonperf-"):
        samples = np.ascontiguousarray(samples)
        if samples.ndim < 1 or len(samples) == 0:
            raise ValueError("a sample library needs at least one sample, got shape %s" % (samples.shape,))
        name = "%s%d-%s" % (prefix, os.getpid(), secrets.token_hex(4))
        with _untracked():
            shm = shared_memory.SharedMemory(name=name, create=True, size=max(1, samples.nbytes))
        library = cls(shm, samples.shape, samples.dtype, owner=True)
        path = os.path.join(SHM_DIR, name)
        if os.path.exists(path):  # removed with the temporary paths on a signal or a stall
            library._removal = guard.temp_path(path)
            library._removal.__enter__()
        library.array[...] = samples
        return library

    @classmethod
    def attach(cls, spec):
        with _untracked():
            shm = shared_memory.SharedMemory(name=spec["name"])
        return cls(shm, spec["shape"], spec["dtype"], owner=False)

    @property
    def name(self):
        return self._shm.name

    def __len__(self):
        return self.shape[0]

    def spec(self):
        """What a worker needs to attach: JSON-able."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype.str}

    def take(self, indices):
        """The samples at `indices` (LoadGen's sample indices), a new contiguous array."""
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= len(self)):
            raise ValueError("sample indices must be in 0..%d, got %s" % (len(self) - 1, indices))
        return self.array[indices]

    def close(self):
        """Unmap (and, for the owner, unlink) the segment; a second call does nothing."""
        if self._shm is None:
            return
        self.array = None
        try:
            self._shm.close()
        except BufferError:  # a view of it still held elsewhere: the mapping goes with the process
            pass
        if self.owner:
            with _untracked():
                try:
                    self._shm.unlink()
                except FileNotFoundError:
                    pass
            if self._removal is not None:
                self._removal.__exit__(None, None, None)
        self._shm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

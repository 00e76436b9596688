"""Which step has MXNet's engine finished? Known without waiting for it, so that memory is
counted against finished work in a script that never syncs (and so runs ahead of the engine).

- `EngineMarker`: after each step, a marker queued behind the step's last write (two tiny
  operators that write the step's number into a one-element CPU array), read from memory
  without waiting (an aligned 8-byte read). No callback into Python runs on the engine's
  threads: one waiting for the GIL while Python forks a DataLoader's workers would hang.
- `FinishedMemory`: a thread that polls the marker (every POLL_S) and samples memory at each
  newly finished step; at each of Python's steps (`queued`), how far Python is ahead and what
  the queue holds: its own finding (`queue_record`), never growth.

Why, and what it costs: docs/measuring.md, "Memory over time: is the job leaking?".
"""
import ctypes
import threading
import time

POLL_S = 0.001      # the thread looks at the engine's progress this often (a read of 8 bytes)


class EngineMarker:
    """The last step the engine finished (`finished()`), from markers queued by `mark`."""

    def __init__(self):
        import mxnet as mx
        from mxnet.base import _LIB
        self.mx = mx
        self.cell = mx.nd.zeros((1,), ctx=mx.cpu(), dtype="float64")
        self.cell.wait_to_read()
        pointer = ctypes.c_void_p()
        _LIB.MXNDArrayGetData(self.cell.handle, ctypes.byref(pointer))
        self._value = ctypes.c_double.from_address(pointer.value)

    def mark(self, step, after):
        """Queue the marker of `step` behind the last write to `after` (an NDArray the step
        writes last); False when it cannot be queued (a sparse array: no view of it)."""
        mx = self.mx
        try:
            view = after.reshape((-1,))[0:1]  # a view: the same engine variable as `after`
        except Exception:  # noqa: BLE001
            return False
        zero = mx.nd.zeros_like(view)  # reads `after`: runs once the step's write to it is done
        if zero.context.device_type != "cpu":
            zero = zero.copyto(mx.cpu())
        mx.nd._internal._plus_scalar(mx.nd.cast(zero, "float64"), scalar=float(step), out=self.cell)
        return True

    def finished(self):
        return int(self._value.value)


class FinishedMemory:
    """Memory sampled at the steps the engine finished (see the module's docstring): `start()`,
    `fence(step)` where gluonperf waits for the engine, `stop()` once the engine is idle."""

    def __init__(self, memory, marker, poll=POLL_S):
        from .growth import StepSeries
        self.memory, self.marker, self.poll = memory, marker, poll
        self.fences = StepSeries(memory.cap)   # Python's step -> (steps ahead, bytes queued, seconds to drain)
        self.last = (0, None)                   # (finished step, resident bytes when it was first seen)
        self._stop = threading.Event()
        self._thread = None

    def _look(self):
        done = self.marker.finished()
        if done > self.last[0]:
            self.memory.sample(done)
            self.last = (done, self.memory.rss_now())

    def _run(self):
        while not self._stop.wait(self.poll):
            self._look()

    def start(self):
        self._thread = threading.Thread(target=self._run, name="gluonperf-finished-steps", daemon=True)
        self._thread.start()
        return self

    def fence(self, step):
        """Wait for the engine at Python's `step` (`mx.nd.waitall()`), after noting how far
        Python was ahead of it, what the queue held (the resident memory now, less what it was
        when the engine finished the step it is still at) and, then, how long it took to drain."""
        import mxnet as mx
        done, then = self.last
        now = self.memory.rss_now()
        ahead = step - self.marker.finished()
        start = time.perf_counter()
        mx.nd.waitall()
        drain = time.perf_counter() - start
        if self.fences.wants(step):
            self.fences.append(step, (ahead, now - then if then is not None and ahead == step - done else None, drain))

    def stop(self):
        """Stop the thread, after a last look (call it once the engine is idle: every step counted)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._look()

    def plain(self):
        """{'steps', 'ahead', 'queue_bytes', 'drain_s'}: at each of gluonperf's fences (Python's
        step), how far Python was ahead, what its queue held (None when the engine moved on
        while it was read) and the seconds it took to drain."""
        values = list(self.fences.values)
        return {"steps": list(self.fences.steps), "ahead": [v[0] for v in values],
                "queue_bytes": [v[1] for v in values], "drain_s": [v[2] for v in values]}


def queue_records(queue, warmup=0, **common):
    """The record (bench 'growth', name 'running ahead') of what `FinishedMemory.plain()` saw at
    gluonperf's fences after `warmup` steps (`queue`, with its 'fence_every'): how far Python
    was ahead of the engine (the median, its order-statistics interval, the most), what its
    queue held in memory then, and `finding`, its sentence; none without a fence to count."""
    from ..records import level_text as _level, result
    from .growth import bytes_text as _size
    from .stats import median_of
    every = queue["fence_every"]
    kept = [i for i, s in enumerate(queue["steps"]) if s >= warmup]
    if not kept:
        return []
    ahead = median_of([queue["ahead"][i] for i in kept])
    held = [queue["queue_bytes"][i] for i in kept if queue["queue_bytes"][i] is not None]
    fields = dict(ahead.fields("ahead_steps"), ahead_steps_max=max(queue["ahead"][i] for i in kept),
                  fence_every=every, drain_s=median_of([queue["drain_s"][i] for i in kept]).estimate,
                  memory="the work Python queued ahead of the engine")
    said = "at gluonperf's waits for the engine (every %d steps; %d after %d of warm-up), Python was a median " \
           "of %s ahead of it (%s CI %s-%s, the most %d)" % (
               every, len(kept), warmup, _steps(ahead.estimate), _level(ahead.level), _n(ahead.low), _n(ahead.high),
               fields["ahead_steps_max"])
    if len(held) >= 6:  # fewer cannot bound a median at 95%
        size = median_of(held)
        fields.update(size.fields("queue_bytes"), queue_bytes_max=max(held))
        said += ", and the work it had queued held a median of %s (%s CI %s to %s, the most %s)" % (
            _size(size.estimate), _level(size.level), _size(size.low), _size(size.high), _size(max(held)))
    if ahead.estimate >= 2:
        said = ("running ahead: %s: left alone, Python queues %d steps while the engine finishes %s, and its "
                "queue grows until the script reads a value; memory is counted against finished steps, so the "
                "queue is not growth; read a value (asscalar) every few steps to bound it" % (
                    said, every, _n(every - ahead.estimate)))
    else:
        said = "not running ahead: %s: the engine keeps up with Python (or the loop waits for it)" % said
    return [result("growth", "running ahead", finding=said, **fields, **common)]


def _n(x):
    return "%.3g" % x


def _steps(x):
    return "1 step" if x == 1 else "%.3g steps" % x

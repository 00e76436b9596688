"""Where memory that grows comes from, seen from inside a script over a window of its steps.

- `HeldArrays`: the NDArrays the script still holds that were made during the window, by the
  line of the script's own code that made them (`tracemalloc.get_object_traceback`), weighted
  by their bytes; a line whose arrays from at least half the window's steps are alive holds
  them from step to step.
- `InputShapes`: the shapes a model is called with, step by step: a new shape at most steps
  makes a hybridized model build (and keep) a graph for each.

Only the window pays for these (tracing slows every allocation of Python's): the script runs
as it was written before and after it. docs/measuring.md, "Memory over time", explains them.
"""
import gc
import tracemalloc

FRAMES = 64         # frames kept of each allocation's traceback (a model's forward is a deep stack)
HELD_SHARE = 0.5    # a line holds its arrays when those of at least this share of the window's steps are alive
TOP_LINES = 5


class HeldArrays:
    """NDArrays made in a window of steps and still alive at its end, by the script's line.
    `start()` (False when the script traces memory itself: its tracing is left alone), then,
    after `steps` steps, `stop(steps)`: a list of {'file', 'line', 'arrays', 'bytes'}, most bytes
    first, of the lines that hold arrays from at least HELD_SHARE of the steps."""

    def __init__(self, frames=FRAMES):
        self.frames = frames
        self.tracing = False

    def start(self):
        if tracemalloc.is_tracing():
            return False
        tracemalloc.start(self.frames)
        self.tracing = True
        return True

    def stop(self, steps):
        if not self.tracing:
            return []
        try:
            found = _by_line(_live_arrays())
        finally:
            tracemalloc.stop()
            self.tracing = False
        need = max(2, HELD_SHARE * steps)
        held = [dict(file=f, line=l, arrays=n, bytes=b) for (f, l), (n, b) in found.items() if n >= need]
        return sorted(held, key=lambda h: -h["bytes"])[:TOP_LINES]


def _live_arrays():
    """(NDArray, its traceback) of every live NDArray made while tracemalloc traced."""
    import mxnet as mx
    out = []
    for obj in gc.get_objects():
        if isinstance(obj, mx.nd.NDArray):
            tb = tracemalloc.get_object_traceback(obj)
            if tb is not None:
                out.append((obj, tb))
    return out


def _by_line(arrays):
    """{(file, line): [arrays, bytes]} by the innermost frame of the script's own code."""
    from ..runtime.script_hooks import is_script
    out = {}
    for array, tb in arrays:
        frame = next((f for f in reversed(tb) if is_script(f.filename)), None)  # tb: oldest frame first
        if frame is None:
            continue
        seen = out.setdefault((frame.filename, frame.lineno), [0, 0])
        seen[0] += 1
        seen[1] += array_bytes(array)
    return out


def array_bytes(array):
    """An NDArray's bytes: its elements times their size (0 when it cannot say: a sparse array)."""
    import numpy as np
    try:
        return int(array.size) * np.dtype(array.dtype).itemsize
    except Exception:  # noqa: BLE001 (a freed or sparse array: not worth a failure)
        return 0


class InputShapes:
    """The shapes of a model's array arguments, call by call (`seen(args)`), and how many
    distinct ones there were (`summary()`)."""

    def __init__(self):
        self.calls, self.shapes = 0, {}

    def seen(self, args):
        import mxnet as mx
        shapes = tuple(tuple(a.shape) for a in args if isinstance(a, mx.nd.NDArray))
        if shapes:
            self.calls += 1
            self.shapes[shapes] = self.shapes.get(shapes, 0) + 1

    def summary(self):
        common = sorted(self.shapes.items(), key=lambda kv: -kv[1])[:3]
        return {"calls": self.calls, "distinct": len(self.shapes),
                "examples": [[list(s) for s in shapes] for shapes, _ in common]}


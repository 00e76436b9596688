"""A Chrome-trace of the measured region only, written by MXNet's own profiler.

    trace = Trace("trace.json")     # Trace(None) does nothing, so callers need no `if`
    with trace:                     # profile this region (may be entered several times)
        ...
    trace.dump()                    # write the file (once per process)

The file opens in Perfetto (ui.perfetto.dev) or chrome://tracing and shows each
operator (`dot`, `sum`, `CopyCPU2CPU`, ...) on the engine thread that ran it.
`mx.runtime.Features()` says PROFILER is off in the pip wheel, yet `mx.profiler`
records operators and writes traces: this module relies on what it does, not on the flag.
"""
import json
import os

import mxnet as mx

from ..runtime.outputs import move_into_place, staging_file, write_output

# MXNet's profiler can be configured only until it has dumped once in a process.
_DUMPED = False


class Trace:
    """Profile the regions entered with `with trace:`; `dump()` writes the Chrome-trace JSON.

    One Trace per process: MXNet's profiler cannot be configured again after it dumped.
    The profiler writes to a temporary file, put at `path` (`runtime.outputs`: renamed onto
    a regular file or a new path, straight through to a pipe or a device) only once it has
    been read back as JSON with a `traceEvents` list, so a failed run never leaves a
    half-written trace behind.
    """

    def __init__(self, path, aggregate_stats=False, **settings):
        """`settings`: mx.profiler.set_config switches (e.g. profile_symbolic=True,
        profile_imperative=True to record operators only); default profile_all=True."""
        self.path = path
        self.aggregate_stats = aggregate_stats
        self.settings = settings or {"profile_all": True}
        self._configured = False
        self._tmp = None

    def __bool__(self):
        return self.path is not None

    def _configure(self):
        if _DUMPED:
            raise RuntimeError("MXNet's profiler cannot be configured again after a dump in the same "
                               "process; trace one run per process")
        self._tmp = staging_file(self.path, ".json")
        mx.profiler.set_config(filename=self._tmp, aggregate_stats=self.aggregate_stats, **self.settings)
        self._configured = True

    def __enter__(self):
        if self.path is not None:
            if not self._configured:
                self._configure()
            mx.nd.waitall()  # work queued before the region stays out of the trace
            mx.profiler.set_state("run")
        return self

    def __exit__(self, *exc):
        if self.path is not None:
            mx.nd.waitall()  # everything queued inside the region is recorded
            mx.profiler.set_state("stop")
        return False

    def dump(self):
        """Write the trace to `path`; returns the loaded trace (dict), or None without a path."""
        if self.path is None:
            return None
        if not self._configured:
            with self:  # an empty trace is still a valid file
                pass
        global _DUMPED
        try:
            _DUMPED = True
            mx.profiler.dump()
            data = load_trace(self._tmp)
            move_into_place(self._tmp, self.path)
        finally:
            if os.path.exists(self._tmp):
                os.unlink(self._tmp)
        return data


def aggregate_stats():
    """MXNet's aggregate statistics of what was profiled so far (a Trace made with
    aggregate_stats=True), as a dict: {"Time": {domain: {name: {"Count", "Total", ...}}}},
    times in ms. Call before `Trace.dump()`."""
    return json.loads(mx.profiler.dumps(format="json"))


def load_trace(path):
    """Read a Chrome-trace JSON file; raises ValueError unless it has a `traceEvents` list."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ValueError("%s is not a Chrome trace (no traceEvents list)" % path)
    return data


def event_names(data):
    """The set of event names in a loaded trace (operators, copies, API calls)."""
    return {e.get("name") for e in data["traceEvents"] if isinstance(e, dict)}


def merge_traces(paths, out_path):
    """Merge the traces of several processes into one file at `out_path`.

    Each input becomes its own group of processes in the viewer: its `pid`s are
    offset so that events of different processes never share a track.
    """
    merged = []
    for number, path in enumerate(paths):
        data = load_trace(path)
        for event in data["traceEvents"]:
            if isinstance(event, dict) and "pid" in event:
                event = dict(event, pid=1000 * number + int(event["pid"]))
            merged.append(event)
    write_output(out_path, json.dumps({"traceEvents": merged, "displayTimeUnit": "ms"}).encode("utf-8"))
    return {"traceEvents": merged}

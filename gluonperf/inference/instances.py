"""The system under test: instances x threads worker processes, each pinned to its own cores.

A `Layout` (1x2: one instance of two threads; 2x1: two of one) puts each instance on cores of
its own (`assign_cores`). A `Pool` runs one rung's instances (`workers/serving.py`, in guard's
process groups) and dispatches to them LoadGen's batches of sample indices, the samples sitting
in shared memory (`samples.SampleLibrary`); once warmed, it pads every batch to the smallest
warmed size that holds it (`buckets`). A `Batcher` is the server's batching (`window_s`,
`max_batch`). docs/commands/infer.md ("The system under test") says how.

Nothing here times anything: LoadGen keeps the clock.
"""
import collections
import itertools
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from ..runtime import guard

READY_TIMEOUT = 300.0  # seconds an instance may take to load MXNet and its rung


@dataclass(frozen=True, order=True)
class Layout:
    instances: int
    threads: int

    def __str__(self):
        return "%dx%d" % (self.instances, self.threads)

    @property
    def cores(self):
        return self.instances * self.threads


def parse_layouts(text):
    """'1x2,2x1' -> [Layout(1, 2), Layout(2, 1)]; ValueError naming the item that is wrong."""
    out = []
    for item in str(text).split(","):
        n, sep, t = item.strip().lower().partition("x")
        if not (sep and n.isdigit() and t.isdigit() and int(n) >= 1 and int(t) >= 1):
            raise ValueError("%r is not a layout INSTANCESxTHREADS (e.g. 1x2,2x1)" % item.strip())
        out.append(Layout(int(n), int(t)))
    return list(dict.fromkeys(out))


def factorizations(cores):
    """Every layout that fills `cores` cores: 1xN ... Nx1."""
    return [Layout(i, cores // i) for i in range(1, cores + 1) if cores % i == 0]


def core_groups():
    """The logical processors this process may run on, grouped by physical core (hyper-threads
    of one core together), in order: [[0], [1]] on 2 cores without hyper-threading."""
    allowed = sorted(os.sched_getaffinity(0))
    groups = collections.OrderedDict()
    for cpu in allowed:
        try:
            with open("/sys/devices/system/cpu/cpu%d/topology/core_id" % cpu) as f:
                core = f.read().strip()
            with open("/sys/devices/system/cpu/cpu%d/topology/physical_package_id" % cpu) as f:
                core = (f.read().strip(), core)
        except OSError:
            core = cpu
        groups.setdefault(core, []).append(cpu)
    return list(groups.values())


def assign_cores(layout, groups=None):
    """The logical processors of each instance of `layout`: `threads` whole cores each, the
    instances side by side. ValueError when the layout needs more cores than there are."""
    groups = core_groups() if groups is None else groups
    if layout.cores > len(groups):
        raise ValueError("layout %s needs %d cores and this process may use %d; give layouts of at most %d "
                         "instances x threads" % (layout, layout.cores, len(groups), len(groups)))
    return [sorted(itertools.chain.from_iterable(groups[i * layout.threads:(i + 1) * layout.threads]))
            for i in range(layout.instances)]


def buckets(largest):
    """The batch sizes a padded server batch may take: 1, 2, 4, ... below `largest`, and `largest`."""
    if largest < 1:
        raise ValueError("the largest batch must be at least 1, got %r" % largest)
    sizes, size = [], 1
    while size < largest:
        sizes.append(size)
        size *= 2
    return sizes + [largest]


def padded(batch, sizes):
    """`batch` ((id, index) pairs) padded to the smallest of `sizes` that holds it with copies
    of its first sample whose id is None (nobody waits for them); as it is when none does."""
    size = min((s for s in sizes if s >= len(batch)), default=len(batch))
    return list(batch) + [(None, batch[0][1])] * (size - len(batch)) if batch else list(batch)


class InstanceError(RuntimeError):
    """An instance failed: its line says which and why."""


class Pool:
    """The instances of one rung under one layout. `start()` starts them, `ready()` waits until
    every one has loaded its rung; then `submit(batches)` (each batch a list of (id, index))
    runs each batch on the least busy instance, at most `depth` batches queued on one, and
    calls `on_done(ids)` from a reader thread when it is answered. `close()` stops them all.
    `command`: the instance's program, which gets the JSON config as its last argument and speaks
    `workers/serving.py`'s protocol (default: `python -m gluonperf.workers.serving`; another engine's
    worker, e.g. benchmarks/inference_torch.py, serves the same way)."""

    def __init__(self, rung_text, layout, library_spec, ctx, cores=None, command=None):
        self.rung_text, self.layout, self.library_spec, self.ctx = rung_text, layout, library_spec, ctx
        self.cores = cores or [None] * layout.instances
        self.command = list(command or [sys.executable, "-m", "gluonperf.workers.serving"])
        self.on_done = lambda ids: None
        self.depth = 1
        self.sizes = ()      # the batch sizes the warm-up ran: every batch is padded to one of them
        self.failure = None  # the first instance's error line, once one failed
        self._closing = False
        self._procs, self._errs, self._readers = [], [], []
        self._lock = threading.Lock()
        self._pending = collections.deque()
        self._busy = [0] * layout.instances
        self._batches = {}
        self._ids = itertools.count()
        self._answers = [collections.deque() for _ in range(layout.instances)]
        self._answered = threading.Condition(self._lock)

    def _argv(self, i):
        config = {"rung": self.rung_text, "ctx": self.ctx, "samples": self.library_spec,
                  "cores": self.cores[i], "instance": i}
        return self.command + [json.dumps(config)]

    def start(self):
        env = guard.package_env()
        env["OMP_NUM_THREADS"] = str(self.layout.threads)
        env.pop("MXNET_OMP_MAX_THREADS", None)
        for i in range(self.layout.instances):
            err = tempfile.TemporaryFile()
            self._errs.append(err)
            self._procs.append(guard.popen(self._argv(i), stdin=-1, stdout=-1, stderr=err, env=env, bufsize=0))
        return self

    def ready(self, timeout=READY_TIMEOUT):
        """Wait until every instance said `ready`; then start the reader threads."""
        for i, proc in enumerate(self._procs):
            line = self._read_line(i, timeout)
            if line != b"ready":
                self._fail(i, "did not start")
        for i in range(len(self._procs)):
            reader = threading.Thread(target=self._read, args=(i,), name="gluonperf-instance-%d" % i, daemon=True)
            reader.start()
            self._readers.append(reader)
        return self

    def _read_line(self, i, timeout):
        result = []
        reader = threading.Thread(target=lambda: result.append(self._procs[i].stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self._fail(i, "no answer in %g s" % timeout)
        return result[0].strip() if result else b""

    def _last_error(self, i):
        err = self._errs[i]
        err.seek(0)
        return guard.last_line(err.read().decode("utf-8", "replace"), "instance %d exited" % i)

    def _fail(self, i, what):
        proc = self._procs[i]
        self._wait_exit(i)
        line = self._last_error(i) if proc.poll() is not None else "instance %d %s" % (i, what)
        raise InstanceError("rung %s, layout %s: %s" % (json.loads(self.rung_text)["name"], self.layout, line))

    # --- requests: warm-up, batches ------------------------------------------------------

    def _send(self, i, line):
        self._procs[i].stdin.write(line)

    def warm(self, sizes, calls=3, timeout=READY_TIMEOUT):
        """`calls` untimed-by-LoadGen calls at each batch size on every instance (graphs and
        oneDNN primitives built before LoadGen starts); the slowest instance's median call per
        size, as a hint for LoadGen's settings."""
        request = ("w %d %s\n" % (calls, " ".join(str(s) for s in sizes))).encode()
        with self._lock:
            for i in range(len(self._procs)):
                self._send(i, request)
        hints = {}
        for i in range(len(self._procs)):
            words = self._answer(i, timeout).split()
            for word in words[1:]:
                size, seconds = word.split(b":")
                hints[int(size)] = max(hints.get(int(size), 0.0), float(seconds))
        self.sizes = tuple(sorted(set(self.sizes) | set(sizes)))
        return hints

    def shapes(self, timeout=READY_TIMEOUT):
        """({batch size: calls} the instances served since the last call, [sizes among them the
        warm-up never ran]): asked after a LoadGen run, when no batch is in flight."""
        with self._lock:
            for i in range(len(self._procs)):
                self._send(i, b"s\n")
        served, cold = {}, set()
        for i in range(len(self._procs)):
            _, calls, never = (self._answer(i, timeout).decode().split() + ["-", "-"])[:3]
            for word in calls.split(",") if calls != "-" else []:
                size, count = word.split(":")
                served[int(size)] = served.get(int(size), 0) + int(count)
            cold |= {int(w) for w in never.split(",")} if never != "-" else set()
        return served, sorted(cold)

    def _answer(self, i, timeout):
        deadline = time.monotonic() + timeout
        with self._answered:
            while not self._answers[i]:
                left = deadline - time.monotonic()
                if self.failure or left <= 0:
                    raise InstanceError(self.failure or "instance %d: no answer in %g s" % (i, timeout))
                self._answered.wait(min(left, 1.0))
            return self._answers[i].popleft()

    def submit(self, batches):
        """Queue `batches` (lists of (id, index)); each runs on the least busy instance."""
        if self.failure:  # LoadGen waits for every sample: answer at once, the run is void anyway
            self.on_done([i for batch in batches for i, _ in batch if i is not None])
            return
        with self._lock:
            self._pending.extend(padded(b, self.sizes) for b in batches if b)
            self._pump()

    def _pump(self):
        """With the lock held: hand pending batches to instances with room."""
        while self._pending:
            i = min(range(len(self._busy)), key=self._busy.__getitem__)
            if self._busy[i] >= self.depth:
                return
            batch = self._pending.popleft()
            number = next(self._ids)
            self._batches[number] = batch
            self._busy[i] += 1
            self._send(i, ("c %d %s\n" % (number, " ".join(str(index) for _, index in batch))).encode())

    def _read(self, i):
        """An instance's answers: completed batches go to `on_done`, others to `_answer`."""
        stream = self._procs[i].stdout
        for line in iter(stream.readline, b""):
            if line.startswith(b"d "):
                with self._lock:
                    batch = self._batches.pop(int(line.split()[1]), None)  # None: answered when another failed
                    self._busy[i] -= 1
                    self._pump()
                if batch:
                    self.on_done([sample_id for sample_id, _ in batch if sample_id is not None])
                guard.beat()
            else:
                with self._answered:
                    self._answers[i].append(line.strip())
                    self._answered.notify_all()
        if not guard.stopping() and not self._closing:
            self._failed(i)

    def _failed(self, i):
        """Instance `i` is gone: note why, and answer every sample LoadGen still waits for."""
        with self._answered:
            if self.failure is None:
                self._wait_exit(i)
                self.failure = "rung %s, layout %s: %s" % (json.loads(self.rung_text)["name"], self.layout,
                                                          self._last_error(i))
            left = [sid for batch in list(self._batches.values()) + list(self._pending) for sid, _ in batch
                    if sid is not None]
            self._batches.clear()
            self._pending.clear()
            self._answered.notify_all()
        if left:
            self.on_done(left)

    def _wait_exit(self, i):
        try:
            self._procs[i].wait(timeout=2)
        except Exception:  # noqa: BLE001
            pass

    def close(self):
        """Ask every instance to stop, then stop the process groups of those that did not."""
        self._closing = True
        for proc in self._procs:
            try:
                proc.stdin.write(b"q\n")
                proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass
        for proc in self._procs:
            try:
                proc.wait(timeout=10)
            except Exception:  # noqa: BLE001 (the group is killed below)
                pass
            guard.kill_group(proc, grace=2.0)
        for err in self._errs:
            err.close()


class Batcher:
    """The server scenario's batching: samples that arrive within `window_s` of a batch's first,
    up to `max_batch` of them, go to `emit` as one batch."""

    def __init__(self, window_s, max_batch, emit):
        self.window_s, self.max_batch, self.emit = window_s, max_batch, emit
        self._batch, self._deadline = [], None
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._loop, name="gluonperf-batcher", daemon=True)
        self._thread.start()

    def add(self, samples):
        full = []
        with self._cond:
            for sample in samples:
                if not self._batch:
                    self._deadline = time.monotonic() + self.window_s
                self._batch.append(sample)
                if len(self._batch) >= self.max_batch:
                    full.append(self._batch)
                    self._batch = []
            self._cond.notify()
        if full:
            self.emit(full)

    def _loop(self):
        while True:
            with self._cond:
                while not self._stopped and (not self._batch or time.monotonic() < self._deadline):
                    self._cond.wait(None if not self._batch else max(0.0, self._deadline - time.monotonic()))
                if self._stopped:
                    return
                batch, self._batch = self._batch, []
            self.emit([batch])

    def close(self):
        with self._cond:
            self._stopped = True
            left, self._batch = self._batch, []
            self._cond.notify()
        self._thread.join()
        if left:
            self.emit([left])


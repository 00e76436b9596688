"""Process RSS (psutil) and device memory sampling, with peak tracking.

A before/after difference misses everything that was allocated and freed inside
the region, which is exactly what running ahead does; so a background thread
samples RSS (and, for GPU contexts, device memory) while the region runs. With
`children`, it also samples the memory of the process's child processes (a DataLoader's
workers) by their proportional set size: a worker forked from the training process shares
its pages, which each one's RSS would count again.

Over a whole run, `StepMemory` samples once a step instead (resident memory, and each GPU
context's), in bounded memory, for gluonperf.measure.growth's verdict: is the job leaking?
"""
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

import mxnet as mx
import psutil

from .growth import StepSeries

_PROCESS = psutil.Process()


def rss():
    """Resident set size of this process, in bytes."""
    return _PROCESS.memory_info().rss


def children_memory():
    """(bytes, processes): the proportional set size (PSS: a page shared by k processes counts
    1/k) summed over this process's descendants, from /proc/PID/smaps_rollup; their RSS
    where that file cannot be read."""
    total = count = 0
    for child in _PROCESS.children(recursive=True):
        try:
            total += _pss(child)
            count += 1
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, ProcessLookupError):
            pass
    return total, count


def _pss(proc):
    try:
        with open("/proc/%d/smaps_rollup" % proc.pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, PermissionError):
        pass
    return proc.memory_info().rss


def device_memory_used(ctx):
    """Bytes in use on a GPU context (whole device, as CUDA reports it); None for CPU."""
    if ctx.device_type != "gpu":
        return None
    free, total = mx.context.gpu_memory_info(ctx.device_id)
    return total - free


@dataclass(frozen=True)
class MemoryUsage:
    """What a `MemorySampler` saw: RSS before, at its peak and after; device peaks by context."""
    rss_before: int
    rss_peak: int
    rss_after: int
    samples: int
    device_peak: Dict[str, int] = field(default_factory=dict)
    children_peak: Optional[int] = None   # with children: their summed PSS at its peak
    children: int = 0                     # the most child processes seen at once

    @property
    def rss_growth(self):
        """Peak RSS above what the process held when the region started."""
        return self.rss_peak - self.rss_before

    def summary(self):
        row = {"rss_peak_bytes": self.rss_peak, "rss_growth_bytes": self.rss_growth}
        if self.children_peak is not None:
            row.update(children_peak_bytes=self.children_peak, children=self.children)
        for name, peak in self.device_peak.items():
            row["device_peak_bytes[%s]" % name] = peak
        return row


class MemorySampler:
    """Samples RSS (and GPU memory) every `interval` seconds on a background thread.

    Use as a context manager or with start()/stop(); stop() returns a MemoryUsage.
    """

    CHILDREN_EVERY = 0.05  # seconds between two readings of the child processes (each lists them)

    def __init__(self, contexts=(), interval=0.002, children=False):
        self.contexts = [c for c in contexts if c.device_type == "gpu"]
        self.interval = interval
        self.children = children
        self._stop = threading.Event()
        self._thread = None
        self.usage: Optional[MemoryUsage] = None

    def _sample(self):
        value = rss()
        self._peak = max(self._peak, value)
        self._count += 1
        now = time.monotonic()
        if self.children and now - self._children_at >= self.CHILDREN_EVERY:
            self._children_at = now
            used, count = children_memory()
            self._children_peak = max(self._children_peak, used)
            self._children = max(self._children, count)
        for ctx in self.contexts:
            used = device_memory_used(ctx)
            key = str(ctx)
            self._device_peak[key] = max(self._device_peak.get(key, 0), used)

    def _run(self):
        while not self._stop.wait(self.interval):
            self._sample()

    def start(self):
        self._before = rss()
        self._peak = self._before
        self._count = 0
        self._device_peak = {}
        self._children_at, self._children_peak, self._children = -1e9, 0, 0
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gluonperf-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._children_at = -1e9  # one last reading
        self._sample()
        self.usage = MemoryUsage(self._before, self._peak, rss(), self._count, dict(self._device_peak),
                                 self._children_peak if self.children else None, self._children)
        return self.usage

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def _rss_reader():
    """A function giving this process's RSS: /proc/self/statm read directly where there is one (7
    microseconds a reading on the 2-core Zen 4, against psutil's `memory_info()` 24: it parses
    every field), else `rss`. The file is this process's: a forked child reads its parent's. Read
    with pread, at offset 0: two threads may read it at once (no shared offset to race on)."""
    try:
        statm = os.open("/proc/self/statm", os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return rss
    page = os.sysconf("SC_PAGE_SIZE")

    def read():
        return int(os.pread(statm, 256, 0).split()[1]) * page
    return read


class StepMemory:
    """Memory once a step over a whole run (`sample(step)` at the end of each step): resident
    memory, and each GPU context's (what CUDA says is in use on the device), each a
    growth.StepSeries (bounded: a run of any length keeps evenly spread samples). One reading
    of /proc a step, a few microseconds (`_rss_reader`); with `children`, the child processes'
    memory too (a DataLoader's workers: their summed PSS, `children_memory`'s measure), once
    there are any. `warmup`: the steps the loop knows to be
    warm-up (its first epoch), for the verdict. `plain()` is what gluonperf.measure.growth's
    `records_of` judges, with the memory still available to each (for the steps until it runs out)."""

    CHILDREN_LOOKUP = 10  # samples between two lookups of the child processes

    def __init__(self, contexts=(), cap=1 << 15, children=False):
        self.cap = cap
        self.series = {"rss": StepSeries(cap)}
        self.children = StepSeries(cap) if children else None  # with `children`: the child processes' PSS
        self._children, self._looked = [], 0
        self.contexts = []
        self.warmup = self.steps = 0   # the steps known to be warm-up; the last step sampled
        self._rss = _rss_reader()
        self.add_contexts(contexts)

    def add_contexts(self, contexts):
        """Sample these contexts' memory too from now on (GPU ones; a CPU context's is the RSS)."""
        for ctx in contexts:
            if ctx.device_type == "gpu" and str(ctx) not in self.series:
                self.contexts.append(ctx)
                self.series[str(ctx)] = StepSeries(self.cap)

    def rss_now(self):
        """This process's resident memory now, in bytes."""
        return self._rss()

    def sample(self, step):
        """The memory at the end of step `step` (counted from 1)."""
        self.steps = max(self.steps, step)
        if not self.series["rss"].wants(step):
            return
        self.series["rss"].append(step, self._rss())
        for ctx in self.contexts:
            self.series[str(ctx)].append(step, device_memory_used(ctx))
        if self.children is not None:
            self._sample_children(step)

    def _sample_children(self, step):
        """The child processes' memory (summed PSS) at `step`, once there are any; the list of
        them is looked up again every CHILDREN_LOOKUP samples (it scans /proc)."""
        if self._looked % self.CHILDREN_LOOKUP == 0:
            try:
                self._children = _PROCESS.children(recursive=True)
            except psutil.Error:
                self._children = []
        self._looked += 1
        total = 0
        for child in self._children:
            try:
                total += _pss(child)
            except (psutil.Error, ProcessLookupError):
                pass
        if self._children:
            self.children.append(step, total)

    def plain(self):
        """{what: {'steps': [...], 'bytes': [...], 'available_bytes': ...}}: 'rss' (available: the
        machine's, psutil's `virtual_memory().available`) and each GPU context (its free memory)."""
        out = {}
        for what, series in self.series.items():
            if what == "rss":
                available = psutil.virtual_memory().available
            else:
                ctx = next(c for c in self.contexts if str(c) == what)
                available = mx.context.gpu_memory_info(ctx.device_id)[0]
            out[what] = {"steps": list(series.steps), "bytes": list(series.values), "available_bytes": available}
        if self.children is not None and len(self.children):
            out["children"] = {"steps": list(self.children.steps), "bytes": list(self.children.values),
                               "available_bytes": psutil.virtual_memory().available}
        return out

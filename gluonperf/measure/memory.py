"""Process RSS (psutil) and device memory sampling, with peak tracking.

A before/after difference misses everything that was allocated and freed inside
the region, which is exactly what running ahead does; so a background thread
samples RSS (and, for GPU contexts, device memory) while the region runs.
"""
import threading
from dataclasses import dataclass, field
from typing import Dict, Optional

import mxnet as mx
import psutil

_PROCESS = psutil.Process()


def rss():
    """Resident set size of this process, in bytes."""
    return _PROCESS.memory_info().rss


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

    @property
    def rss_growth(self):
        """Peak RSS above what the process held when the region started."""
        return self.rss_peak - self.rss_before

    def summary(self):
        row = {"rss_peak_bytes": self.rss_peak, "rss_growth_bytes": self.rss_growth}
        for name, peak in self.device_peak.items():
            row["device_peak_bytes[%s]" % name] = peak
        return row


class MemorySampler:
    """Samples RSS (and GPU memory) every `interval` seconds on a background thread.

    Use as a context manager or with start()/stop(); stop() returns a MemoryUsage.
    """

    def __init__(self, contexts=(), interval=0.002):
        self.contexts = [c for c in contexts if c.device_type == "gpu"]
        self.interval = interval
        self._stop = threading.Event()
        self._thread = None
        self.usage: Optional[MemoryUsage] = None

    def _sample(self):
        value = rss()
        self._peak = max(self._peak, value)
        self._count += 1
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
        self._sample()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="gluonperf-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()
        self._sample()
        self.usage = MemoryUsage(self._before, self._peak, rss(), self._count, dict(self._device_peak))
        return self.usage

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False

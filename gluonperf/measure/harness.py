"""The shared measuring harness: `Benchmark`, `Measurement`, `measure`, `environment`.

MXNet runs operators asynchronously: Python queues work and returns at once. Every
timed region here therefore ends in `mx.nd.waitall()` before the clock stops, so
what is reported is how long the work took, not how fast Python queued it.

`measure_interleaved(..., yardstick=True)` also times a `Yardstick`, a fixed piece of MXNet
work, in every repeat beside the variants: how fast the machine ran MXNet at that moment, with
the run's settings. Two runs saved apart with the same settings can then be compared against
it (`comparison.judge`), which cancels much of the drift between them.
"""
import os
import platform
import shutil
import statistics
import subprocess
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import mxnet as mx

from ..runtime import guard, wire
from .memory import MemorySampler, MemoryUsage

try:
    import resource
except ImportError:  # not on Windows
    resource = None

# A result whose interquartile range exceeds this fraction of its median is flagged noisy.
NOISY_SPREAD = 0.10

YARDSTICK = "(yardstick)"  # its label among the callables measure_interleaved runs


class Yardstick:
    """A fixed piece of MXNet work on `ctx` (default cpu): a chain of six 256 x 256 matrix
    products and an elementwise pass over 2 MiB, about 5-15 ms on a CPU. Called, it returns its
    seconds (to a sync point). It runs where the benchmark's operators run, on MXNet's engine
    threads with the run's thread settings: a pure-Python loop, timed on the Python thread,
    followed a benchmark less well on a 2-core VM (its speed there depends on which core the
    engine's thread was on; docs/verdicts.md). So it measures the machine's speed for MXNet
    under these settings, and stands for the machine only between runs with the same settings."""

    def __init__(self, ctx=None):
        ctx = ctx or mx.cpu()
        self.a = mx.nd.full((256, 256), 1.0 / 256, ctx=ctx)
        self.v = mx.nd.ones((1 << 19,), ctx=ctx)

    def __call__(self):
        start = time.perf_counter()
        c = self.a
        for _ in range(6):
            c = mx.nd.dot(c, self.a)
        w = (self.v * 1.0001 + 0.5).sum()
        c.wait_to_read()
        w.wait_to_read()
        return time.perf_counter() - start


def minor_faults():
    """Page faults this process has taken so far that needed no disk read (each maps a fresh
    page, e.g. of an array malloc got from the system); None where the OS does not count them."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt if resource else None


def sync():
    """Wait until every operation MXNet has queued (on every context) has finished."""
    mx.nd.waitall()


def ndarrays_in(value):
    """The NDArrays in `value` (one, or nested lists and tuples of them, as a Block's output or
    an optimizer's state is), in order; anything else holds none."""
    if isinstance(value, mx.nd.NDArray):
        return [value]
    if isinstance(value, (list, tuple)):
        return [a for v in value for a in ndarrays_in(v)]
    return []


class Benchmark:
    """Time a block of code up to the point where MXNet has finished its work.

        with Benchmark('hybridized') as b:
            for _ in range(1000):
                net(x)
        b.seconds

    As in the book, `Benchmark('label', verbose=True)` prints `label time: 0.1234 sec`.
    With `memory=True` a background sampler records peak RSS (and device memory of
    the GPU contexts in `contexts`) during the block: `b.memory` is a MemoryUsage.
    `b.minor_faults` counts the process's minor page faults during the block (every
    thread's, so MXNet's workers are in it), or is None where the OS does not count them.
    """

    def __init__(self, description="Done", verbose=False, memory=False, contexts=(), interval=0.002):
        self.description = description
        self.verbose = verbose
        self.seconds: Optional[float] = None
        self.memory: Optional[MemoryUsage] = None
        self.minor_faults: Optional[int] = None
        self._sampler = MemorySampler(contexts, interval) if memory else None

    def __enter__(self):
        sync()  # work queued before the block must not be billed to it
        if self._sampler:
            self._sampler.start()
        self._faults = minor_faults()
        self._start = time.perf_counter()
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            sync()
        finally:
            self.seconds = time.perf_counter() - self._start
            if self._faults is not None:
                self.minor_faults = minor_faults() - self._faults
            if self._sampler:
                self.memory = self._sampler.stop()
        if self.verbose and exc_type is None:
            print("%s time: %.4f sec" % (self.description, self.seconds))
        return False


def _quartiles(samples):
    if len(samples) < 2:
        return samples[0], samples[0]
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return q1, q3


@dataclass(frozen=True)
class Measurement:
    """Seconds per call, one sample per repeat; statistics are computed from the samples."""
    label: str
    samples: Tuple[float, ...]
    number: int = 1
    peak_rss: Optional[int] = None
    faults: Optional[Tuple[int, ...]] = None  # minor page faults per repeat (all `number` calls)
    yardstick: Optional[Tuple[float, ...]] = None  # seconds of `yardstick` in the same repeats

    def __post_init__(self):
        if not self.samples:
            raise ValueError("a Measurement needs at least one sample")

    @property
    def median(self):
        return statistics.median(self.samples)

    @property
    def mean(self):
        return statistics.fmean(self.samples)

    @property
    def min(self):
        return min(self.samples)

    @property
    def max(self):
        return max(self.samples)

    @property
    def iqr(self):
        q1, q3 = _quartiles(self.samples)
        return q3 - q1

    @property
    def faults_per_call(self):
        """Minor page faults per call, averaged over the repeats; None where not counted."""
        return None if self.faults is None else sum(self.faults) / (len(self.faults) * self.number)

    @property
    def spread(self):
        """IQR relative to the median."""
        return self.iqr / self.median if self.median > 0 else 0.0

    @property
    def noisy(self):
        return self.spread > NOISY_SPREAD

    def summary(self):
        """Flat record fields: times in seconds per call, with the raw samples (`samples_s`,
        one per repeat, in the order measured) so that a saved run can be tested later."""
        row = {
            "median_s": self.median,
            "mean_s": self.mean,
            "min_s": self.min,
            "max_s": self.max,
            "iqr_s": self.iqr,
            "repeats": len(self.samples),
            "number": self.number,
            "noisy": self.noisy,
            "samples_s": list(self.samples),
        }
        if self.peak_rss is not None:
            row["rss_peak_bytes"] = self.peak_rss
        if self.faults is not None:
            row["minor_faults"] = self.faults_per_call
        if self.yardstick is not None:
            row.update(yardstick_s=statistics.median(self.yardstick), yardstick_samples_s=list(self.yardstick))
        return row


def measure(fn, label="", warmup=1, repeat=5, number=1, progress=None, yardstick=False):
    """Run `fn` `warmup` times, then `repeat` timed repeats of `number` calls each.

    Each repeat is one `Benchmark` region (so it ends in a sync); the sample is the
    region's time divided by `number`. `progress`, `yardstick`: as in `measure_interleaved`,
    which also samples memory (`memory`, `contexts`): `measure_interleaved({label: fn}, ...)[label]`.
    """
    return measure_interleaved({label: fn}, warmup, repeat, number, progress=progress, yardstick=yardstick)[label]


def measure_interleaved(fns, warmup=1, repeat=5, number=1, memory=False, contexts=(), progress=None,
                        yardstick=False):
    """Measure several callables in one run, interleaved repeat by repeat.

    `fns` maps labels to callables. Interleaving (and rotating which goes first)
    means a change of machine load during the run hits every variant alike.
    `progress`, if given, is called with no argument after each timed region
    (outside it), e.g. a progress bar's update. With `yardstick`, a `Yardstick` (on the
    first of `contexts`) runs once in every repeat, in the rotation, and every Measurement
    carries its times. Returns {label: Measurement}.
    """
    if repeat < 1 or number < 1 or warmup < 0:
        raise ValueError("repeat and number must be >= 1 and warmup >= 0")
    if YARDSTICK in fns:
        raise ValueError("%r is the yardstick's label; name the callable otherwise" % YARDSTICK)
    fns = dict(fns, **({YARDSTICK: Yardstick(contexts[0] if contexts else None)} if yardstick else {}))
    labels = list(fns)
    for label in labels:
        for _ in range(warmup):
            fns[label]()
        sync()
    samples = {label: [] for label in labels}
    faults = {label: [] for label in labels}
    peaks = {label: 0 for label in labels}
    for r in range(repeat):
        order = labels[r % len(labels):] + labels[:r % len(labels)]
        for label in order:
            fn = fns[label]
            if label == YARDSTICK:
                samples[label].append(fn())
                continue
            with Benchmark(label, memory=memory, contexts=contexts) as b:
                for _ in range(number):
                    fn()
            samples[label].append(b.seconds / number)
            faults[label].append(b.minor_faults)
            if memory:
                peaks[label] = max(peaks[label], b.memory.rss_peak)
            if progress is not None:
                progress()
    ruler = tuple(samples.pop(YARDSTICK)) if yardstick else None
    return {
        label: Measurement(label, tuple(samples[label]), number, peaks[label] if memory else None,
                           None if None in faults[label] else tuple(faults[label]), ruler)
        for label in labels if label != YARDSTICK
    }



def _gpu_names():
    if not shutil.which("nvidia-smi"):
        return []
    try:
        done = guard.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], timeout=10)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def cpu_model():
    """The processor's name as lscpu shows it ('Model name'), or platform.processor()."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(contexts=()):
    """What a result depends on: MXNet build, contexts, threads, machine."""
    features = mx.runtime.Features()
    return {
        "mxnet": mx.__version__,
        "features": sorted(name for name in features.keys() if features.is_enabled(name)),
        "contexts": [str(c) for c in contexts],
        "num_gpus": mx.context.num_gpus(),
        "gpus": _gpu_names(),
        "cpu_count": os.cpu_count(),
        "env": {
            k: v for k, v in sorted(os.environ.items())
            if k.startswith(("MXNET_", "DMLC_", "KMP_", "OMP_", "GOMP_", "MALLOC_", wire.PREFIX, "DNNL_", "ONEDNN_"))
            or k in ("MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "LD_PRELOAD")
        },
        "python": platform.python_version(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_model": cpu_model(),
    }

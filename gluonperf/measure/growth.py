"""Is memory growing step after step? The growth per step with its interval, and a verdict.

`fit` takes the samples (step, bytes) after the warm-up, cuts them into about BLOCKS blocks
(MIN_BLOCK samples at least), takes each block's level as the median of its last third, and
returns the trimmed mean of the increments between neighbouring levels (the share TRIM dropped
at each end, MIN_TRIM at least) with its Tukey-McLaughlin interval. The verdict, against
FLOOR_BYTES a step (one page): `flat` when the whole interval lies below it, `grows` when its
lower end lies above it, `inconclusive` otherwise. `records_of` makes the records (bench
'growth', name 'memory growth') of what a `StepMemory` (gluonperf.measure.memory) sampled.

The one thing to know: a jump that happens once lands in one or two increments, which the
trimming leaves out; a leak moves every one. The samples count steps, never seconds.
Pure functions: no MXNet, no psutil. The model, why a trimmed mean and not a median, and what
the interval assumes: docs/measuring.md, "Memory over time: is the job leaking?".
"""
import math
from dataclasses import dataclass
from typing import Optional

from ..records import level_text

FLOOR_BYTES = 4096      # a step's growth below this (one page) means nothing
MIN_BLOCK = 5           # samples in a block, at least
BLOCKS = 30             # blocks to aim for: 29 increments, of which the 5 lowest and 5 highest are trimmed
TRIM = 0.2              # the share of increments trimmed at each end (SciPy's and Wilcox's default)
MIN_TRIM = 2            # ... at least this many (a jump split over two increments)
MIN_INCREMENTS = 9      # fewer: no verdict (5 kept after the trimming)
WARMUP_SHARE = 0.2      # the first fifth of a run's steps is its warm-up (when that is longer than the caller's)
LEVEL = 0.95
MB = 1e6                # rates are said in MB (10^6 bytes) per 1,000 steps
JUMP_SPREAD = 5         # a block increment this many winsorized SDs above the rate is part of a one-off step
JUMP_BYTES = 8 * 2 ** 20  # ... which is said when it added at least this much (8 MiB: a leak's RSS moves in chunks
JUMP_SHARE = 0.1          # of a few MiB) and at least this share of what the rate adds over the steps counted
VERDICTS = ("grows", "flat", "inconclusive")
BENCH = "growth"


@dataclass(frozen=True)
class Growth:
    """What `fit` found: `verdict`, the growth `rate` in bytes a step with its interval `low`..`high`
    at `level` (None when there are too few steps for one), from `n` increments between blocks of
    `block` samples, over `steps` steps counted after `warmup`; `floor` in bytes a step; memory
    at the first and last block's end; `why`: for too few steps, what a verdict needs."""
    verdict: str
    rate: Optional[float]
    low: Optional[float]
    high: Optional[float]
    level: Optional[float]
    n: int
    block: int
    steps: int
    warmup: int
    floor: float
    first_bytes: Optional[float] = None
    last_bytes: Optional[float] = None
    why: Optional[str] = None
    jump_bytes: Optional[float] = None    # the largest one-off step in memory (`one_off_step`), its size
    jump_from: Optional[int] = None       # ... between these steps
    jump_to: Optional[int] = None

    def fields(self, available=None):
        """Flat record fields; with `available` (bytes of memory the machine has left), for
        `grows`, the steps until that runs out at the rate (and at its interval's ends)."""
        out = {"growth_verdict": self.verdict}
        for key, scale in (("growth_bytes_per_step", 1.0), ("growth_mb_per_1000_steps", 1000 / MB)):
            at = (lambda x: None if x is None else x * scale)
            out.update({key: at(self.rate), key + "_ci_low": at(self.low), key + "_ci_high": at(self.high),
                        key + "_n": self.n, key + "_level": self.level})
        out.update(floor_bytes_per_step=self.floor, steps_counted=self.steps, warmup_steps=self.warmup,
                   block_steps=self.block, level_first_bytes=self.first_bytes, level_last_bytes=self.last_bytes,
                   growth_method="trimmed mean of block increments, Tukey-McLaughlin interval",
                   one_off_step_bytes=self.jump_bytes, one_off_step_from=self.jump_from,
                   one_off_step_to=self.jump_to)
        if self.verdict == "grows" and available:
            out.update(available_bytes=available, steps_to_exhaust=steps_until(available, self.rate),
                       steps_to_exhaust_low=steps_until(available, self.high),
                       steps_to_exhaust_high=steps_until(available, self.low))
        elif available:
            out["available_bytes"] = available
        return out

    def text(self, available=None):
        """One sentence: 'grows: 29.1 MB per 1,000 steps (95% CI 27.3-30.8, ...)', and the
        one-off step in memory, when there was one."""
        if self.low is None:
            return "inconclusive: %s" % self.why
        if self.jump_bytes is None:
            return self._rate_text(available)
        return "%s; memory stepped up once by %s between steps %d and %d: a one-off step, left out of the rate" % (
            self._rate_text(available), bytes_text(self.jump_bytes), self.jump_from, self.jump_to)

    def _rate_text(self, available):
        rate = "%s MB per 1,000 steps" % _mb(self.rate)
        over = "%d increments between blocks of %d steps, %d steps after %d of warm-up" % (
            self.n, self.block, self.steps, self.warmup)
        ci = "%s CI %s to %s, %s" % (level_text(self.level), _mb(self.low), _mb(self.high), over)
        floor = "a floor of %s a step" % bytes_text(self.floor)
        if self.verdict == "flat":
            return "flat: %s (%s), all of it below %s" % (rate, ci, floor)
        if self.verdict == "inconclusive":
            return "inconclusive: %s (%s), against %s; more steps would settle it" % (rate, ci, floor)
        lasts = ""
        if available:
            lasts = "; at that rate the %s of memory this machine has available last about %s more steps" % (
                bytes_text(available), "{:,.0f}".format(steps_until(available, self.rate)))
        return "grows: %s (%s), above %s%s" % (rate, ci, floor, lasts)


def _mb(x):
    return "%.3g" % (x * 1000 / MB)


def bytes_text(n):
    """'80 MiB', '-12 KiB', '512 bytes'."""
    for unit, size in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if abs(n) >= size:
            return "%.3g %s" % (n / size, unit)
    return "%d bytes" % n


def steps_until(available, rate):
    """Steps until `available` bytes are used up at `rate` bytes a step (None when it does not grow)."""
    if rate is None or rate <= 0:
        return None
    return available / rate


def warmup_steps(total, at_least=0):
    """The steps of a run of `total` steps left out as its warm-up: the first WARMUP_SHARE of
    them, or `at_least` (what the caller knows to be warm-up: fenced or profiled steps) if more."""
    return max(int(at_least), int(math.ceil(WARMUP_SHARE * total)))


def trimmed_interval(values, level=LEVEL, trim=TRIM, min_trim=MIN_TRIM):
    """(trimmed mean, low, high, g) of `values`: the mean without the g lowest and g highest
    (g = max(min_trim, floor(trim n))) and its Tukey-McLaughlin interval at `level` (see the
    module's docstring); low and high are None when fewer than MIN_INCREMENTS values are given."""
    from .stats import t_quantile
    x = sorted(float(v) for v in values)
    n = len(x)
    if n == 0:
        raise ValueError("no values to make an interval of")
    g = max(min_trim, int(trim * n))
    if n < MIN_INCREMENTS or n - 2 * g < 3:
        return sum(x) / n, None, None, 0
    kept = x[g:n - g]
    mean = math.fsum(kept) / len(kept)
    winsorized = [x[g]] * g + kept + [x[n - g - 1]] * g
    wmean = math.fsum(winsorized) / n
    sd = math.sqrt(math.fsum((w - wmean) ** 2 for w in winsorized) / (n - 1))
    half = t_quantile(0.5 + level / 2, n - 2 * g - 1) * sd / ((1 - 2 * g / n) * math.sqrt(n))
    return mean, mean - half, mean + half, g


def blocks_of(samples, blocks=BLOCKS, min_block=MIN_BLOCK):
    """(block size, [(step, level)] of each block) of `samples` ((step, bytes), by step): blocks
    of consecutive samples, at least `min_block` each, about `blocks` of them (the first
    samples left over go: the nearest to the warm-up); a block's level is the median of its
    last third, at the step of its last sample. The last third, not the whole block: the
    levels of neighbouring blocks then hold no steps in common near their increment, which
    stays about independent of the next for a random walk (medians of whole blocks gave
    increments whose interval covered a random walk's drift 90% of the time for 95%; the last
    third 95%), and a spike at one sample moves the level little (the last sample alone: 1.5
    times as wide an interval for memory that returns to a level)."""
    size = max(min_block, len(samples) // blocks)
    count = len(samples) // size
    start = len(samples) - count * size
    tail = max(1, size // 3)
    out = []
    for b in range(count):
        end = start + (b + 1) * size
        values = sorted(v for _, v in samples[end - tail:end])
        out.append((samples[end - 1][0], (values[(tail - 1) // 2] + values[tail // 2]) / 2))
    return size, out


def fit(samples, warmup=0, floor=FLOOR_BYTES, level=LEVEL, blocks=BLOCKS, min_block=MIN_BLOCK):
    """The growth of memory sampled at steps: `samples` is (step, bytes) pairs; those at steps
    below `warmup` are left out (the module's docstring says how the rest are fitted).
    Returns a Growth; with too few steps for an interval, its verdict is inconclusive and
    `why` says how many a verdict needs."""
    if floor <= 0 or not 0 < level < 1:
        raise ValueError("floor must be positive and level between 0 and 1; got %r, %r" % (floor, level))
    kept = sorted((int(s), float(v)) for s, v in samples if s >= warmup)
    if any(not math.isfinite(v) for _, v in kept):
        raise ValueError("memory samples must be finite numbers of bytes")
    steps = kept[-1][0] - kept[0][0] + 1 if kept else 0
    size, ends = blocks_of(kept, blocks, min_block)
    spans = [(s1, s2, (b2 - b1) / (s2 - s1)) for (s1, b1), (s2, b2) in zip(ends, ends[1:]) if s2 > s1]
    increments = [inc for _, _, inc in spans]
    base = dict(n=len(increments), block=size, steps=steps, warmup=int(warmup), floor=float(floor),
                first_bytes=ends[0][1] if ends else None, last_bytes=ends[-1][1] if ends else None)
    rate, low, high, _ = trimmed_interval(increments, level) if increments else (None, None, None, 0)
    if low is None:
        need = MIN_INCREMENTS + 1
        return Growth("inconclusive", rate, None, None, None, why=(
            "too few steps for a verdict: %d sampled after %d of warm-up; one needs %d blocks of %d or more "
            "(%d steps after the warm-up)" % (len(kept), warmup, need, min_block, need * min_block)), **base)
    verdict = "flat" if high < floor else "grows" if low > floor else "inconclusive"
    jump = one_off_step(spans, rate, least=max(JUMP_BYTES, JUMP_SHARE * rate * steps))
    if jump:
        base.update(jump_bytes=jump[0], jump_from=jump[1], jump_to=jump[2])
    return Growth(verdict, rate, low, high, level, **base)


def one_off_step(spans, rate, spread=JUMP_SPREAD, least=JUMP_BYTES):
    """(bytes, from step, to step) of the largest one-off step in memory, or None: of the block
    increments `spans` ((from step, to step, bytes a step)), the run of consecutive ones each
    more than `spread` winsorized standard deviations of them above the growth `rate` (the
    trimmed mean, which a step leaves alone), and what they added above that rate, when it is
    `least` bytes or more (`fit` asks for JUMP_BYTES, and JUMP_SHARE of what the rate adds over
    the steps counted): what the trimming left out of the rate, said."""
    x = sorted(inc for _, _, inc in spans)
    n = len(x)
    g = max(MIN_TRIM, int(TRIM * n))
    kept = [x[g]] * g + x[g:n - g] + [x[n - g - 1]] * g
    mean = math.fsum(kept) / n
    sd = math.sqrt(math.fsum((w - mean) ** 2 for w in kept) / max(1, n - 1))
    best, run = None, None
    for s1, s2, inc in spans:
        if inc - rate > spread * sd:
            added = (inc - rate) * (s2 - s1)
            run = (run[0] + added, run[1], s2) if run else (added, s1, s2)
            if best is None or run[0] > best[0]:
                best = run
        else:
            run = None
    return best if best and best[0] >= least else None


def records_of(memory, warmup=0, **common):
    """The records (bench 'growth'; name 'memory growth' for resident memory, 'memory growth
    [gpu0]' for a device's) of what `measure.memory.StepMemory.plain()` gave: each series' Growth
    (`Growth.fields`), what it is (`memory`), the steps sampled and run, and `finding`, its
    sentence. `warmup`: the steps the caller knows to be warm-up (fenced, profiled); the first
    WARMUP_SHARE of the run is left out when that is more. 'children' (a DataLoader's workers:
    their proportional set size, summed) is 'memory growth [children]'."""
    from ..records import result
    out = []
    for what, line in memory.items():
        steps = line["steps"]
        total = max(steps) if steps else 0
        found = fit(zip(steps, line["bytes"]), warmup=warmup_steps(total, warmup))
        label = ("resident memory" if what == "rss" else "the child processes' memory (PSS)" if what == "children"
                 else "memory on %s" % what)
        available = line.get("available_bytes")
        out.append(result(BENCH, "memory growth" if what == "rss" else "memory growth [%s]" % what, memory=label,
                          steps_sampled=len(steps), steps_run=total, finding="%s over the run: %s" % (
                              label, found.text(available)), **found.fields(available), **common))
    return out


class StepSeries:
    """(step, value) samples of one quantity, one a step, kept in bounded memory: past `cap`
    samples every other one is dropped and only every second step is sampled from then on
    (the stride doubles), so a run of any length keeps evenly spread samples of all of it."""

    def __init__(self, cap=1 << 15):
        if cap < 2 * MIN_BLOCK * (MIN_INCREMENTS + 1):
            raise ValueError("cap must be at least %d samples; got %r" % (2 * MIN_BLOCK * (MIN_INCREMENTS + 1), cap))
        self.cap, self.stride = cap, 1
        self.steps, self.values = [], []

    def wants(self, step):
        """Whether the sample of `step` would be kept (a caller can skip reading it otherwise)."""
        return step % self.stride == 0

    def append(self, step, value):
        if step % self.stride:
            return
        self.steps.append(step)
        self.values.append(value)
        if len(self.steps) > self.cap:
            self.stride *= 2
            kept = [i for i, s in enumerate(self.steps) if s % self.stride == 0]
            self.steps = [self.steps[i] for i in kept]
            self.values = [self.values[i] for i in kept]

    def samples(self):
        return list(zip(self.steps, self.values))

    def __len__(self):
        return len(self.steps)

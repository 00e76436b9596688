"""Is the machine quiet enough to measure? Load and CPU steal before and during a measurement.

As pyperf warns on an unstable system, gluonperf looks at the machine before it measures
(other processes' load, the hypervisor's steal, from /proc/stat through psutil) and round by
round while it measures (the CPU time other processes took, the steal, and the drift of the
baseline). `Watch.round()` gives each round's figures for its record; `judge` turns them into
warnings, and an unstable machine gets wider intervals (stats.level_for).
"""
import math
import os
import time

import psutil

# Past these the machine counts as unstable for a measurement.
BUSY_CORES = 0.5      # other processes' average load, in cores
STEAL_SHARE = 0.10    # share of the CPU time the hypervisor gave to other guests
BASELINE_DRIFT = 0.25  # the baseline's slowest round against its fastest, less 1
# A round of interleaved runs during which other processes kept more than RERUN_CORES busy, or the
# hypervisor took more than RERUN_STEAL of the CPU time, is run again (`disturbed`). What decides is
# measured beside the runs, never their figures, and the whole round goes (the baseline's run with the
# candidates'), so no candidate is favoured and the intervals keep their level.
RERUN_CORES = 0.1
RERUN_STEAL = 0.05


def _busy_and_steal(times):
    steal = getattr(times, "steal", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    total = sum(getattr(times, f) for f in times._fields if f not in ("guest", "guest_nice"))  # in user
    return total - idle - steal, steal, total


def _own_seconds(proc):
    """CPU seconds of this process and every child it waited for or still has."""
    t = proc.cpu_times()
    total = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
    for child in proc.children(recursive=True):
        try:
            c = child.cpu_times()
            total += c.user + c.system
        except psutil.Error:
            pass
    return total


class Watch:
    """CPU time of the machine and of this process tree, from one `round()` to the next:
    each round's `others_busy_cores` (the load of other processes, in cores),
    `steal_share` (of the machine's CPU time) and `seconds` (its wall time)."""

    def __init__(self):
        self._proc = psutil.Process()
        self._mark()

    def _mark(self):
        self._wall = time.monotonic()
        self._machine = psutil.cpu_times()
        self._own = _own_seconds(self._proc)

    def round(self):
        machine, own, wall = psutil.cpu_times(), _own_seconds(self._proc), time.monotonic()
        busy1, steal1, total1 = _busy_and_steal(machine)
        busy0, steal0, total0 = _busy_and_steal(self._machine)
        elapsed = max(wall - self._wall, 1e-9)
        others = max(0.0, (busy1 - busy0) - (own - self._own)) / elapsed
        steal = (steal1 - steal0) / (total1 - total0) if total1 > total0 else 0.0
        self._mark()
        return {"others_busy_cores": round(others, 3), "steal_share": round(steal, 4), "seconds": round(elapsed, 3)}


def before(interval=0.5):
    """The machine before a measurement: other processes' load over `interval` seconds (this
    process sleeps meanwhile), the steal, and the 1-minute load average."""
    watch = Watch()
    time.sleep(interval)
    out = watch.round()
    try:
        out["load_1m"] = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        pass
    return out


def disturbed(load):
    """Why a round whose `Watch.round()` figures are `load` should be run again, or None. A round
    shorter than a second is never judged: the CPU times count in ticks of 10 ms."""
    if load.get("seconds", 0.0) < 1.0:
        return None
    if load.get("others_busy_cores", 0.0) > RERUN_CORES:
        return "other processes kept %.2f of a core busy" % load["others_busy_cores"]
    if load.get("steal_share", 0.0) > RERUN_STEAL:
        return "the hypervisor took %.0f%% of the CPU time" % (100 * load["steal_share"])
    return None


def drift(baseline):
    """The baseline's slowest round against its fastest, less 1 (rates or times alike), or None."""
    values = [v for v in baseline if v]
    if len(values) < 2:
        return None
    return max(values) / min(values) - 1


def judge(rounds=(), start=None, baseline=None):
    """Warnings about the machine for a measurement, from the state `start` (`before()`), the
    per-round figures `rounds` (`Watch.round()` dicts) and the `baseline`'s per-round values.
    An empty list means stable."""
    out = []
    if start and start.get("others_busy_cores", 0) > BUSY_CORES:
        out.append("other processes kept %.1f cores busy before the measurement began"
                   % start["others_busy_cores"])
    busy = [r["others_busy_cores"] for r in rounds if r.get("others_busy_cores") is not None]
    if busy and sum(busy) / len(busy) > BUSY_CORES:
        out.append("other processes kept %.1f cores busy on average while it ran" % (sum(busy) / len(busy)))
    steal = [r["steal_share"] for r in rounds if r.get("steal_share") is not None] + \
        ([start["steal_share"]] if start and start.get("steal_share") is not None else [])
    if steal and max(steal) > STEAL_SHARE:
        out.append("the hypervisor took up to %.0f%% of the CPU time (steal)" % (100 * max(steal)))
    moved = drift(baseline or ())
    if moved is not None and math.isfinite(moved) and moved > BASELINE_DRIFT:
        out.append("the baseline itself moved by %.0f%% between rounds" % (100 * moved))
    return out


def warning_line(warnings, widened=True):
    """One line for people, or None. `widened`: the intervals were made at 99% for it (tune's
    interleaved rounds widen them for load and steal only, not for a baseline that moved)."""
    if not warnings:
        return None
    if not widened:
        return ("the machine was unstable (%s): each round's ratios are against the baseline's run of the "
                "same round, so the drift cancels and the spread it adds is in the intervals" % "; ".join(warnings))
    return ("the machine was unstable (%s): intervals are at 99%% instead of 95%%, so fewer changes "
            "are called" % "; ".join(warnings))


class Check:
    """The machine around one measurement, as a context manager: its state before (`before`)
    and its load while the block ran (`Watch`). After the block: `warnings` (see `judge`;
    `baseline`, per-round values of the baseline, may be given to `finish`), `level` for the
    intervals (95%, or 99% when unstable) and `fields()` for the records."""

    def __init__(self, interval=0.2):
        self.interval = interval
        self.start, self.load, self.warnings = None, None, []

    def __enter__(self):
        self.start = before(self.interval)
        self._watch = Watch()
        return self

    def __exit__(self, *exc):
        self.load = self._watch.round()
        self.finish()
        return False

    def finish(self, baseline=None):
        self.warnings = judge([self.load] if self.load else [], self.start, baseline)
        return self.warnings

    @property
    def level(self):
        from .stats import level_for
        return level_for(not self.warnings)

    def fields(self):
        out = {"machine_before": self.start, "machine_load": self.load}
        if self.warnings:
            out["machine_warnings"] = list(self.warnings)
        return out

"""How long an `infer` plan will take, said before it starts: each step's seconds from the plan
and a few forward calls of each rung timed in the parent (`call_times`, `estimate`), the
default largest batch fitted to a time budget (`fit_batch`), and what each flag that shortens
a plan would leave (`shorter`).

A step's time is modelled from what LoadGen must reach and what a call costs, not measured:
a guess of the right size, which the progress bar corrects as the steps finish.
docs/commands/infer.md ("How long it takes") says how each step is priced.
"""
import math
from dataclasses import dataclass, field, replace

from . import loadgen
from .serve import SERVER_TRIALS

IMPORT_S = 3.0          # a fresh process importing Python, MXNet and gluonperf on a small machine, about
RUN_OVERHEAD_S = 1.0    # a LoadGen run's own: set-up, early stopping, its log written and read, the shapes
                        # asked after it (the LeNet example's 72 runs of 1 s, with all else, took 251 s on a busy host)
BUILD_CALLS = 2         # a first call at a new shape costs about two: graph and oneDNN primitives built
WARM_CALLS = 3          # instances.Pool.warm's calls at each size
TIMED_SIZES = (1, 8)    # the batch sizes call_times times
FIT_BATCHES = (64, 32, 16, 8)   # the default largest batch, the first whose plan fits the budget
BUDGET_S = 600          # infer's --budget default: the whole command within 10 minutes
FIT_SHARE = 0.85        # the share of the budget a fitted plan's estimate may fill: room for the estimate's error
                        # (the LeNet example's old defaults: 206 s estimated, about 240 s taken on a busy host)
SERVER_LOAD = 0.5       # the server search's rates: about half what the instances can answer
PARTS = ("cold starts", "instances' start and warm-up", "LoadGen runs", "server rate searches", "confirmation")


@dataclass(frozen=True)
class CallTimes:
    """Seconds of one forward call of each rung at a few batch sizes ({rung: {batch: s}}) and of
    loading it ({rung: s}), timed in a process of `threads` threads. A rung not timed (another
    engine's system, one that failed) is taken to cost as much as the slowest one timed."""
    calls: dict
    load_s: dict = field(default_factory=dict)
    threads: int = 1

    def __post_init__(self):
        if not self.calls or not all(self.calls.values()):
            raise ValueError("no call times: give at least one rung with a time at one batch size")
        bad = [(r, b, s) for r, times in self.calls.items() for b, s in times.items() if b < 1 or not s > 0]
        if bad or self.threads < 1:
            raise ValueError("call times need batch sizes of at least 1, seconds above 0 and threads of at "
                             "least 1; got %s, threads %r" % (bad[:3], self.threads))

    def call(self, rung, batch, threads=None):
        """Seconds of a call of `rung` at `batch` in a process of `threads` threads (default: the parent's)."""
        if batch < 1:
            raise ValueError("batch %r: give a batch size of at least 1" % (batch,))
        if rung in self.calls:
            points = sorted(self.calls[rung].items())
        else:
            return max(self.call(r, batch, threads) for r in self.calls)
        seconds = _interpolated(points, batch)
        return seconds * self.threads / (threads or self.threads)

    def load(self, rung):
        return self.load_s.get(rung, max(self.load_s.values(), default=0.0))


def _interpolated(points, batch):
    if batch <= points[0][0]:
        return points[0][1]
    for (b0, s0), (b1, s1) in zip(points, points[1:]):
        if batch <= b1:
            return s0 + (s1 - s0) * (batch - b0) / (b1 - b0)
    b, s = points[-1]
    return s * batch / b


@dataclass
class Estimate:
    """About how long a plan takes: `total_s`, its `parts` ({PARTS item: s}), its LoadGen `runs`
    at most, and each step's seconds (`steps`, keyed as serve.Session names its steps)."""
    total_s: float
    parts: dict
    runs: int
    steps: dict

    def seconds(self, step):
        """A Session step's expected seconds (0 for a step the plan did not foresee)."""
        return self.steps.get(step, 0.0)


def estimate(plan, times, cores):
    """The Estimate of `plan` (serve.Plan) from `times` (CallTimes) on a machine of `cores` cores.
    ValueError for fewer than one core."""
    if cores < 1:
        raise ValueError("cores %r: give at least 1" % (cores,))
    duration = 600.0 if plan.minimums.mlperf else plan.minimums.duration_s
    names = [r.name for r in plan.runnable()]
    steps, parts = {}, dict.fromkeys(PARTS, 0.0)
    first, second = plan.cold_start
    for name in names:
        steps[("cold", name)] = (IMPORT_S + times.load(name) + BUILD_CALLS * (times.call(name, first) + times.call(
            name, second)) + plan.cold_steady_calls * times.call(name, second))
        parts["cold starts"] += plan.cold_starts * steps[("cold", name)]
    for layout in plan.layouts:
        for name in names:
            for step, seconds in _layout_steps(plan, times, cores, layout, name, duration).items():
                steps[step] = seconds
                if step[0] == "warm":
                    parts["instances' start and warm-up"] += seconds
                elif step[0] == "run":
                    parts["LoadGen runs"] += plan.rounds * seconds
                else:
                    parts["server rate searches"] += SERVER_TRIALS * seconds
    server = [seconds for step, seconds in steps.items() if step[0] == "server"]
    if server:
        steps[("confirm",)] = max(server)
        parts["confirmation"] = plan.planned_confirmation() * max(server)
    return Estimate(sum(parts.values()), parts, plan.planned_runs(), steps)


def _layout_steps(plan, times, cores, layout, name, duration):
    """{step: seconds} of one rung under one layout: its instances' start and warm-up, each
    configuration's LoadGen run, each server batching's rate tried."""
    def call(batch):
        return times.call(name, batch, layout.threads)
    # every rung's instances start at once, sharing the cores; then each warms up at every size
    steps = {("warm", layout, name): layout.instances * (IMPORT_S + times.load(name)) / cores
             + (BUILD_CALLS + WARM_CALLS) * sum(call(b) for b in plan.warm_sizes(layout))}
    for scenario, batch in plan.configurations():
        if scenario == "single-stream":
            busy = loadgen.FEWEST_QUERIES[scenario] * call(1)
        elif scenario == "multi-stream":
            busy = loadgen.FEWEST_QUERIES[scenario] * call(math.ceil(batch / layout.instances))
        else:  # offline: each instance's two batches at least (serve's offline_samples)
            busy = 2 * call(batch)
        steps[("run", layout, name, scenario, batch)] = max(
            duration * (1.1 if scenario == "offline" else 1.0), busy) + RUN_OVERHEAD_S
    rate = SERVER_LOAD * layout.instances / call(1)
    for window in plan.windows():
        steps[("server", layout, name, window)] = max(duration, loadgen.FEWEST_QUERIES["server"] / rate) \
            + RUN_OVERHEAD_S
    return steps


def with_largest_batch(plan, largest):
    """`plan` whose largest batch size (offline's, multi-stream's) is `largest`: its sizes below
    it kept, those above dropped; the cold start's new shape `largest` where it was the largest."""
    if largest < 1:
        raise ValueError("largest %r: give a batch size of at least 1" % (largest,))
    old = max(plan.batch_sizes)
    sizes = tuple(sorted({b for b in plan.batch_sizes if b < largest} | {largest}))
    cold = (plan.cold_start[0], largest) if plan.cold_start[1] == old else plan.cold_start
    return replace(plan, batch_sizes=sizes, cold_start=cold)


def fit_batch(plan, times, cores, budget_s=BUDGET_S, spent_s=0.0, candidates=FIT_BATCHES, share=FIT_SHARE):
    """(plan, Estimate) at the largest of `candidates` whose estimate, with `spent_s` already
    spent, is within `share` of `budget_s`; at the smallest when none is. Infer's rule for its
    default --batch-sizes: a slow model is served at a smaller batch rather than past the budget."""
    if not candidates or min(candidates) < 1 or budget_s <= 0 or not 0 < share <= 1:
        raise ValueError("give batch sizes of at least 1 to choose from, a budget above 0 and a share of it in "
                         "(0, 1], got %r, %r and %r" % (candidates, budget_s, share))
    for largest in sorted(set(candidates), reverse=True):
        fitted = with_largest_batch(plan, largest)
        guess = estimate(fitted, times, cores)
        if spent_s + guess.total_s <= share * budget_s:
            break
    return fitted, guess


def shorter(plan, times, cores):
    """What each flag that shortens `plan` would leave: [{'flag', 'value', 'total_s'}], the
    shortest first. --layouts: the one layout whose plan is shortest; --precision: without the
    costliest rung but static; --scenario: without the costliest scenario; --batch-sizes with
    FIT_BATCHES' smallest as the largest; --rounds 3 when more (fewer would leave the ratios'
    intervals too wide to say anything); --cold-starts 0."""
    options = []

    def option(flag, value, variant):
        options.append({"flag": flag, "value": value, "total_s": estimate(variant, times, cores).total_s})
    if len(plan.layouts) > 1:
        best = min(plan.layouts, key=lambda l: estimate(replace(plan, layouts=[l]), times, cores).total_s)
        option("--layouts", str(best), replace(plan, layouts=[best]))
    rungs = [r for r in plan.runnable() if r.name != "static"]
    if len(plan.runnable()) > 1 and rungs:
        costly = max(rungs, key=lambda r: times.call(r.name, max(plan.batch_sizes)))
        kept = [r for r in plan.rungs if r is not costly]
        option("--precision", ",".join(r.name for r in kept if not r.error), replace(plan, rungs=kept))
    if len(plan.scenarios) > 1:
        variants = [tuple(s for s in plan.scenarios if s != drop) for drop in plan.scenarios]
        kept = min(variants, key=lambda s: estimate(replace(plan, scenarios=s), times, cores).total_s)
        option("--scenario", ",".join(kept), replace(plan, scenarios=kept))
    if max(plan.batch_sizes) > min(FIT_BATCHES):
        fitted = with_largest_batch(plan, min(FIT_BATCHES))
        option("--batch-sizes", ",".join(map(str, fitted.batch_sizes)), fitted)
    if plan.rounds > 3:
        option("--rounds", "3", replace(plan, rounds=3))
    if plan.cold_starts:
        option("--cold-starts", "0", replace(plan, cold_starts=0))
    return sorted(options, key=lambda o: o["total_s"])


def call_times(rungs, ctx, sizes=TIMED_SIZES, spec=None, threads=None):
    """CallTimes of each built rung, timed here: its load, then at each of `sizes` one call that
    builds and one timed call, each synced. A rung that fails here is left out (its time is then
    the slowest one's). `threads`: this process's (default: `runtimes.threads`, as a rung sees them)."""
    import time
    import mxnet as mx
    import numpy as np
    from .ladder import input_dtype, load
    from .runtimes import threads as process_threads
    calls, loads = {}, {}
    for rung in rungs:
        if rung.error:
            continue
        try:
            start = time.perf_counter()
            forward = load(rung, ctx, spec if rung.kind == "spec" else None)
            mx.nd.waitall()
            loads[rung.name] = time.perf_counter() - start
            dtype = input_dtype(rung.spec) if rung.kind == "spec" else "float32"
            timed = {}
            for b in sizes:
                x = mx.nd.array(np.random.RandomState(0).uniform(size=(b,) + tuple(rung.input_shape)), ctx=ctx,
                                dtype=dtype)
                forward(x).wait_to_read()
                start = time.perf_counter()
                forward(x).wait_to_read()
                timed[b] = max(time.perf_counter() - start, 1e-6)
            calls[rung.name] = timed
        except Exception:  # noqa: BLE001 (the estimate goes on without it; serving the rung will say why)
            loads.pop(rung.name, None)
    if not calls:
        raise ValueError("no rung could be timed: nothing to estimate from")
    threads = threads or process_threads()
    return CallTimes(calls, loads, threads)

"""The runs of one `infer` command: every rung's cold start, then every rung under every
layout, its scenarios in rounds.

`Session.run` starts each rung cold once a round (`coldstart.measure`), then, for each layout,
the instances of every rung side by side (`instances.Pool`), warmed at every batch size a run
will send; each round runs every configuration of every rung back to back, the rungs' order
rotating; then the server's rate search, and last the server's choice confirmed (`_confirm`).
`Session.records()` turns what has been measured so far into records (`rounds`), also when
the command is stopped part-way. docs/commands/infer.md ("How it works") says why each step.
"""
import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Optional

from . import coldstart, deploy, loadgen, rounds
from .instances import READY_TIMEOUT, Batcher, InstanceError, Layout, Pool, assign_cores, buckets
from .search import Trial, find_peak_rate

OFFLINE_RETRIES = 2     # LoadGen's offline query is sized by the expected rate: too few samples, run again
SERVER_TRIALS = 8       # runs a rate search may make (its bracket closes to 15% in about 5 or 6)
SERVER_TOLERANCE = 0.15
CONFIRM_ROUNDS = 3      # the fewest interleaved rounds that confirm the server's choice
CONFIRM_PASSES = 2      # rates the confirmation tries: the best's, then SERVER_TOLERANCE below it


@dataclass
class Plan:
    """What one command measures: the prepared rungs (`ladder.Rung`, those with an error
    are reported, not run), layouts, scenarios, batch sizes and the rest of its flags. A rung
    may also be another engine's system (an object with `name`, `error` and `to_text()`)
    whose instances run `commands[name]` (benchmarks/inference.py serves PyTorch so)."""
    rungs: list
    layouts: list
    scenarios: tuple
    batch_sizes: tuple
    rounds: int = 3
    minimums: loadgen.Minimums = field(default_factory=loadgen.Minimums)
    latency_bound_s: Optional[float] = None
    batch_window_s: Optional[float] = None
    max_batch: int = 8
    ctx: str = "cpu"
    threshold: float = 0.05
    log_dir: str = "."
    base: dict = field(default_factory=dict)   # fields of every record (model, ...; per rung under 'rungs')
    cold_start: tuple = (1, 64)                # the batch sizes of a cold start: its first call's, a new shape's
    cold_starts: int = 0                       # fresh processes per rung, one a round
    cold_steady_calls: int = coldstart.STEADY_CALLS  # the calls a cold start's steady_call_s is the median of
    commands: dict = field(default_factory=dict)  # rung -> its instances' program (instances.Pool's command)
    ready_timeout_s: float = READY_TIMEOUT     # what an instance may take to load its rung, and to warm up

    def runnable(self):
        return [r for r in self.rungs if not r.error]

    def configurations(self):
        """(scenario, batch size) of the scenarios run in rounds."""
        out = []
        for scenario in loadgen.SCENARIOS:
            if scenario in self.scenarios and scenario != "server":
                out += [(scenario, 1)] if scenario == "single-stream" else [(scenario, b) for b in self.batch_sizes]
        return out

    def windows(self):
        """The server scenario's batchings: none, and --batch-window's when it is on."""
        if "server" not in self.scenarios:
            return []
        return [0.0] + ([self.batch_window_s] if self.batch_window_s else [])

    def warm_sizes(self, layout):
        """The batch sizes an instance of `layout` warms up at: every size a run will send it."""
        sizes = {1}
        for scenario, batch in self.configurations():
            sizes.add(math.ceil(batch / layout.instances) if scenario == "multi-stream" else batch)
        if self.batch_window_s and "server" in self.scenarios:
            sizes.update(buckets(self.max_batch))  # a server batch is padded to one of them
        return sorted(sizes)

    def planned_runs(self):
        per_layout = len(self.configurations()) * self.rounds + len(self.windows()) * SERVER_TRIALS
        return len(self.layouts) * len(self.runnable()) * per_layout + self.planned_confirmation()

    def confirm_rounds(self):
        return max(CONFIRM_ROUNDS, self.rounds)

    def planned_confirmation(self):
        """The most runs the server choice's confirmation can take (deploy.CONTENDERS at most)."""
        servers = len(self.layouts) * len(self.runnable()) * len(self.windows())
        return min(deploy.CONTENDERS, servers) * self.confirm_rounds() if servers > 1 else 0

    def planned_cold_starts(self):
        return len(self.runnable()) * self.cold_starts

    def least_seconds(self):
        """The least the runs can take: each lasts its minimum duration (MLPerf's: 600 s)."""
        return self.planned_runs() * (600.0 if self.minimums.mlperf else self.minimums.duration_s)


class Session:
    """Runs a Plan on a sample library (`samples.SampleLibrary`); `progress(amount)` after each
    step: `cost(step)` of it, a step being a key of `steps` below (default: 1 a cold start or
    LoadGen run, 0 an instance's warm-up: the count of runs; `estimate.Estimate.seconds`: the
    seconds it was expected to take, so a bar says the time left). `records()` at any time:
    what has been measured so far.

    Steps: ('cold', rung), ('warm', layout, rung), ('run', layout, rung, scenario, batch),
    ('server', layout, rung, window) per rate tried, ('confirm',) per confirmation run."""

    def __init__(self, plan, library, progress=lambda n=1: None, cost=None):
        self.plan, self.library = plan, library
        cost = cost or (lambda step: 0 if step[0] == "warm" else 1)
        self.progress = lambda step, n=1: progress(n * cost(step))
        self.runs = {}      # (layout, rung, scenario, batch) -> [run fields]
        self.servers = []   # records of finished rate searches
        self.confirms = []  # records of the server choice's confirmation
        self.failed = []    # records of rungs that could not be served
        self.hints = {}
        self.colds = {}     # rung -> [coldstart.measure's parts with 'round']

    def run(self):
        self._cold_starts()
        for layout in self.plan.layouts:
            self._layout(layout)
        self._confirm()
        return self.records()

    def records(self):
        """Records of what has been measured: a configuration with fewer rounds than planned
        (the command was stopped) is marked `partial`."""
        base = self.plan.base
        built = [rounds.rung_record(base, r.name, r.error) for r in self.plan.rungs if r.error]
        measured = rounds.config_records(self.runs, base, self.plan.threshold)
        colds = [rounds.cold_start_record(base, name, runs) for name, runs in self.colds.items() if runs]
        for record in measured + colds:
            planned = self.plan.cold_starts if record.metrics["scenario"] == rounds.COLD_START else self.plan.rounds
            if record.metrics["rounds"] < planned:
                record.metrics["partial"] = True
        return built + self.failed + colds + measured + self.servers + self.confirms

    def _cold_starts(self):
        """Each runnable rung's cold start `cold_starts` times, once a round, the rungs' order
        rotating; one that fails is a record saying why (its rung is still served)."""
        rungs = self.plan.runnable()
        if not self.plan.cold_starts or not rungs:
            return
        from ..runtime.contexts import parse_contexts
        ctx = parse_contexts(self.plan.ctx)[0]
        failed = set()
        for r in range(self.plan.cold_starts):
            for rung in rungs[r % len(rungs):] + rungs[:r % len(rungs)]:
                if rung.name not in failed:
                    try:
                        parts = coldstart.measure(rung, ctx, self.plan.cold_start,
                                                  steady_calls=self.plan.cold_steady_calls)
                        self.colds.setdefault(rung.name, []).append(dict(parts, round=r))
                    except RuntimeError as e:
                        failed.add(rung.name)
                        self.failed.append(rounds.rung_record(self.plan.base, rung.name, str(e),
                                                                scenario=rounds.COLD_START))
                self.progress(("cold", rung.name))

    # --- one layout --------------------------------------------------------------------

    def _layout(self, layout):
        cores = assign_cores(layout)
        pools = {}
        try:
            for rung in self.plan.runnable():
                pools[rung.name] = Pool(rung.to_text(), layout, self.library.spec(), self.plan.ctx, cores,
                                        self.plan.commands.get(rung.name)).start()
            for name in list(pools):
                self._guarded(layout, pools, name, lambda pool: self._warm(pool, layout, name))
            for r in range(self.plan.rounds):
                for scenario, batch in self.plan.configurations():
                    names = list(pools)
                    for name in names[r % len(names):] + names[:r % len(names)] if names else []:
                        self._guarded(layout, pools, name,
                                      lambda pool: self._round(pool, layout, name, scenario, batch, r))
            for window in self.plan.windows():
                for name in list(pools):
                    self._guarded(layout, pools, name, lambda pool: self._search(pool, layout, name, window))
        finally:
            for pool in pools.values():
                pool.close()

    def _guarded(self, layout, pools, name, work):
        """`work(pool)`; an instance that fails takes its rung out of this layout, with a record."""
        if name not in pools:
            return
        try:
            work(pools[name])
        except InstanceError as e:
            pools.pop(name).close()
            self.failed.append(rounds.rung_record(self.plan.base, name, str(e), layout))

    def _warm(self, pool, layout, name):
        pool.ready(self.plan.ready_timeout_s)
        self.hints[(layout, name)] = pool.warm(self.plan.warm_sizes(layout), timeout=self.plan.ready_timeout_s)
        self.progress(("warm", layout, name))

    # --- LoadGen runs --------------------------------------------------------------------

    def _loadgen(self, pool, load, split, folder, window=0.0):
        """One LoadGen test on `pool`: its figures, with its log folder."""
        pool.depth = 2 if load.scenario == "offline" else 1
        pool.on_done = loadgen.complete
        batcher = Batcher(window, self.plan.max_batch, pool.submit) if window else None

        def issue(samples):
            if batcher:
                batcher.add(samples)
            else:
                pool.submit(split(samples))
        try:
            values = loadgen.run(issue, load, self.plan.minimums, len(self.library), folder)
        finally:
            if batcher:
                batcher.close()
        if pool.failure:
            raise InstanceError(pool.failure)
        served, cold = pool.shapes(self.plan.ready_timeout_s)
        figures = dict(loadgen.figures(values, load.scenario), log=os.path.relpath(folder, self.plan.log_dir),
                       batch_sizes_served=sorted(served), warmed_batch_sizes=list(pool.sizes))
        if cold:  # the padding should make this impossible: say so if it ever is not
            figures["unwarmed_batch_sizes"] = cold
        return figures

    def _round(self, pool, layout, name, scenario, batch, r):
        hint = self.hints[(layout, name)]
        folder = os.path.join(self.plan.log_dir, str(layout), name, "%s-b%d" % (scenario, batch), "round%d" % (r + 1))
        n = layout.instances
        if scenario == "single-stream":
            load, split = loadgen.Load(scenario, expected_latency_s=hint[1]), _one_batch
        elif scenario == "multi-stream":
            load = loadgen.Load(scenario, samples_per_query=batch, expected_latency_s=hint[math.ceil(batch / n)])
            split = _split_in(n)
        else:
            load = loadgen.Load(scenario, expected_rate=n * batch / hint[batch], offline_samples=2 * n * batch)
            split = _batches_of(batch)
        for attempt in range(OFFLINE_RETRIES + 1):
            figures = self._loadgen(pool, load, split, folder)
            if figures.get("loadgen_valid") or not _too_short(figures) or attempt == OFFLINE_RETRIES:
                break
            load = _corrected(load, figures)
        figures["round"] = r
        self.runs.setdefault((layout, name, scenario, batch), []).append(figures)
        self.progress(("run", layout, name, scenario, batch))

    def _start_rate(self, layout, name):
        """Where the search starts: half the offline rate measured here, else of the warm-up's."""
        offline = [f.get("samples_per_s") for (lay, n, scenario, _), rs in self.runs.items()
                   if lay == layout and n == name and scenario == "offline" for f in rs]
        offline = [v for v in offline if v]
        if offline:
            return 0.5 * statistics.median(offline)
        return 0.5 * layout.instances / self.hints[(layout, name)][1]

    def _search(self, pool, layout, name, window):
        bound = self.plan.latency_bound_s
        label = "server-w%gms" % (window * 1e3) if window else "server"

        def run(rate):
            folder = os.path.join(self.plan.log_dir, str(layout), name, label, "rate%.4g" % rate)
            load = loadgen.Load("server", server_rate=rate, latency_bound_s=bound)
            figures = self._loadgen(pool, load, _one_batch, folder, window)
            self.progress(("server", layout, name, window))
            return Trial(rate, bool(figures.get("loadgen_valid")), figures.get("p99_s"), figures)
        peak = find_peak_rate(run, self._start_rate(layout, name), SERVER_TOLERANCE, max_trials=SERVER_TRIALS)
        self.progress(("server", layout, name, window), SERVER_TRIALS - len(peak.trials))  # planned, not needed
        self.servers.append(rounds.server_record(self.plan.base, name, layout, window, self.plan.max_batch,
                                                 bound, peak))


    # --- the server's choice, confirmed ------------------------------------------------

    def _confirm(self):
        """The contenders (deploy.contenders: the best deployable server configuration and those
        whose bracket overlaps it) run again at the best's valid rate, a round each in rotating
        order, `confirm_rounds` rounds, every one's instances started and warmed first: the
        rounds that deploy.settle judges. When none held the bound in every round, they run again
        at the search's tolerance below it (CONFIRM_PASSES in all), so that the deploy line names
        a rate that held. An instance that fails leaves the choice unconfirmed."""
        contenders = deploy.contenders(self.servers)
        planned = self.plan.planned_confirmation()
        if not contenders:
            self.progress(("confirm",), planned)
            return
        rate, pools, done = contenders[0].metrics["rate_at_bound_per_s"], {}, 0
        try:
            pools = self._confirm_pools(contenders)
            for number in range(CONFIRM_PASSES):
                found = self._confirm_at(contenders, pools, rate, number)
                self.confirms += found
                done += len(contenders) * self.plan.confirm_rounds()
                if deploy.settle(found, self.plan.threshold)[1] != "none":
                    break
                rate = deploy.lower_rate(rate, SERVER_TOLERANCE)
        except InstanceError as e:
            self.failed.append(rounds.rung_record(self.plan.base, "confirmation", str(e), scenario=rounds.CONFIRM))
            return
        finally:
            for pool, _, _ in pools.values():
                pool.close()
        self.progress(("confirm",), max(0, planned - done))

    def _confirm_pools(self, contenders):
        """{name: (Pool, layout, batch window)} of the contenders, every instance started and warmed
        (filled in as they start, so that a failure closes those started)."""
        rungs = {r.name: r for r in self.plan.runnable()}
        pools = {}
        try:
            for c in contenders:
                m = c.metrics
                layout = Layout(m["instances"], m["threads"])
                pools[c.name] = (Pool(rungs[m["precision"]].to_text(), layout, self.library.spec(), self.plan.ctx,
                                      assign_cores(layout), self.plan.commands.get(m["precision"])).start(),
                                 layout, m.get("batch_window_s") or 0.0)
            for pool, layout, _ in pools.values():
                pool.ready(self.plan.ready_timeout_s)
                pool.warm(self.plan.warm_sizes(layout), timeout=self.plan.ready_timeout_s)
        except BaseException:
            for pool, _, _ in pools.values():
                pool.close()
            raise
        return pools

    def _confirm_at(self, contenders, pools, rate, number):
        """One pass of the confirmation: every contender at `rate`, interleaved round by round."""
        runs = {c.name: [] for c in contenders}
        for r in range(self.plan.confirm_rounds()):
            for c in contenders[r % len(contenders):] + contenders[:r % len(contenders)]:
                pool, _, window = pools[c.name]
                folder = os.path.join(self.plan.log_dir, "confirm", "pass%d" % (number + 1), c.name.replace(" ", "-"),
                                      "round%d" % (r + 1))
                load = loadgen.Load("server", server_rate=rate, latency_bound_s=self.plan.latency_bound_s)
                runs[c.name].append(dict(self._loadgen(pool, load, _one_batch, folder, window), round=r))
                self.progress(("confirm",))
        return [rounds.confirm_record(c, rate, runs[c.name], self.plan.threshold) for c in contenders]


def _one_batch(samples):
    return [list(samples)]


def _split_in(parts):
    """A query's samples in `parts` near-equal batches (multi-stream: one per instance)."""
    def split(samples):
        size = math.ceil(len(samples) / parts)
        return [samples[i:i + size] for i in range(0, len(samples), size)]
    return split


def _batches_of(size):
    def split(samples):
        return [samples[i:i + size] for i in range(0, len(samples), size)]
    return split


def _too_short(figures):
    """A run LoadGen called invalid because it ran out of queries before its minimums: its
    hints (expected rate or latency) were off, not the system."""
    return figures.get("loadgen_min_duration_met") is False or figures.get("loadgen_min_queries_met") is False


def _corrected(load, figures):
    """`load` with the hints this run measured (LoadGen sizes its queries by them)."""
    from dataclasses import replace
    if load.scenario == "offline" and figures.get("samples_per_s"):
        return replace(load, expected_rate=1.5 * figures["samples_per_s"])
    if figures.get("mean_latency_s"):
        return replace(load, expected_latency_s=0.5 * figures["mean_latency_s"])
    return load

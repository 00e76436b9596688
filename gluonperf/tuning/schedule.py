"""The interleaved schedule: candidates run beside a run of their baseline, round after round,
each leaving once its `Rounds` policy says its verdict is settled; and the Results they make.

`interleave(table, measure, ...)` runs a lever's rounds into its `Table`; `summarize(table)`
turns it into Results, best first; `winner` picks the candidate to keep, and `Sweeps` keeps
what a stopped command measured. Rounds share no run, so their ratios are independent, as the
intervals assume. Whether a round was disturbed (and is run again) is decided from the
machine's load beside the runs (`measure.machine`), never from their figures. Why:
docs/verdicts.md, "Stopping each candidate once its verdict is settled" and "An unstable
machine".
"""
import math
import statistics
import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from ..measure import machine, sequential, stats
from ..measure.stats import winner  # noqa: F401 (the candidate to keep of one lever's results; script/advice names it)
from ..records import Result
from .rounds import SEQUENTIAL, as_rounds

ERROR = "error"          # `stopped` of a candidate whose run failed
BUDGET = "budget spent"  # `stopped` of the candidates still in when the tune's budget ended their rounds
OUTRUN = "cannot beat a faster one"  # `stopped` of a candidate that could not be kept instead of one already faster
# the `stopped` of a candidate the plan or the budget ended before its verdict: a larger budget may settle it
UNSETTLED = (sequential.PLAN_DONE, BUDGET, sequential.SHORT)


@dataclass
class Table:
    """What the rounds of one lever fill, and what `summarize` needs to judge it."""
    candidates: list                        # the baseline first; each has a `name`
    rounds: object                          # a Rounds (or a number of rounds)
    lever: str = ""
    threshold: float = stats.THRESHOLD
    describe: Optional[Callable] = None     # candidate -> {fields} for its record (its command line, ...)
    figures: dict = field(default_factory=dict)   # name -> [figure per run] (None: failed)
    ratios: dict = field(default_factory=dict)    # name -> [ratio per round] (None: a run failed)
    errors: dict = field(default_factory=dict)    # name -> its first error
    loads: list = field(default_factory=list)     # per round: machine.Watch().round()
    stopped: dict = field(default_factory=dict)   # name -> {"reason", "stable", "round"}
    reruns: list = field(default_factory=list)    # the rounds set aside (machine.disturbed): why, load, ratios
    start: Optional[dict] = None                  # machine.before() as the rounds began

    def __post_init__(self):
        names = [c.name for c in self.candidates]
        if len(set(names)) != len(names):
            raise ValueError("candidate names must differ: %s" % names)
        self.rounds = as_rounds(self.rounds)
        for c in self.candidates:
            self.figures.setdefault(c.name, [])
            self.ratios.setdefault(c.name, [])
        if self.start is None:
            self.start = self.rounds.machine.before(0.2)

    @property
    def tried(self):
        return max(1, len(self.candidates) - 1)

    def stable(self):
        """No other process busy and no steal past `machine`'s lines so far. A baseline that moved
        between rounds is warned of (`summarize`) but does not widen the intervals: each ratio is
        taken against the baseline's run of the same round, which cancels a drift, and the spread
        a drift adds within a round is in the ratios' own."""
        return not machine.judge(self.loads, self.start)

    def ratios_estimate(self, name):
        """The geometric mean of a candidate's per-round ratios."""
        logs = [math.log(x) for x in self.ratios[name] if x is not None]
        return math.exp(sum(logs) / len(logs)) if logs else 1.0

    def runs_left(self, active):
        """The most runs the rounds can still take with the `active` candidates in them."""
        if not active:
            return 0
        left = max(0, self.rounds.planned - max(len(self.ratios[c.name]) for c in active))
        return left * (len(active) + 1)


def _rotated(items, r):
    k = r % len(items) if items else 0
    return items[k:] + items[:k]


def interleave(table, measure, progress=None, left=None, log=None, stopping=lambda: False):
    """Run the rounds of `table`: each round the baseline and every candidate still in, once, in
    an order that rotates (B c1 c2, c1 c2 B, c2 B c1, ...: over a full turn each candidate runs as
    often before as after the baseline, so a machine that drifts steadily favours none).
    `measure(candidate)` is the caller's (a runner's) run of one candidate: (figure, None) or
    (None, one-line error); a candidate whose run fails leaves at once, every candidate when the
    baseline's does. A round during which other processes or the hypervisor took the CPU
    (`machine.disturbed`) is set aside whole (`table.reruns`) and run again, at most
    `Rounds.reruns` times a lever; when its run again is disturbed too, that round is kept and no
    other is run again. `progress()` hears of every run, `left(runs)` after every round of the
    most runs still to come, `log(message)` of every run's figure; `stopping()` true (a signal
    came) ends the rounds after the run under way."""
    base, others = table.candidates[0], list(table.candidates[1:])
    rounds = table.rounds
    watch, budget = rounds.machine.Watch(), rounds.budget

    def one(c, r):
        if c.name in table.errors:
            value, error = None, table.errors[c.name]
        elif budget is None:
            value, error = measure(c)
        else:
            began = budget.clock()
            value, error = measure(c)
            budget.ran(budget.clock() - began)
        table.figures[c.name].append(value)
        if error:
            table.errors.setdefault(c.name, error)
        if log and not stopping():
            log("%s round %d: %s: %s" % (table.lever, r + 1, c.name, error or "%.4g/s" % value))
        if progress:
            progress()
        return value

    active, r, again = list(others), 0, True
    while (active or not others) and rounds.more(r, {c.name: table.ratios[c.name] for c in active}, len(active) + 1):
        figures = {c.name: one(c, r) for c in _rotated([base] + active, r)}
        b = figures[base.name]
        load = watch.round()
        why = machine.disturbed(load)
        if why and table.reruns and table.reruns[-1]["round"] == r + 1:
            again = False  # its run again was disturbed too: the machine is busy for longer than a round
        if why and again and len(table.reruns) < rounds.reruns and not stopping() and all(figures.values()):
            # the machine was busy elsewhere during this round: its runs are set aside and it runs again
            table.reruns.append(dict(round=r + 1, why=why, **load, ratios={
                c.name: figures[c.name] / b for c in active}))
            for name in figures:
                table.figures[name].pop()
            if log:
                log("%s round %d: run again: %s" % (table.lever, r + 1, why))
            continue
        for c in active:
            table.ratios[c.name].append(figures[c.name] / b if figures[c.name] and b else None)
        table.ratios[base.name].append(1.0 if b else None)
        table.loads.append(load)
        r += 1
        stable = table.stable()
        for c in list(active):
            reason = ERROR if c.name in table.errors or base.name in table.errors else rounds.settle(
                table.ratios[c.name], table.tried, stable, table.threshold)
            if reason:
                table.stopped[c.name] = {"reason": reason, "stable": stable, "round": r}
                active.remove(c)
        _outrun(table, active, stable)
        if left:
            left(table.runs_left(active))
    for c in active:  # the rounds ended with these still in: the budget, or the plan's last round
        table.stopped[c.name] = {"reason": BUDGET if r < rounds.maximum and rounds.kind == SEQUENTIAL
                                 else sequential.PLAN_DONE, "stable": table.stable(), "round": r}


def _outrun(table, active, stable):
    """Once a candidate has left as faster, the others of its lever matter only if they could be kept
    instead of it (`winner`: the highest estimate): one that could not, even one standard error better
    than it has looked, leaves (OUTRUN). This only decides which of the faster ones is kept."""
    faster = [math.log(table.ratios_estimate(name)) for name, stop in table.stopped.items()
              if stop["reason"] == sequential.FASTER]
    if not faster or table.rounds.kind != SEQUENTIAL:
        return
    for c in list(active):
        values = [x for x in table.ratios[c.name] if x is not None]
        if len(values) < table.rounds.plan(table.tried).first:
            continue
        iv = table.rounds.interval(values, table.tried, stable)
        if math.log(iv.estimate) + (iv.sd_log or 0.0) / math.sqrt(iv.n) < max(faster):
            table.stopped[c.name] = {"reason": OUTRUN, "stable": stable, "round": len(table.ratios[c.name])}
            active.remove(c)


def _settle_text(stop, table, interval):
    """What an inconclusive verdict says instead of "about N rounds would settle it", under a plan: why
    the plan stopped it, and for one that the plan's rounds or the budget stopped while its interval
    still holds a change worth making, about how many more rounds would settle it."""
    reason = (stop or {}).get("reason")
    if table.rounds.kind != SEQUENTIAL or reason is None:
        return None
    why = {sequential.CANNOT_PAY: "it cannot be %g%% faster: stopped" % (100 * table.threshold),
           sequential.FUTILE: "even a standard error better than it looked it would not be %g%% faster: stopped"
                              % (100 * table.threshold),
           sequential.SHORT: "with its spread it could not be shown faster within its plan's %d rounds: stopped"
                             % table.rounds.maximum,
           sequential.BEHIND: "slower than its baseline in each of its first %d rounds: stopped"
                              % sequential.BEHIND_LOOK,
           sequential.PLAN_DONE: "its plan's %d rounds are done" % table.rounds.maximum,
           BUDGET: "the budget ended its rounds",
           OUTRUN: "a candidate of its lever was faster and this one could not be kept instead: stopped",
           ERROR: "a run failed: stopped"}.get(reason)
    if reason in UNSETTLED and interval.high > 1 + table.threshold:
        need = stats.rounds_needed(interval, table.threshold)
        if need is not None and need > interval.n:
            return "%s; about %d more would settle it (a larger --budget)" % (why, need - interval.n)
    return why


def summarize(table):
    """Results of `table`'s rounds (bench 'tune'), best first: each candidate's figure (median and
    range), its ratio with the interval of its `Rounds` policy (under the sequential plan, the one
    of the look where it left) and verdict, `stopped` (why it left), `rank`, the rounds run again
    (`rerun_rounds`). On an unstable machine (`machine.judge`: other processes busy, steal) the
    levels go from 95% to 99%; a baseline that moved between rounds is a warning only."""
    base = table.figures[table.candidates[0].name]
    warnings = machine.judge(table.loads, table.start, base)
    drift = machine.drift(base)
    out = []
    for c in table.candidates:
        ok = [v for v in table.figures[c.name] if v]
        ratios = [x for x in table.ratios[c.name] if x is not None]
        stop = table.stopped.get(c.name)
        metrics = {"lever": table.lever, "images_per_s": statistics.median(ok) if ok else None,
                   "min_per_s": min(ok) if ok else None, "max_per_s": max(ok) if ok else None,
                   "ratio": None, "rounds": len(ok), "round_ratios": list(table.ratios[c.name]),
                   "rounds_policy": table.rounds.kind}
        metrics.update(table.describe(c) if table.describe else {})
        if c is table.candidates[0]:
            metrics.update(ratio=1.0 if ratios else None, verdict="baseline")
        elif ratios:
            stable = stop["stable"] if stop else table.stable()
            interval = table.rounds.interval(ratios, table.tried, stable)
            metrics.update(interval.fields("ratio"), ratio_joint_level=stats.level_for(stable))
            if table.rounds.kind == SEQUENTIAL:
                metrics["plan_rounds"] = table.rounds.maximum
            # stated at the level the lever's candidates and the plan's looks hold together, as tune's title says
            metrics.update(stats.verdict(interval, table.threshold, settle=_settle_text(stop, table, interval),
                                         stated_level=stats.level_for(stable)).fields())
        if stop and c is not table.candidates[0]:
            metrics["stopped"] = stop["reason"]
        if table.loads:
            metrics["round_load"] = [l["others_busy_cores"] for l in table.loads]
            metrics["round_steal"] = [l["steal_share"] for l in table.loads]
        if table.reruns:  # the rounds run again, with this candidate's ratio in them (None: it was not in)
            metrics["rerun_rounds"] = [dict({k: v for k, v in x.items() if k != "ratios"}, ratio=x["ratios"].get(
                c.name, 1.0 if c is table.candidates[0] else None)) for x in table.reruns]
        if drift is not None:
            metrics["baseline_drift"] = drift
        if warnings:
            metrics["machine_warnings"] = warnings
        if c.name in table.errors:
            metrics["error"] = table.errors[c.name]
        out.append(Result("tune", c.name, metrics))
    out.sort(key=lambda r: -(r.metrics.get("ratio_ci_low") or (1.0 if r.metrics.get("verdict") == "baseline"
                                                                 else 0.0)))
    for rank, r in enumerate(out, 1):
        r.metrics["rank"] = rank
    return out


def machine_notes(results):
    """The lines for people on the machine under these Results: its warnings (saying whether they
    widened the intervals) and the rounds run again; empty when there is nothing to say."""
    warned = sorted({w for r in results for w in r.metrics.get("machine_warnings", ())})
    return [line for line in (machine.warning_line(warned, widened(results)), rerun_line(results)) if line]


def widened(results):
    """Were any of these Results' intervals made at the unstable machine's level?"""
    return any(r.metrics.get("ratio_joint_level") == stats.UNSTABLE_LEVEL for r in results)


def rerun_line(results):
    """One line for people on the rounds run again because the machine was busy elsewhere, or None."""
    seen = {}
    for r in results:
        for x in r.metrics.get("rerun_rounds") or ():
            seen[(r.metrics.get("batch_size"), r.metrics.get("lever"), x["round"], x["others_busy_cores"])] = x["why"]
    if not seen:
        return None
    return ("%d round%s ran again: the machine was busy elsewhere during %s (%s)"
            % (len(seen), "s" if len(seen) > 1 else "", "them" if len(seen) > 1 else "it",
               "; ".join(sorted(set(seen.values()))[:3])))


class Sweeps:
    """What a command's sweeps have measured so far, so that a stopped command keeps it.

    A sweep registers its `Table` with `start` and, when it ends, passes its Results through
    `tidy` (the caller's own additions, e.g. the batch size) into `done` (`finish`).
    `results()` is `done` plus the sweep under way summarized from the runs it has finished,
    each of those Results marked `partial`."""

    def __init__(self, tidy=None):
        self.done, self.tidy = [], tidy
        self._running = None
        self._lock = threading.Lock()

    def start(self, table):
        with self._lock:
            self._running = (table, self.tidy)

    def finish(self, results):
        with self._lock:
            tidy = self._running[1] if self._running else self.tidy
            self._running = None
            if tidy:
                tidy(results)
            self.done.extend(results)
        return results

    def results(self):
        with self._lock:
            out, running = list(self.done), self._running
        if running is not None:
            table, tidy = running
            part = [r for r in summarize(table) if r.metrics["rounds"]]
            for r in part:
                r.metrics["partial"] = True
            if tidy:
                tidy(part)
            out.extend(part)
        return out

"""The sweep engine and the one coordinate search, behind `tune --model` and `tune --`.

`sweep` measures candidates against the first (the baseline), each run a fresh process,
interleaved round after round (`schedule.interleave`), each scored by its figure's ratio to the
baseline's in the same round; `paired_sweep` is the same rounds with one warm process per
candidate (`runner.warm`). `coordinate` sweeps a runner's levers one at a time, keeping a
lever's best only when judged `faster` (`schedule.winner`), then confirms the kept set against
the baseline in one interleaved run; `planned_runs` counts the most runs it can make.

Plain functions returning Results; they never parse arguments and never print. What a run is
belongs to the runner it is given (tuning/runner.py): nothing here knows one.
"""
from dataclasses import dataclass, replace
from typing import Callable, NamedTuple, Optional

from ..measure import sequential, stats
from ..records import duration_text
from ..runtime import guard
from . import schedule
from .candidates import Candidate, unique
from .rounds import as_rounds


@dataclass(frozen=True)
class Observers:
    """Who hears of a search as it runs: `progress()` of every run, `log(message)` of every run as
    it ends, `left(runs)` of the most runs still to come after each round; `sweeps` (a
    `schedule.Sweeps`) keeps what has finished, for a command that is stopped."""
    progress: Optional[Callable] = None
    log: Optional[Callable] = None
    left: Optional[Callable] = None
    sweeps: Optional[schedule.Sweeps] = None


@dataclass(frozen=True)
class Settings:
    """How a search runs and judges its candidates: `rounds`, a number or a `Rounds`; `steps` timed
    steps a run (None: the runner's own); a run stopped after `timeout` seconds; a candidate kept
    only when judged faster by more than `threshold`."""
    rounds: object
    steps: Optional[int] = None
    timeout: float = 900
    threshold: float = stats.THRESHOLD


@dataclass(frozen=True)
class Confirm:
    """The confirmation: the kept set, named `name`, against the base in one interleaved run, once
    `after` levers are kept."""
    name: str = "together"
    after: int = 2


def sweep(candidates, runner, steps, rounds=3, lever="", timeout=900, threshold=stats.THRESHOLD, observers=None):
    """Measure candidates, each run in a fresh process, interleaved with the baseline.

    The first candidate is the baseline; each round runs it and every other candidate
    still in once, in an order that rotates from round to round, and a candidate's ratio
    is its images/s over the baseline's in the same round (gluonperf.tuning.schedule). `rounds`: a number, or a `Rounds` (`Rounds()`: each
    candidate until its verdict is settled). A candidate runs on its own runner when it has one
    (`Candidate.runner`), else on `runner`. `observers` (an `Observers`) hear of the runs and keep
    what has finished. Returns one Result per candidate, best first (see `schedule.summarize`)."""
    heard = observers or Observers()
    table = _table(candidates, runner, steps, rounds, lever, heard.sweeps, threshold)
    schedule.interleave(table, lambda c: _bounded(c.runner or runner, c, steps, timeout, table.rounds.budget),
                        heard.progress, heard.left, heard.log, guard.stopping)
    results = schedule.summarize(table)
    return heard.sweeps.finish(results) if heard.sweeps else results


def _bounded(runner, candidate, steps, timeout, budget):
    """One run of `candidate`, stopped at `timeout` seconds or at the budget's end, whichever comes first:
    a run far slower than the ones before it (OpenMP threads on a core another process keeps busy) would
    take the tune past its budget."""
    if budget is None:
        return runner.measure(candidate, steps, timeout)
    cut = max(1, int(min(timeout, budget.left() - 1)))  # a second to stop it and write what was measured
    value, error = runner.measure(candidate, steps, cut)
    if error and cut < timeout and budget.left() <= 1.5:  # it ran until it was stopped there
        error = "stopped at the end of the tune's --budget, after %d s" % cut
    return value, error


def _table(candidates, runner, steps, rounds, lever, sweeps, threshold):
    """The schedule's table of one sweep, registered with `sweeps`: each record also says its
    batch size, settings and the command line that reproduces it."""
    def describe(c):
        return {"batch_size": int(c.flag("batch_size", 0)) or None, "env_vars": dict(c.env), "flags": dict(c.flags),
                "command": (c.runner or runner).command_line(c, steps)}
    table = schedule.Table(list(candidates), rounds, lever, threshold, describe)
    if sweeps:
        sweeps.start(table)
    return table


def spins_when_idle(candidate):
    """True for a candidate whose OpenMP threads never sleep (GOMP_SPINCOUNT=infinite): waiting
    warm in a paired sweep, it spins on the cores, and every other candidate ran several times
    slower beside it (docs/levers.md, "Threads")."""
    return str(dict(candidate.env).get("GOMP_SPINCOUNT", "")).lower() == "infinite"


def paired_sweep(candidates, runner, steps, rounds=5, lever="", timeout=900, threshold=stats.THRESHOLD,
                 observers=None):
    """Like `sweep` (the same rounds), but each candidate is ONE warmed-up
    process (started once, with its own environment: `runner.start`) that runs `steps` steps when
    asked while the others wait idle: rounds are short, and start-up and warm-up are paid
    once and never timed. ValueError for a candidate that `spins_when_idle`: it would
    slow every other one (`sweep` runs it alone, in a process that exits)."""
    spinning = [c.name for c in candidates if spins_when_idle(c)]
    if spinning:
        raise ValueError("%r cannot wait warm beside the other candidates: its idle OpenMP threads spin for ever "
                         "and take the cores from them; leave it out, or measure it with sweep" % spinning[0])
    heard = observers or Observers()
    table = _table(candidates, runner, steps, rounds, lever, heard.sweeps, threshold)
    workers = {}
    try:
        for c in candidates:  # one at a time, so warm-ups do not compete
            workers[c.name] = (c.runner or runner).start(c, timeout)
        schedule.interleave(table, lambda c: workers[c.name].run(steps), heard.progress, heard.left, heard.log,
                            guard.stopping)
    finally:
        for w in workers.values():
            w.close()
    results = schedule.summarize(table)
    return heard.sweeps.finish(results) if heard.sweeps else results


def stage_sizes(stages, base):
    """{lever: candidates including its baseline} of the stages ((lever, make, ...)) that have a
    candidate besides the baseline when tried from `base`."""
    sizes = {stage[0]: len(unique(stage[1](base))) for stage in stages}
    return {lever: n for lever, n in sizes.items() if n > 1}


def family_size(stages, base):
    """The candidates a tune may try in these stages, besides their baselines: the error rate is
    split over all of them, so that the recipe holds its level whatever levers it names."""
    return sum(n - 1 for n in stage_sizes(stages, base).values())


def planned_runs(stages, base, rounds, confirm=False):
    """The most runs `coordinate` makes in these stages (each round runs the baseline and every
    candidate once; with `confirm`, the confirmation's rounds of the baseline and the kept set
    too), for a progress bar: the sequential plan's candidates leave as their verdicts settle,
    and the bar's total shrinks with them."""
    planned = as_rounds(rounds).planned
    return sum(n * planned for n in stage_sizes(stages, base).values()) + (2 * planned if confirm else 0)


NOT_REACHED = ("the %s left of the tune's --budget could not hold its first %d rounds (%d runs); `--levers %s` tries "
               "it, or a larger --budget")


class Search(NamedTuple):
    """What `coordinate` found: every candidate's Result, the confirmation's Result (or None), the
    kept levers' names, the best candidate (the base when none was kept), the levers the budget
    did not reach ({lever: why}), the levers it left unsettled (`unsettled`) and the levers with
    nothing to try once the levers before them were kept ({lever: why})."""
    results: list
    confirm: Optional[object]
    kept: list
    best: Candidate
    unreached: dict
    unsettled: dict
    idle: dict = {}


def unsettled(results, kept=()):
    """{lever: the Result of its best candidate} of each lever not kept whose rounds the plan or the
    budget ended (schedule.UNSETTLED) while the candidate could still be a change that pays: its
    interval's upper end past the threshold and `rounds_needed` (its verdict's) beyond the rounds it
    had. More rounds may settle these; tune says how many."""
    out = {}
    for r in results:
        m, lever = r.metrics, r.metrics.get("lever")
        if (lever in kept or lever == "confirm" or m.get("verdict") != "inconclusive"
                or m.get("stopped") not in schedule.UNSETTLED
                or (m.get("ratio_ci_high") or 0) <= 1 + m.get("threshold", 0)
                or (m.get("rounds_needed") or 0) <= (m.get("ratio_n") or 0)):
            continue
        if lever not in out or m["ratio"] > out[lever].metrics["ratio"]:
            out[lever] = r
    return out


def coordinate(runner, base, stages, settings, observers=None, confirm=Confirm()):
    """Each lever's candidates against the best so far (`base` to start with: the runner's
    baseline, `Candidate(runner.baseline)` or with the settings every candidate shares), interleaved
    with it; a lever's candidate is kept only when judged `faster`, its error rate split over every
    candidate of every lever planned here (`family_size`), so that the chance that any lever is
    kept when none pays holds the level. Once `confirm.after` levers are kept, the kept set (named
    `confirm.name`) against `base` in one interleaved run. `settings`: the rounds, steps, timeout and
    threshold (a `Settings`). With a budget (`settings.rounds.budget`), the levers
    take the time left in their order (those that pay on most scripts first), each with a plan as
    long as that time affords; one that cannot get its first look is not reached (in
    `Search.unreached`); the confirmation's first look is kept aside once enough levers are kept to call it
    (a lever is worth more than a confirmation that may not be needed). `stages`: [(lever, best ->
    [candidates], best -> why nothing to try or None)] (a stage of two is a lever with nothing to
    say why). `observers.progress()` hears of every run, `observers.left(runs)` of the most runs still
    to come in the whole search; a lever with nothing to try once the levers before it are kept goes
    into `Search.idle` ({lever: why}). Returns a `Search`."""
    rounds, steps, timeout, threshold = as_rounds(settings.rounds), settings.steps, settings.timeout, settings.threshold
    heard = observers or Observers()
    left, idle = heard.left, {}
    family, budget = family_size(stages, base), rounds.budget
    if budget is not None:
        budget.start()
    best, out, kept, unreached = base, [], [], {}
    plans = [len(unique(stage[1](base))) for stage in stages]
    for i, stage in enumerate(stages):
        lever, make, why = (tuple(stage) + (None,))[:3]
        later = sum(n * rounds.planned for n in plans[i + 1:] if n > 1)
        reason = why(best) if why else None
        cands = [] if reason else unique(make(best))
        if len(cands) < 2:
            if reason:
                idle[lever] = reason
            continue
        if budget is not None:  # the confirmation's first look is kept aside once enough levers are kept to call it
            budget.reserve = budget.round_seconds(2 * sequential.FIRST_LOOK) if len(kept) >= confirm.after else 0.0
        fits = budget.open(len(cands)) if budget is not None else None
        if fits is not None and fits < sequential.FIRST_LOOK:
            unreached[lever] = NOT_REACHED % (duration_text(max(0.0, budget.left() - budget.reserve)),
                                              sequential.FIRST_LOOK, sequential.FIRST_LOOK * len(cands), lever)
            continue
        plan = rounds.for_lever(family, fits)
        results = _measure(runner)(cands, runner, steps, plan, lever, timeout, threshold,
                                   replace(heard, left=(lambda n, later=later: left(n + later)) if left else None))
        out.extend(results)
        won = schedule.winner(results)
        if won is not None:
            best = next(c for c in cands if c.name == won.name)
            kept.append(lever)
        if left:
            left(later)
    if budget is not None:
        budget.close()
    together = None
    if len(kept) >= confirm.after and (budget is None or budget.fits(2 * sequential.FIRST_LOOK)):
        final = Candidate(confirm.name, best.env, best.flags, best.runner)
        results = _measure(runner)([base, final], runner, steps, rounds, "confirm", timeout, threshold, heard)
        out.extend(results)
        together = next(r for r in results if r.name == confirm.name)
    return Search(out, together, kept, best, unreached, unsettled(out, kept), idle)


def _measure(runner):
    """The sweep that runs this runner's candidates: warm workers, or a fresh process a run."""
    return paired_sweep if runner.warm else sweep

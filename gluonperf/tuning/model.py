"""`tune --model`: which settings make a model train fastest here, per batch size.

The baseline is the book's run (one context, imperative, the runner's thread default); the
levers are the runner's own (`runner.levers`: gluonperf/training/levers.py for gluonperf's
training loop and the steprate worker), swept by the one coordinate search
(`search.coordinate`), the winning settings confirmed against the baseline in one interleaved
run. It knows the runner through the protocol alone (tuning/runner.py).
"""
from dataclasses import dataclass
from typing import Optional

from ..records import Result
from ..runtime.threads import idle_warnings
from ..training.model_spec import as_spec
from . import search
from .candidates import Candidate
from .rounds import Rounds, as_rounds

BF16_WARNING = ("--dtype bfloat16 changes the arithmetic (convolutions and dense layers in bfloat16): check that your "
                "model learns as well before keeping it")


@dataclass(frozen=True)
class Space:
    """What `tune --model` tries: `contexts` (the baseline runs on the first), each of
    `batch_sizes`, the kvstores of `kvstores`, the runner's levers of `only` (None: all), every
    candidate trained with `optimizer` (a runner that takes it: the train runner; None: its
    default)."""
    contexts: tuple
    batch_sizes: tuple
    kvstores: tuple = ("device",)
    only: Optional[tuple] = None
    optimizer: Optional[str] = None


def tune(model, space, runner=None, settings=None, observers=None):
    """The whole sweep, per batch size: each lever's candidates against the best so far.

    `model`: a ModelSpec (or its text); `space`: what is tried (a `Space`). `settings`: a
    `search.Settings` (None: `Rounds()`, as many rounds as the intervals need within its budget,
    of 10 steps a run); `observers`: a `search.Observers`. A candidate is kept
    only when it is judged faster than the lever's baseline (`schedule.winner`: its interval,
    corrected for the candidates tried, above 1 and its estimate past the threshold). Returns every
    candidate's Result (bench='tune', with `lever`, `ratio` to that stage's baseline with its
    interval, `verdict` and `rank`) plus, per batch size, a 'best' Result: the winning settings
    and `command`, and their `speedup` over the defaults measured in one interleaved confirmation
    run of the two (with its interval and verdict), not a product of the levers' ratios.
    `observers.sweeps` (a `Sweeps`) keeps every lever's results as they come, for a stopped tune."""
    optimizer = space.optimizer
    if runner is None:
        raise ValueError("tune needs a runner (gluonperf.training.runners: TRAIN or STEPRATE)")
    if optimizer is not None and not runner.takes("optimizer"):
        raise ValueError("--optimizer needs the train runner; %s trains with SGD only" % runner.name)
    settings = settings or search.Settings(Rounds(), steps=10)
    contexts, text = list(space.contexts), as_spec(model).text  # text in the records and command lines
    out = []
    for batch in space.batch_sizes:
        # the baseline is the book's run: one context, imperative, the runner's thread default
        flags = {"model": text, "batch_size": batch, "ctx": contexts[0], "hybridize": "none"}
        if optimizer is not None:
            flags["optimizer"] = optimizer
        defaults = Candidate(runner.baseline, (), tuple(sorted((k, str(v)) for k, v in flags.items())))
        found = search.coordinate(runner, defaults, _stages(runner, space), settings, observers,
                                  search.Confirm("winning settings", after=1))
        out.extend(found.results)
        out.append(_best(found, runner, batch, settings.steps))
    return out


def _best(found, runner, batch, steps):
    """The 'best' Result of one batch size: the winning settings, confirmed against the defaults."""
    confirm = {"speedup": 1.0, "verdict": "defaults", "verdict_text": "no lever beat its baseline: the "
               "defaults stay"}
    if found.kept and found.confirm is None:  # kept, but the budget ended before the confirmation's rounds
        confirm = {"speedup": None, "verdict": "not confirmed", "verdict_text": "not confirmed: the budget ended "
                   "before the winning settings could run against the defaults (a larger --budget)"}
    if found.confirm is not None:
        r = found.confirm.metrics
        confirm = {"speedup": r.get("ratio"), "verdict": r.get("verdict"), "verdict_text": r.get("verdict_text"),
                   "rounds": r.get("rounds")}
        confirm.update({"speedup" + k[len("ratio"):]: v for k, v in r.items() if k.startswith("ratio_")})
    best = found.best
    ctxs = best.flag("ctx", "cpu").split(",")
    env = dict(best.env)
    threads = runner.threads(ctxs)
    if threads is not None and "OMP_NUM_THREADS" not in env:  # a runner that sets its own
        env["OMP_NUM_THREADS"] = str(threads)
    return Result("tune", "best", dict(confirm, **{
        "lever": "all", "batch_size": batch, "kept_levers": found.kept, "env_vars": dict(best.env),
        "flags": dict(best.flags), "command": runner.command_line(best, steps), "unreached": dict(found.unreached),
        "unsettled": {lever: r.metrics.get("verdict_text") for lever, r in found.unsettled.items()},
        "warnings": idle_warnings(ctxs, env) + ([BF16_WARNING] if best.flag("dtype") == "bfloat16" else [])}))


def _base(space):
    return Candidate("b", (), (("ctx", space.contexts[0]), ("hybridize", "none"))
                     + ((("optimizer", space.optimizer),) if space.optimizer else ()))


def _stages(runner, space):
    """The runner's levers here, of `space.only` (or all)."""
    only = space.only
    return [s for s in runner.levers(list(space.contexts), list(space.batch_sizes), list(space.kvstores))
            if not only or s[0] in only]


def levers_to_try(space, runner):
    """The names of the runner's levers (of `space.only`, or all) that have something to try here:
    those with a candidate besides the baseline."""
    return list(search.stage_sizes(_stages(runner, space), _base(space)))


def count_runs(space, runner, rounds=None):
    """The most subprocess runs `tune` can make (for the progress bar): `search.planned_runs` of each
    batch size, the confirmation of the winning settings against the defaults included. `rounds`: as
    `search.Settings.rounds` (None: `Rounds()`)."""
    rounds = rounds if rounds is not None else Rounds()
    return search.planned_runs(_stages(runner, space), _base(space), as_rounds(rounds),
                               confirm=True) * len(space.batch_sizes)

"""`tune --model`: which settings make a model train fastest here, per batch size.

The baseline is the book's run (one context, imperative, the runner's thread default); the
levers are the runner's own (`runner.levers`: gluonperf/training/levers.py for gluonperf's
training loop and the steprate worker), swept by the one coordinate search
(`search.coordinate`), the winning settings confirmed against the baseline in one interleaved
run. It knows the runner through the protocol alone (tuning/runner.py).
"""
from ..measure import stats
from ..records import Result
from ..runtime.threads import idle_warnings
from ..training.model_spec import as_spec
from . import search
from .candidates import Candidate
from .rounds import Rounds, as_rounds

BF16_WARNING = ("--dtype bfloat16 changes the arithmetic (convolutions and dense layers in bfloat16): check that your "
                "model learns as well before keeping it")


def tune(model, contexts, batch_sizes, steps=10, rounds=None, kvstores=("device",), runner=None, only=None,
         progress=None, timeout=900, sweeps=None, threshold=stats.THRESHOLD, optimizer=None):
    """The whole sweep, per batch size: each lever's candidates against the best so far.

    `model`: a ModelSpec (or its text). `rounds`: a number of rounds per lever, or a `Rounds`
    (None: `Rounds()`, as many as the intervals need within its budget). A candidate is kept
    only when it is judged faster than the lever's baseline (`schedule.winner`: its interval,
    corrected for the candidates tried, above 1 and its estimate past `threshold`). Returns every
    candidate's Result (bench='tune', with `lever`, `ratio` to that stage's baseline with its
    interval, `verdict` and `rank`) plus, per batch size, a 'best' Result: the winning settings
    and `command`, and their `speedup` over the defaults measured in one interleaved confirmation
    run of the two (with its interval and verdict), not a product of the levers' ratios. `sweeps`
    (a `Sweeps`) keeps every lever's results as they come, for a stopped tune. `optimizer` (a
    runner that takes it: the train runner): train with it in every candidate (None: its default)."""
    if runner is None:
        raise ValueError("tune needs a runner (gluonperf.training.runners: TRAIN or STEPRATE)")
    if optimizer is not None and not runner.takes("optimizer"):
        raise ValueError("--optimizer needs the train runner; %s trains with SGD only" % runner.name)
    rounds = Rounds() if rounds is None else rounds
    contexts, text = list(contexts), as_spec(model).text  # text in the records and command lines
    out = []
    for batch in batch_sizes:
        # the baseline is the book's run: one context, imperative, the runner's thread default
        flags = {"model": text, "batch_size": batch, "ctx": contexts[0], "hybridize": "none"}
        if optimizer is not None:
            flags["optimizer"] = optimizer
        defaults = Candidate(runner.baseline, (), tuple(sorted((k, str(v)) for k, v in flags.items())))
        stages = [s for s in runner.levers(contexts, batch_sizes, kvstores) if not only or s[0] in only]
        found = search.coordinate(runner, defaults, stages, rounds, steps, progress, timeout, sweeps, threshold,
                                  confirm="winning settings", confirm_after=1)
        out.extend(found.results)
        out.append(_best(found, runner, batch, steps))
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


def _base(contexts, optimizer):
    return Candidate("b", (), (("ctx", contexts[0]), ("hybridize", "none"))
                     + ((("optimizer", optimizer),) if optimizer else ()))


def _candidate_counts(runner, contexts, batch_sizes, kvstores, only=None, optimizer=None):
    """{lever: candidates including its baseline} of the runner's levers (of `only`, or all) that
    have a candidate besides the baseline here."""
    stages = [s for s in runner.levers(contexts, batch_sizes, kvstores) if not only or s[0] in only]
    return search.stage_sizes(stages, _base(contexts, optimizer))


def levers_to_try(contexts, batch_sizes, kvstores, only=None, runner=None, optimizer=None):
    """The names of the runner's levers (of `only`, or all) that have something to try here."""
    return list(_candidate_counts(runner, contexts, batch_sizes, kvstores, only, optimizer))


def count_runs(model, contexts, batch_sizes, rounds, kvstores, only=None, runner=None, optimizer=None):
    """The most subprocess runs `tune` can make (for the progress bar): `search.planned_runs` of each
    batch size, the confirmation of the winning settings against the defaults included."""
    stages = [s for s in runner.levers(contexts, batch_sizes, kvstores) if not only or s[0] in only]
    rounds = rounds if rounds is not None else Rounds()
    return search.planned_runs(stages, _base(contexts, optimizer), as_rounds(rounds), confirm=True) * len(batch_sizes)

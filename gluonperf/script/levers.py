"""The levers `tune --` tries on a user's script, from what the probe found in it.

A lever is a function of the best candidate so far that returns the candidates to try, the best
first, built with the candidate's own `with_env` / `with_flags` (this package never imports
tuning/: the command hands the script's runner, and these levers, to the search). The flags are
the changes the listener makes from outside (script/listener.py: `hybridize`, `num_workers`,
`thread_pool`, `amp`); the environment levers are gluonperf/training/levers.py's. To add a
lever: write its function here, add it to `script_levers` (with why it has nothing to try, when
the probe says so), its name to LEVER_NAMES in the order tune tries them, and, when the probe
can bound what it gains, its bound to script/bounds.py; a flag needs the listener to apply it.
"""
import os

from ..measure import stats
from ..training import levers as environment
from . import bounds as lever_bounds
from .text import pct

# the levers tune -- tries, in the order it tries them (names for --levers)
LEVER_NAMES = ("hybridize", "data", "threads", "dtype", "bulk", "engine", "allocator", "openmp")
ENVIRONMENT = {"engine": environment.engine, "allocator": environment.allocator, "bulk": environment.bulk,
               "openmp": environment.openmp}


def script_levers(found, cores, only=None, environ=None, measured=None, threshold=stats.THRESHOLD, bounds=True,
                  bf16=None):
    """The lever stages for a script, in the order they are tried (levers that pay on many
    scripts first: hybridize, data, threads, dtype; then bulk, engine, allocator, openmp), from
    what the probe `found`: only what can change something here (a model that can be hybridized
    and is not yet static, a DataLoader, bfloat16 where the CPU has it, a thread count other than
    MXNet's own here); unless `bounds` is False, the data lever has nothing to try when the runs
    of the best settings so far (`measured["runs"]`: the runner's by candidate name, as they
    come) bound its gain below 1 + `threshold` (script/bounds.py). Returns
    (stages: [(lever, best candidate -> [candidates], best candidate -> why nothing to try or
    None)], {lever: why it has nothing to try}). `bf16`: whether this CPU has bfloat16 (None: ask it)."""
    from ..runtime.precision import has_bf16, prepare, why_no_bf16
    from ..runtime.threads import omp_threads
    environ = os.environ if environ is None else environ
    measured = measured or {}
    stages, idle = [], {}
    model = found.get("model")
    if model is None:
        idle["hybridize"] = "no model found (%s)" % (found.get("model_note") or "?")
    elif model["kind"] == "imperative":
        idle["hybridize"] = "the model, %s, is not a HybridBlock nor a Sequential of HybridBlocks" % model["class"]
    elif model["mode"] == "static":
        idle["hybridize"] = "the model is hybridized with static_alloc and static_shape already"
    else:
        modes = ["hybrid", "static"] if model["mode"] == "none" else ["static"]
        stages.append(("hybridize", lambda b: [b] + [b.with_flags("hybridize=%s" % m, hybridize=m) for m in modes]))
    loaders = found.get("loaders") or []
    if not loaders:
        idle["data"] = "no gluon DataLoader"
    else:
        runs = measured.get("runs", {})  # the runner's runs by candidate name, as they come
        stages.append(("data", _data_lever(loaders, cores),
                       (lambda best: _data_idle(runs.get(best.name), best.name, threshold)) if bounds else _never))
    current = omp_threads(environ)
    if cores > 1:
        stages.append(("threads", lambda b: [b] + [b.with_env("OMP_NUM_THREADS=%d" % n, OMP_NUM_THREADS=n)
                                                   for n in range(1, cores + 1) if n != current]))
    else:
        idle["threads"] = "one core"
    ctxs = (found.get("contexts") or "cpu").split(",")
    if bf16 is False or (bf16 is None and not has_bf16()):
        why = "this CPU has no bfloat16 instructions (AMX, AVX512-BF16)"
    else:
        why = None if bf16 else why_no_bf16(environ)
    if why is None and not all(c.startswith("cpu") for c in ctxs):
        why = "bfloat16 AMP runs on CPU contexts only"
    if why:
        idle["dtype"] = why
    else:
        env = {}
        prepare("bfloat16", environ=env)  # what oneDNN needs for it here (AMX's ISA setting), if anything
        stages.append(("dtype", lambda b: [b, b.with_flags("amp=bfloat16", amp="bfloat16").with_env(
            "amp=bfloat16", **env)]))
    stages += list(ENVIRONMENT.items())
    order = {name: i for i, name in enumerate(LEVER_NAMES)}
    stages = [(s[0], s[1], s[2] if len(s) > 2 else _bulk_idle(model) if s[0] == "bulk" else _never)
              for s in sorted(stages, key=lambda s: order[s[0]])]
    if only:
        stages = [s for s in stages if s[0] in only]
        idle = {k: v for k, v in idle.items() if k in only}
    return stages, idle


# a newcomer's script as the probe describes it: a HybridBlock not hybridized, one DataLoader without
# workers, CPU contexts
NEWCOMER = {"model": {"kind": "hybrid", "mode": "none", "class": "Net"}, "loaders": [{"num_workers": 0}],
            "contexts": "cpu"}


def newcomer_stages(cores=2):
    """The stages tune -- builds for a newcomer's script (NEWCOMER), as on a machine with bfloat16 and
    glibc's huge pages for its only allocator, whatever this one has: hybridize 2 candidates, data 3,
    threads, dtype, engine, allocator, openmp 1 each, bulk 2 once hybridize is kept. The simulation
    of tune's search runs these (tuning/simulate.py)."""
    stages, _ = script_levers(NEWCOMER, cores, environ={}, bounds=False, bf16=True)
    huge = environment.HUGE_PAGES
    fixed = {"allocator": lambda b: [b, b.with_env("GLIBC_TUNABLES=" + huge, GLIBC_TUNABLES=huge)]}
    return [(name, fixed.get(name, make), why) for name, make, why in stages]


def _never(best):
    return None


def _data_idle(rates, best, threshold):
    """Why the data lever has nothing to try from `best` (the best settings so far, named), from its
    runs' waits for data (script/bounds.py), or None."""
    waits = lever_bounds.data_bound(rates)
    if not lever_bounds.cannot_pay(waits, threshold):
        return None
    return ("the step waits %s for its data (95%% CI %s-%s, over %d runs of %s): workers could make it at most "
            "%.3gx faster, less than the %g%% worth a change" % (
                pct(1 - 1 / waits.estimate), pct(1 - 1 / waits.low), pct(1 - 1 / waits.high), waits.n, best,
                waits.high, 100 * threshold))


def _data_lever(loaders, cores):
    current = max(l.get("num_workers") or 0 for l in loaders)
    workers = [n for n in range(1, cores + 1) if n != current]

    def data(b):
        out = [b] + [b.with_flags("num_workers=%d" % n, num_workers=n) for n in workers]
        if not any(l.get("thread_pool") for l in loaders):
            out.append(b.with_flags("num_workers=%d thread_pool" % cores, num_workers=cores, thread_pool=1))
        return out
    return data


def _bulk_idle(model):
    """Bulk execution groups the operators of a hybridized graph (MXNet's CachedOp): nothing to try while
    the model runs imperatively, as the script has it and with no hybridize kept."""
    hybridized = (model or {}).get("mode") in ("hybrid", "static")

    def why(best):
        if hybridized or best.flag("hybridize") in ("hybrid", "static"):
            return None
        return ("bulk execution groups the operators of a hybridized graph, and the model runs imperatively (as "
                "the script has it, and hybridize was not kept)")
    return why

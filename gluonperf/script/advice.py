"""What to change in a user's script, as records (bench 'advice'): profile --'s advice from what
its own run measured (`advice`), and tune --'s recipe from what its runs measured (`recipe`).

An advice record is a measurement with a recommendation attached: the change, where it goes
in the script (`file:line`), `measured` with its ratio, interval and verdict when it was
measured, else what it costs and the `tune --` line that measures it. A change is never stated
as a gain it has not measured. The lines a person reads are script/text.py's.
"""
import math
import statistics

from ..measure.stats import winner
from ..records import level_text, result
from .text import code_at, interval_text, pct, size, times, where

ADVICE = "advice"  # the records' bench, profile's and tune --'s alike
# a wait for the engine is advice when Python is blocked there this share of a step or more; for
# tune -- (unfenced steps) also at least every other step (WAIT_EVERY): a read once an epoch is where
# the epoch's queued work drains, which is the pattern the advice asks for, not a cost; for profile
# (fenced steps) once a step is enough
WAIT_SHARE = 0.05
WAIT_EVERY = 0.5
# what to do about a wait for the engine every step (profile's and tune --'s advice)
READ_LESS = ("read the value every N steps, or add it up on the device (total = total + loss.sum()) and read it "
             "once an epoch, so that Python queues the next steps while the engine runs")


def tune_command(command, lever=None):
    """The `tune --` command line that tries `lever` on the whole script (`command` as shown)."""
    return "python -m gluonperf.tune %s-- %s" % ("--levers %s " % lever if lever else "", command or "COMMAND")


def hybridize_code(kind, static=True):
    """The hybridize change in code, for a model of `kind` (training.hybrid_blocks.hybrid_kind: a
    'sequential' is built as a HybridSequential first)."""
    call = "hybridize(static_alloc=True, static_shape=True)" if static else "hybridize()"
    if kind == "sequential":
        return "build the model as gluon.nn.HybridSequential() instead of nn.Sequential(), then call net.%s" % call
    return "call net.%s once the model is built" % call


# --- profile -- -----------------------------------------------------------------------------

def advice(summary, command, cwd):
    """What to change, from what profile measured in its own run: records of kind `advice` (bench
    'advice', as tune --'s recipe: lever, change, where, measured, the ratio fields when measured,
    tune: the `tune --` command that tries it on the whole script).

    - hybridize: the model alone, as the script runs it against hybridized static
      (`hybridize_alone`): measured=True, with its ratio, interval and verdict; a measurement of the
      model alone, not of the script, so the change says to try it on the whole script;
    - each costly wait for the engine (called at least once a step, or blocking Python WAIT_SHARE of
      the step or more): its calls and the time blocked under profile's fences; measured=False: what
      removing it gains is not measured (in the unfenced script it blocks for the step's queued
      work: `tune --` times the waits as the script runs);
    - the input verdict, when input-bound: measured=False ("to try"): more DataLoader workers can make
      a script slower where the cores are busy; `tune --levers data` settles it.
    A change is never stated as a gain it has not measured."""
    out = []
    for h in summary.get("hybridize") or []:
        m = h.metrics
        if m.get("ratio") is None:
            continue
        code = hybridize_code(m.get("kind"))
        iv = "%.2fx (%s CI %.2f-%.2f, %d rounds)" % (m["ratio"], level_text(m["ratio_level"]), m["ratio_ci_low"],
                                                    m["ratio_ci_high"], m["ratio_n"])
        found = {"faster": "was %s faster hybridized static" % iv,
                 "slower": "was slower hybridized static: %s" % iv,
                 "same": "was no faster hybridized static: %s, within +-%g%%" % (iv, 100 * m["threshold"]),
                 "inconclusive": "was not measurably faster hybridized static: %s" % iv}[m["verdict"]]
        as_is = "not hybridized" if m.get("mode") == "none" else "hybridized without static_alloc"
        change = ("%s: the model alone (%s, %s), one step's forward and backward on the script's batch, %s; a "
                  "measurement of the model alone, not of the script%s" % (
                      code, m.get("model_class"), as_is, found,
                      ": try it on the whole script" if m["verdict"] == "faster"
                      else "; the whole script may still differ"))
        out.append(result(ADVICE, "hybridize", lever="hybridize", change=change, where=None, measured=True,
                          measured_on="the model alone", kind=m.get("kind"), mode=m.get("mode"),
                          **{k: m.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n", "ratio_level",
                                                   "verdict", "verdict_text")},
                          tune=tune_command(command, "hybridize")))
    for w in summary.get("waits") or []:
        m = w.metrics
        share = m.get("blocked_share") or 0.0
        if m["calls_per_step"] < 0.99 and share < WAIT_SHARE:
            continue
        change = ("to try: Python waits for the engine here (%s) %s a step, blocked %.3g ms a step (%s of the step) "
                  "under profile's fenced steps, where a wait after trainer.step blocks little; unfenced, as the "
                  "script runs, it blocks for the whole step's queued work: %s"
                  % (m["what"], times(m["calls_per_step"]), 1e3 * m["blocked_s_per_step"], pct(share), READ_LESS))
        out.append(result(ADVICE, "wait", lever="wait", change=change, where=where(m["file"], m["line"], cwd),
                          code=code_at(m["file"], m["line"]), measured=False, what=m["what"],
                          calls_per_step=m["calls_per_step"], blocked_s_per_step=m["blocked_s_per_step"],
                          blocked_share=share, tune=tune_command(command)))
    for v in summary.get("input") or []:
        m = v.metrics
        if m.get("verdict") != "input-bound":
            continue
        loader = m.get("loader") or ""
        if loader.endswith("DataLoader"):
            change = ("to try: %s (%s of each step waits for data); not measured here: on a CPU context the workers "
                      "take cores from the step, and where the cores are busy they can make the script slower"
                      % ("give the DataLoader num_workers" if not m.get("loader_workers")
                         else "more DataLoader num_workers than %d" % m["loader_workers"], pct(m["share"])))
            tune = tune_command(command, "data")
        else:
            change = ("to try: prepare batches ahead (%s); not measured here" % (
                "more preprocess_threads, or a cheaper decode" if loader in ("MXDataIter", "ImageRecordIter")
                else "mx.io.PrefetchingIter, or a DataLoader with num_workers"))
            tune = None
        out.append(result(ADVICE, "data", lever="data", change=change, where=None, measured=False,
                          share=m["share"], share_ci_low=m.get("share_ci_low"), share_ci_high=m.get("share_ci_high"),
                          tune=tune))
    return out + growth_advice(summary)


def growth_advice(summary):
    """profile's finding when memory grows: an advice record (lever 'memory', measured False:
    nothing was measured faster) with the line to look at (`where`), or none."""
    out = []
    for r in summary.get("growth") or []:
        m = r.metrics
        if m.get("growth_verdict") != "grows":  # flat, inconclusive, or the queue's record
            continue
        what = "%s grows %s MB per 1,000 steps (%s CI %s-%s)" % (
            m["memory"], _figure(m["growth_mb_per_1000_steps"]), level_text(m["growth_mb_per_1000_steps_level"]),
            _figure(m["growth_mb_per_1000_steps_ci_low"]), _figure(m["growth_mb_per_1000_steps_ci_high"]))
        if m.get("steps_to_exhaust"):
            what += ", about {:,.0f} more steps before this machine's available memory runs out".format(
                m["steps_to_exhaust"])
        if m.get("where"):
            look = ("arrays made here are still held steps later (%d of the %d steps traced, %s): look where the "
                    "script keeps them (a list, a dict, an attribute) and keep a number instead, e.g. the correct "
                    "count added up on the device" % (m["held_arrays"], m["window_steps"], size(m["held_bytes"])))
        elif m.get("causes"):
            look = "; ".join(m["causes"])
        else:
            look = ("no NDArray made in the steps traced was still held after them: look for what else the script "
                    "keeps from step to step (Python objects, a library's buffers)")
        out.append(result(ADVICE, "memory", lever="memory", measured=False, where=m.get("where"), code=m.get("code"),
                          change="%s: %s" % (what, look), growth_verdict="grows",
                          growth_mb_per_1000_steps=m["growth_mb_per_1000_steps"],
                          steps_to_exhaust=m.get("steps_to_exhaust")))
    return out


def _figure(x):
    return "%.3g" % x


# --- tune -- ------------------------------------------------------------------------------------

def change_of(lever, env, flags, found, cwd):
    """(the change in words or code, where it goes in the script) of a kept candidate's lever, from
    its own variables (`env`) and changes (`flags`)."""
    if lever == "hybridize":
        model = found.get("model") or {}
        return (hybridize_code(model.get("kind"), flags.get("hybridize") == "static"),
                where(model.get("file"), model.get("line") or 0, cwd))
    if lever == "data":
        loader = max(found.get("loaders") or [{}], key=lambda l: l.get("num_workers") or 0)
        change = "DataLoader(..., num_workers=%s%s)" % (flags["num_workers"],
                                                       ", thread_pool=True" if "thread_pool" in flags else "")
        return change, where(loader.get("file"), loader.get("line") or 0, cwd)
    if lever == "dtype":
        model = found.get("model") or {}
        return ("from mxnet.contrib import amp; amp.init(target_dtype='bfloat16') before the model is built (check "
                "that it learns as well)"), where(model.get("file"), model.get("line") or 0, cwd)
    return "run with %s in the environment" % " ".join("%s=%s" % kv for kv in sorted(env.items())), "the environment"


def recipe(search, found, rates, cwd, tried, took=None, command=None):
    """The advice records of what the `search` found (a tuning.search.Search: every candidate's
    Result, the confirmation's, the kept levers; `found`: what the probe found in the script): one
    per kept change (its lever's measured ratio, interval and
    verdict), one per costly wait for the engine (its measured cost, from `rates`: the `rate`
    records of the runs of the script as it is), the combination's confirmed speedup, or "no
    change pays here" with what was tried (or, when the budget ended a lever's rounds before its
    verdict or before it was reached, "no change was shown to pay"); then a record per lever left
    unsettled ('unsettled': of `took`'s {lever: Result}, tuning.search.unsettled) and one of the
    levers not reached ('unreached'), each with the `tune` line (of `command`) that settles it. With
    `took` ({wall_s, runs, levers, idle, unreached, unsettled, budget_s, run_s}), first a record of
    what the tune cost (lever 'run')."""
    results, confirm, kept = search.results, search.confirm, search.kept
    out = []
    took = dict(took or {})
    open_ = took.pop("unsettled", None) or {}
    if took:
        out.append(result(ADVICE, "tune", lever="run", measured=False, change=None, where=None,
                          unsettled=sorted(open_), **took))
    # the candidate the search kept in each kept lever: its winner, as the search chose it (stats.winner)
    by_lever = {lever: winner([r for r in results if r.metrics.get("lever") == lever]) for lever in kept}
    for lever in kept:
        r = by_lever[lever]
        # the lever's own part of the candidate: its flags or its environment beside the ones kept before
        env, flags = own(r.metrics["env_vars"], r.metrics["flags"], lever)
        change, place = change_of(lever, env, flags, found, cwd)
        out.append(result(ADVICE, lever, lever=lever, change=change, where=place, measured=True,
                          env_vars=env, hooks=flags,
                          **{k: r.metrics.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n",
                                                           "ratio_level", "ratio_joint_level", "verdict", "rounds")}))
    step_s = None
    if rates:
        step_s = statistics.median(l["seconds"] / l["steps"] for l in rates)
    for w in merge_waits(rates):
        share = w["seconds_per_step"] / step_s if step_s else None
        if share is None or share < WAIT_SHARE or w["calls_per_step"] < WAIT_EVERY:
            continue
        code = code_at(w["file"], w["line"])
        # its cost is measured; what removing it gains is not (measured=False)
        out.append(result(ADVICE, "wait", lever="wait", where=where(w["file"], w["line"], cwd), code=code,
                          measured=False, what=w["what"], calls_per_step=w["calls_per_step"],
                          blocked_s_per_step=w["seconds_per_step"], blocked_share=share, step_s=step_s,
                          change=("Python waits here for the engine %.3g ms of each %.3g ms step (%.0f%%), %s a step: "
                                  "%s (to try: what it saves is not measured; at most the time blocked here, and "
                                  "nothing where the step's other work also waits for the engine)" % (
                                      1e3 * w["seconds_per_step"], 1e3 * step_s, 100 * share,
                                      times(w["calls_per_step"]), READ_LESS))))
    if confirm is not None:
        m = confirm.metrics
        out.append(result(ADVICE, "together", lever="together", change="all of the above",
                          where=None, measured=True, **{k: m.get(k) for k in (
                              "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n", "ratio_level", "ratio_joint_level",
                              "verdict", "verdict_text", "rounds")}))
    elif len(kept) >= 2:  # the budget ended before the kept changes could run together
        out.append(result(ADVICE, "together", lever="together", change="all of the above", where=None,
                          measured=False, verdict="not confirmed",
                          verdict_text="not confirmed: the budget ended before the changes could run together "
                                       "against the script as it is (a larger --budget)"))
    left = unsettled(open_, results, took, command) + unreached(took.get("unreached"), command)
    if confirm is None and not kept:
        said = "no change was shown to pay within the budget" if left else "no change pays here"
        out.append(result(ADVICE, "nothing", lever="none", measured=True, tried=tried,
                          change="%s: %s" % (said, tried or "nothing could be tried")))
    return out + left


def unsettled(open_, results, took=None, command=None):
    """A record per lever the budget left unsettled (lever 'unsettled'; `open_`: {lever: its best
    candidate's Result}): its ratio and interval, the rounds more that would settle it (its verdict's
    `rounds_needed`), and the `tune` line of that lever alone, with a --budget when those rounds take
    longer, at `took`'s `run_s` seconds a run, than this tune's `budget_s` (what it would get again)."""
    out = []
    took = took or {}
    for lever, best in open_.items():
        m, need = best.metrics, best.metrics["rounds_needed"]
        line = tune_command(command, lever)
        if took.get("run_s"):  # the lever alone, from the start: its baseline and candidates, `need` rounds, a probe
            runs = need * (1 + sum(r.metrics.get("lever") == lever and r.metrics.get("verdict") != "baseline"
                                   for r in results)) + 1
            seconds = 60 * math.ceil(runs * took["run_s"] * 1.1 / 60)
            if seconds > (took.get("budget_s") or 0):
                line = line.replace("-- ", "--budget %d -- " % seconds, 1)
        out.append(result(ADVICE, lever, lever="unsettled", of=lever, measured=True, where=None,
                          rounds_needed=need, tune=line,
                          change="not settled: %s %s; about %d more rounds would settle it" % (
                              best.name, interval_text(m), need - (m.get("ratio_n") or 0)),
                          **{k: m.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n", "ratio_level",
                                                   "ratio_joint_level", "verdict", "round_ratios")}))
    return out


def unreached(levers, command=None):
    """One record of the levers the budget did not reach (lever 'unreached'), with the line that tries them."""
    if not levers:
        return []
    names = ",".join(levers)
    return [result(ADVICE, "unreached", lever="unreached", measured=False, where=None, levers=list(levers),
                   change="not reached: %s: what was left of the budget could not hold their first rounds"
                          % ", ".join(levers),
                   tune=tune_command(command, names))]


def own(env, flags, lever):
    """(variables, changes) a kept candidate's lever sets itself, each by name in order (a kept
    candidate carries the levers kept before it)."""
    keys = {"hybridize": ("hybridize",), "data": ("num_workers", "thread_pool"), "dtype": ("amp",)}.get(lever)
    if keys:
        return {}, {k: v for k, v in sorted(flags.items()) if k in keys}
    return {k: v for k, v in sorted(env.items()) if _env_lever(k) == lever}, {}


def _env_lever(name):
    return {"OMP_NUM_THREADS": "threads", "MXNET_ENGINE_TYPE": "engine", "LD_PRELOAD": "allocator",
            "GLIBC_TUNABLES": "allocator", "MXNET_EXEC_BULK_EXEC_TRAIN": "bulk",
            "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": "bulk", "OMP_PROC_BIND": "openmp", "OMP_PLACES": "openmp",
            "DNNL_MAX_CPU_ISA": "dtype"}.get(name)


def merge_waits(rates):
    """The waits of several runs, by line: the median over runs of the calls and seconds per step."""
    by_site = {}
    for r in rates:
        for w in r.get("waits", ()):
            by_site.setdefault((w["what"], w["file"], w["line"]), []).append(w)
    out = []
    for (what, file, line), ws in by_site.items():
        ws += [{"calls_per_step": 0.0, "seconds_per_step": 0.0}] * (len(rates) - len(ws))
        out.append({"what": what, "file": file, "line": line,
                    "calls_per_step": statistics.median(w["calls_per_step"] for w in ws),
                    "seconds_per_step": statistics.median(w["seconds_per_step"] for w in ws)})
    return sorted(out, key=lambda w: -w["seconds_per_step"])

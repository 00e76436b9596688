"""profile --'s summary of a user's script, in gluonperf's process: from what the driver wrote
(script/driver.py, read through the wire: `wire.read_runs`), records, as every command's.

`choose` picks the process to report (rank 0 of a dist_sync job, else the one with most steps),
`nothing_measured` says in one line why there is no report; `summarise` gives the step's time
and images/s, the share of it spent waiting for data, in the update and in the rest, each with
its 95% interval over rounds of consecutive steps (`ROUNDS`), the input verdict
(`stats.verdict` on the slowdown the waits cause, as profile's input section judges it), and
the other parts (script/parts.py: the operators per step with their GFLOP/s against the
ceiling, the Blocks, the peak memory, the waits for the engine, the model alone hybridized, the
memory over time). The advice is script/advice.py's, the tables script/tables.py's.
"""
import math
import os

from ..measure import stats
from ..measure.harness import Measurement
from ..records import result
from . import parts
from .parts import BENCH
from .advice import tune_command
from .text import images, pct

ROUNDS = 10         # the steps are cut into at most this many rounds of consecutive steps
HOW_STEPS_ARE_FOUND = ("steps are found through gluon.Trainer.step(batch_size) (of the first Trainer that steps; or "
                       "Trainer.update, for a loop that calls allreduce_grads and update itself)")


def choose(runs):
    """The run to report (rank 0 of a dist_sync job, else the process with most steps) and a
    note on the others (their step times), or (None, None) when no process stepped."""
    stepped = [r for r in runs if r["steps"]]
    if not stepped:
        return None, None
    ranked = [r for r in stepped if (r.get("process") or {}).get("rank") is not None]
    if ranked:
        chosen = min(ranked, key=lambda r: r["process"]["rank"])
    else:
        chosen = max(stepped, key=lambda r: len(r["steps"]))
    others = [r for r in stepped if r is not chosen]
    if not others:
        return chosen, None
    def who(r):
        rank = (r.get("process") or {}).get("rank")
        return "rank %d" % rank if rank is not None else "process %d" % r["pid"]
    median = lambda r: sorted(s["step_s"] for s in r["steps"])[len(r["steps"]) // 2]  # noqa: E731
    return chosen, "%d processes stepped; reported: %s; the others' median step: %s" % (
        len(stepped), who(chosen), ", ".join("%s %.4g ms" % (who(r), 1e3 * median(r)) for r in others))


def nothing_measured(runs, sites):
    """Why there is no report, in one line, or None when there is one."""
    if any(r["steps"] for r in runs):
        return None
    if not sites:
        return ("gluonperf's hooks never loaded in the command: it ran no Python, or a Python that ignores "
                "PYTHONPATH (python -E or -I); profile runs a Python training command, e.g. -- python train.py")
    if not runs:
        return "the script never imported MXNet: nothing to profile (%s)" % HOW_STEPS_ARE_FOUND
    seen = max((r.get("exit") or {}).get("steps_seen", 0) for r in runs)
    if seen:
        return "the script ended after %d step%s, before the first measured one (--warmup steps come first)" % (
            seen, "s" if seen != 1 else "")
    return ("no training step seen: %s, which the script never called; call trainer.step(batch_size) in the loop, "
            "or mark steps with gluonperf.measure.steps.StepProfiler" % HOW_STEPS_ARE_FOUND)


def rounds_of(steps, rounds=ROUNDS):
    """`steps` cut into at most `rounds` runs of consecutive steps, as even as can be."""
    k = min(rounds, len(steps))
    bounds = [round(i * len(steps) / k) for i in range(k + 1)]
    return [steps[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _sum(steps, key):
    return sum(s.get(key) or 0.0 for s in steps)


def share_interval(groups, key):
    """The share of a step spent in `key` (wait_s, update_s), from per-round slowdowns
    t(step) / (t(step) - t(part)) (a t interval on their logs, as profile's input section
    makes it): (share, low, high, Interval of the slowdown)."""
    ratios = []
    for g in groups:
        total = _sum(g, "step_s")
        ratios.append(total / max(total - _sum(g, key), 1e-9 * total))
    iv = stats.ratio_interval(ratios)
    high = 1 - 1 / iv.high if math.isfinite(iv.high) else 1.0
    return 1 - 1 / iv.estimate, max(0.0, 1 - 1 / iv.low) if iv.low > 0 else 0.0, high, iv


def _rate(groups, count, seconds):
    """The interval of count(round) / seconds(round) over the rounds (None without a round to count)."""
    values = [count(g) / seconds(g) for g in groups if seconds(g) > 0 and count(g) > 0]
    return stats.ratio_interval(values) if values else None


def summarise(run, command=None, threshold=stats.THRESHOLD, peak_flops=None, ceiling_devices=1):
    """Records of one run (`wire.read_runs`): {'steps': the step and its parts, 'input': the verdict,
    'operators': the top operators and the time none ran, 'blocks': the Blocks, 'memory': the
    peak, 'waits', 'hybridize', 'growth'}, each a list of Results; 'notes': lines to show under the
    tables. `peak_flops`: this machine's ceiling on one context (FLOP/s), for GFLOP/s against it;
    `ceiling_devices`: how many of it the script's contexts hold (measure.ceiling.ceiling_devices)."""
    steps = [s for s in run["steps"] if s["phase"] == "active"]
    if not steps:
        steps = [s for s in run["steps"] if s["phase"] == "profiled"]
    process = run.get("process") or {}
    model = run.get("model") or {}
    batch = steps[-1].get("batch_size") or 0
    groups = rounds_of(steps)
    per_step = Measurement("step", tuple(s["step_s"] for s in steps))
    common = {"command": command, "model": model.get("model"), "batch_size": batch,
              "contexts": process.get("contexts"), "steps": len(steps), "rounds": len(groups),
              "partial": bool((run.get("end") or {"partial": True}).get("partial"))}
    rows, step_s, wait = step_rows(steps, groups, per_step, model.get("flops"), peak_flops, ceiling_devices, common)
    verdict = input_verdict(groups, wait, threshold, run, common)
    notes = []
    if batch and model.get("images_per_step") and abs(model["images_per_step"] - batch) > 0.5:
        notes.append("note: Trainer.step was given batch_size=%d while the model took %.4g samples a step: images/s "
                     "counts the Trainer's batch_size" % (batch, model["images_per_step"]))
    operators, op_notes = parts.operator_rows(run, batch, peak_flops, common)
    notes += op_notes
    blocks = parts.block_rows(run, peak_flops, notes)
    memory = []
    if run.get("memory"):
        m = run["memory"]
        memory.append(result(BENCH, "memory", part="peak memory", rss_peak_bytes=m["rss_peak_bytes"],
                             rss_growth_bytes=m["rss_growth_bytes"], child_processes=m.get("children"),
                             children_peak_bytes=m.get("children_peak_bytes"),
                             **{k: v for k, v in m.items() if k.startswith("device_peak")}, **common))
    fastest = max([r.metrics.get("of_ceiling") or 0 for r in rows + operators + blocks])
    if fastest > 1:
        notes.append("note: something ran at %.2fx the measured ceiling (%.4g GFLOP/s): the ceiling was measured with "
                     "small sizes (--ceiling quick) or while other work slowed this machine; run again on a quieter "
                     "machine" % (fastest, peak_flops / 1e9))
    if model.get("note"):
        notes.append("note: " + model["note"])
    if model.get("flops_note"):
        notes.append("note: " + model["flops_note"])
    if per_step.noisy:
        notes.append("note: the measured steps are noisy (IQR %.0f%% of the median): other work competes for the "
                     "cores, or the script's steps differ (an epoch's end); raise --steps or run on a quieter machine"
                     % (100 * per_step.iqr / per_step.median))
    waits = parts.wait_rows(run, step_s, common)
    hybrid = parts.hybridize_rows(run, threshold, common)
    if hybrid and hybrid[0].metrics.get("error"):
        notes.append("note: the model alone could not be timed hybridized against as it is: %s"
                     % hybrid[0].metrics["error"])
    return {"steps": rows, "input": [verdict], "operators": operators, "blocks": blocks, "memory": memory,
            "waits": waits, "hybridize": hybrid, "notes": notes, "growth": parts.growth_rows(run, os.getcwd(), common)}


def step_rows(steps, groups, per_step, flops, peak_flops, ceiling_devices, common):
    """The step's records (the step, waiting for data, the update, the rest), the step's time and
    the wait's (share, low, high, Interval of the slowdown)."""
    step_iv = stats.ratio_interval([_sum(g, "step_s") / len(g) for g in groups])
    rate = _rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "step_s"))
    wait = share_interval(groups, "wait_s")
    has_update = all(s.get("update_s") is not None for s in steps)
    update = share_interval(groups, "update_s") if has_update else None
    step_fields = dict(per_step.summary(), **step_iv.fields("time_s"))
    step_fields.update(part="step", share=1.0)
    if rate:
        step_fields.update(rate.fields("images_per_s"))
    if flops and rate:
        achieved = flops["training"] * rate.estimate
        step_fields.update(training_flops_per_image=flops["training"], gflop_per_s=achieved / 1e9)
        if peak_flops:
            step_fields["of_ceiling"] = achieved / (peak_flops * ceiling_devices)
    rows = [result(BENCH, "step", **step_fields, **common)]
    shares = [("waiting for data", "wait_s", wait)]
    if update:
        shares.append(("update (Trainer.step)", "update_s", update))
    for name, key, (share, low, high, iv) in shares:
        rows.append(result(BENCH, name, part=name, time_s=_sum(steps, key) / len(steps), share=share,
                           share_ci_low=low, share_ci_high=high, share_n=iv.n, share_level=iv.level,
                           **{key.replace("_s", "_samples_s"): [s.get(key) for s in steps]}, **common))
    rest = 1.0 - wait[0] - (update[0] if update else 0.0)
    rows.append(result(BENCH, "rest", part="forward, backward, the rest" if update else "the rest of the step",
                       time_s=step_iv.estimate * rest, share=rest, **common))
    return rows, step_iv.estimate, wait


def input_verdict(groups, wait, threshold, run, common):
    """Is the step waiting for its data? `stats.verdict` on the slowdown the waits cause
    (t(step) / t(step without the waits), per round): input-bound when its interval excludes 1
    and it is past the threshold, not input-bound when the whole interval lies within it. `wait`:
    the waits' share of the step, its interval's ends and the slowdown's Interval (`share_interval`)."""
    share, low, high, slowdown = wait
    judged = stats.verdict(slowdown, threshold, words=("input-bound", "not input-bound"), what="rounds",
                           settle="more steps (--steps) would settle it")
    word = {"same": "not input-bound"}.get(judged.word, judged.word)
    step_rate = _rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "step_s") - _sum(g, "wait_s"))
    loader_rate = _rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "wait_s"))
    loaders = (run.get("loaders") or {}).get("loaders") or []
    main = max(loaders, key=lambda l: l["wait_s"]) if loaders else None
    ci = "95%% CI %s-%s, %d rounds of %s" % (pct(low), pct(high), slowdown.n,
                                                    _steps_per_round(groups))
    rates = []
    if step_rate:
        rates.append("the step alone consumes %s images/s" % images(step_rate.estimate))
    if main is None:
        rates.append("no data loader was iterated in the measured steps")
    elif main["prefetches"]:
        rates.append("the loader (%s, prefetching%s) kept the loop at %s images/s" % (
            main["loader"], " with %d workers" % main["workers"] if main.get("workers") else "",
            images(_rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "step_s")).estimate)))
    elif loader_rate:
        rates.append("the loader (%s in the script's own thread) delivers %s images/s" % (
            main["loader"], images(loader_rate.estimate)))
    advice = ""
    tune = tune_command(common.get("command"), "data")
    if word == "input-bound" and main is not None:  # to try, never a gain: workers take cores from the step
        if main["loader"].endswith("DataLoader") and not main.get("workers"):
            advice = ("; to try: give the DataLoader num_workers, so that batches are prepared while the step runs "
                      "(not measured here: where the cores are busy it can make the script slower; %s measures it)"
                      % tune)
        elif main["loader"].endswith("DataLoader"):
            advice = ("; to try: more num_workers (on CPU contexts only while cores are free; %s measures it), or a "
                      "dataset that costs less per sample (decoded once, RecordIO)" % tune)
        elif main["loader"] in ("MXDataIter", "ImageRecordIter"):
            advice = "; to try: more preprocess_threads, or a cheaper decode (smaller images stored)"
        else:
            advice = "; to try: prepare batches ahead (mx.io.PrefetchingIter, or a DataLoader with num_workers)"
    if word == "input-bound":
        finding = "input-bound: %s of each step waits for data (%s); %s%s" % (pct(share), ci, "; ".join(rates), advice)
    elif word == "not input-bound":
        finding = "not input-bound: %s of each step waits for data (%s), within +-%g%%; %s" % (
            pct(share), ci, 100 * threshold, "; ".join(rates))
    else:
        finding = "inconclusive: %s of each step may wait for data (%s); %s; %s" % (
            pct(share), ci, judged.text.split("; ", 1)[-1], "; ".join(rates))
    fields = dict(share=share, share_ci_low=low, share_ci_high=high, share_n=slowdown.n, share_level=slowdown.level,
                  **slowdown.fields("slowdown"), **judged.fields(), input_bound=word == "input-bound",
                  finding=finding, loader=main["loader"] if main else None,
                  loader_workers=main.get("workers") if main else None,
                  loader_prefetches=main["prefetches"] if main else None)
    fields["verdict"] = word
    if step_rate:
        fields.update(step_rate.fields("step_images_per_s"))
    if loader_rate and main is not None and not main["prefetches"]:
        fields.update(loader_rate.fields("loader_images_per_s"))
    return result(BENCH, "input verdict", part="input verdict", **fields, **common)


def _steps_per_round(groups):
    sizes = sorted({len(g) for g in groups})
    return ("1 step" if sizes == [1] else "%d steps" % sizes[0] if len(sizes) == 1
            else "%d-%d steps" % (sizes[0], sizes[-1]))


def needs_ceiling(run):
    """Whether any figure of the run is held against the ceiling (the model's FLOPs are known)."""
    return bool((run.get("model") or {}).get("flops"))


def one_line(run):
    """What was measured so far, in one line (for a script that failed)."""
    steps = [s for s in run["steps"] if s["phase"] in ("active", "profiled")]
    times = sorted(s["step_s"] for s in steps)
    total = sum(s["step_s"] for s in steps)
    waits = sum(s["wait_s"] for s in steps)
    return "measured so far: %d step%s, median %.4g ms a step, %s of it waiting for data" % (
        len(steps), "s" if len(steps) != 1 else "", 1e3 * times[len(times) // 2], pct(waits / total))

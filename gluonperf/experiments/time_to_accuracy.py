"""Time to accuracy per optimizer, over seeds (`python -m gluonperf.bench time-to-accuracy`).

An optimizer whose update is cheaper per step (`bench optimizers`) can still take longer to
reach an accuracy. This runs `training.fit` with `--target-top1` for every optimizer and
seed, in one process, interleaved: seed by seed, with the optimizers in a rotating order, so
a change of the machine's load hits every optimizer alike. Each run stops at the first epoch
whose test top-1 reaches the target. Per optimizer, over the seeds: the median wall time,
epochs and training images to the target, how many seeds reached it, and the time's ratio
against the first optimizer with its 95% Welch interval over the seeds (runs are independent,
so the seeds' spread is the noise) and a verdict. Nothing here parses arguments or prints.
"""
import statistics
from dataclasses import replace

from ..records import result
from ..measure.stats import two_sample_interval, verdict

RUN_FIELDS = ("target_reached", "time_to_target_s", "epochs_to_target", "images_to_target", "best_test_top1",
              "epoch")


def time_to_accuracy(config, contexts, optimizers, seeds, progress=None):
    """Train `config` (with its target_top1 set) once per optimizer and seed; returns one
    Result per run (bench 'time-to-accuracy-run') and one per optimizer (bench
    'time-to-accuracy') with the medians over the seeds that reached the target and, for all
    but the first optimizer, `speedup` (the first one's time / this one's: > 1, this one got
    there sooner) with its interval fields and verdict, when every seed of both reached it.
    `progress()` is called after every run."""
    if config.target_top1 is None:
        raise ValueError("time to accuracy needs a target test top-1 (target_top1)")
    if not optimizers or not seeds:
        raise ValueError("give at least one optimizer and one seed")
    from ..training.trainers import with_spec
    config = with_spec(config)  # its model parsed once here (if text), not by every run's fit
    runs = {opt: [] for opt in optimizers}
    out = []
    for i, seed in enumerate(seeds):
        order = list(optimizers[i % len(optimizers):]) + list(optimizers[:i % len(optimizers)])
        for opt in order:
            history = fit_run(replace(config, optimizer=opt, seed=seed, save=None, resume=None), contexts)
            last = history[-1].metrics
            row = {k: last.get(k) for k in RUN_FIELDS}
            runs[opt].append(row)
            out.append(result("time-to-accuracy-run", "%s seed %d" % (opt, seed), optimizer=opt, seed=seed,
                              model=config.model.text, dataset=config.dataset, target_top1=config.target_top1,
                              lr=last.get("lr"), **row))
            if progress:
                progress()
    base = optimizers[0]
    for opt in optimizers:
        reached = [r for r in runs[opt] if r["target_reached"]]
        m = dict(optimizer=opt, model=config.model.text, dataset=config.dataset, target_top1=config.target_top1,
                 seeds=len(seeds), reached=len(reached),
                 median_time_to_target_s=_median([r["time_to_target_s"] for r in reached]),
                 median_epochs_to_target=_median([r["epochs_to_target"] for r in reached]),
                 median_images_to_target=_median([r["images_to_target"] for r in reached]),
                 median_best_test_top1=_median([r["best_test_top1"] for r in runs[opt]]))
        all_reached = len(reached) == len(seeds) and all(r["target_reached"] for r in runs[base])
        if opt != base and all_reached:
            interval = two_sample_interval([r["time_to_target_s"] for r in runs[base]],
                                           [r["time_to_target_s"] for r in reached], noise_floor=0.0)
            m.update(interval.fields("speedup"), **verdict(interval, what="seeds").fields())
        elif opt != base:
            m.update(speedup=None, verdict="not compared",
                     verdict_text="not every seed of %s and %s reached the target" % (base, opt))
        else:
            m.update(speedup=1.0, verdict="baseline", verdict_text="the ratios' baseline")
        out.append(result("time-to-accuracy", opt, **m))
    return out


def fit_run(config, contexts):
    from ..training.loop import fit
    return fit(config, contexts)


def _median(values):
    return statistics.median(values) if values else None

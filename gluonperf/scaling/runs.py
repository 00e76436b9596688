"""The runs a validation of scaling predictions starts, and what they leave.

Each run is gluonperf's own training command (`train_argv`: synthetic data, a fixed number
of steps and epochs, --json), alone (`single_step`), several side by side (`corun_step`),
or a job through `gluonperf.launch` (`run_job`: dist_sync, Horovod); `horovod_exchange` runs
Horovod's exchange of a model's gradients over `gluonperf.workers.exchange` (whose ranks run
`workers.exchange_rank`). Processes are started and supervised by `runtime.guard` (`run_train`:
a failure or a timeout is one line); the figures are read from the records the runs write
(`epoch_steps`: one sample per timed epoch; `mean_step`: their geometric mean). Nothing here
times anything itself: the runs do. `ps_link` calibrates the loopback link as ps-lite sees it
from pairs of such runs.

Nothing here parses arguments or prints.
"""
import os
import statistics
import sys
from dataclasses import dataclass
from typing import Optional

from .. import UserError
from . import model as scaling_model
from ..training.model_spec import as_spec


@dataclass(frozen=True)
class RunSettings:
    """What the training runs of a validation share: the model (a ModelSpec, or its text), the
    images per worker, the steps of an epoch, the timed epochs after an untimed one (`repeats`),
    the seconds a run may take; and, once the validation has made them, the environment the runs
    start in (`job_env`; each run sets its own OMP_NUM_THREADS) and the directory they write to."""
    model: object
    batch: int
    steps: int = 8
    repeats: int = 5
    timeout: float = 240
    env: Optional[dict] = None
    tmp: Optional[str] = None


def job_env():
    """This environment for the validation's training runs: without thread and ps-lite settings
    (each run gets its own OMP_NUM_THREADS) and Horovod's tunables (set per run), with this
    checkout on PYTHONPATH."""
    from ..runtime import guard
    return guard.package_env(drop=("OMP_", "MXNET_OMP", "DMLC_", "HOROVOD_"))


def train_argv(model, batch, limit, epochs, extra=()):
    return [sys.executable, "-m", "gluonperf.train", *as_spec(model).flags, "--dataset", "synthetic",
            "--limit", str(limit), "--batch-size", str(batch), "--epochs", str(epochs), "--lr", "0.05",
            "--log-interval", "0", "--stall-timeout", "120", *extra]


def run_train(argv, env, timeout, what, kind="validation run"):
    from ..runtime import guard
    try:
        done = guard.run(argv, timeout=timeout, env=env)
    except Exception as e:  # subprocess.TimeoutExpired: the child group was killed
        raise UserError("%s %s did not finish: %s" % (kind, what, e))
    _raise_if_failed([done], what, kind)


def _raise_if_failed(done, what, kind="validation run"):
    """One line for the first of the finished runs `done` that exited non-zero: its last line."""
    from ..runtime import guard
    for d in done:
        if d.returncode != 0:
            raise UserError("%s %s failed (exit %d): %s" % (kind, what, d.returncode,
                                                             guard.last_line(d.stderr, "(no output)")))


def run_job(settings, launcher, workers, kvstore, threads, path, what):
    """One run of a job of `workers` processes through `gluonperf.launch` (its flags
    `launcher`) over this validation's training command with `kvstore`, at `threads` OpenMP
    threads a worker: the step of each timed epoch (`epoch_steps`)."""
    batch, timeout = settings.batch, settings.timeout
    argv = [sys.executable, "-m", "gluonperf.launch", *launcher, "--timeout", str(timeout), "--"] + train_argv(
        settings.model, batch, batch * settings.steps * workers, settings.repeats + 1,
        ["--ctx", "cpu0", "--kvstore", kvstore, "--json", path])
    run_train(argv, dict(settings.env, OMP_NUM_THREADS=str(threads)), timeout + 30, what)
    return epoch_steps(path, batch * workers)


def epoch_steps(path, images_per_step):
    """The step time of every epoch but the first (graph building, first allocations) of a
    train --json file: images per step / the epoch's training images/s. One sample each."""
    from ..records import read_jsonl
    try:
        rows = [r.metrics for r, _ in read_jsonl(path) if r.bench == "train"]
    except OSError as e:
        raise UserError("a training run ended without writing its records (%s)" % (e.strerror or e)) from None
    if not rows:
        raise UserError("a training run wrote no epoch records to %s" % path)
    return [images_per_step / r["train_images_per_s"] for r in rows[1:] or rows]


def _epoch_cpu(path, images_per_step):
    """The CPU seconds per step of every epoch but the first of a train --json file: the
    epoch's train_cpu_s (this process, all its threads) over its steps. One sample each."""
    from ..records import read_jsonl
    rows = [r.metrics for r, _ in read_jsonl(path) if r.bench == "train"]
    rows = rows[1:] or rows
    if not all(isinstance(r.get("train_cpu_s"), (int, float)) and r.get("images") for r in rows):
        raise UserError("a training run's epoch records at %s carry no train_cpu_s; is this gluonperf's train?" % path)
    return [r["train_cpu_s"] * images_per_step / r["images"] for r in rows]


def mean_step(samples):
    """The geometric mean of step samples (what stats.ratio_interval estimates)."""
    import math
    return math.exp(sum(math.log(s) for s in samples) / len(samples))


def single_step(settings, threads):
    """The one-worker step (kvstore device, cpu0) at `threads` OpenMP threads, alone on the
    machine: (step, CPU seconds per step of the worker's process, all its threads), each the
    geometric mean over the settings' `repeats` timed epochs (after one untimed)."""
    batch = settings.batch
    path = os.path.join(settings.tmp, "single-%d.json" % threads)
    run_train(train_argv(settings.model, batch, batch * settings.steps, settings.repeats + 1,
                         ["--ctx", "cpu0", "--kvstore", "device", "--json", path]),
              dict(settings.env, OMP_NUM_THREADS=str(threads)), settings.timeout, "1 worker, %d thread(s)" % threads)
    return mean_step(epoch_steps(path, batch)), mean_step(_epoch_cpu(path, batch))


def corun_step(settings, threads, workers, tries=3):
    """The per-worker step of `workers` one-worker runs (kvstore device, cpu0, `threads` OpenMP
    threads each, `settings` as every run of the validation) started at once, with nothing
    exchanged: the compute of a job whose workers share this machine's cores, with whatever their
    threads cost each other beyond their CPU time (switches between them, caches). The runs start
    a moment apart (each loads MXNet first), so only the epochs that lay wholly within the time
    every run was training count (`_side_by_side`, by the epochs' `train_started_at`). The runs
    train 2 x `repeats` + 1 epochs; when fewer than `repeats` of each run's fall in that time
    (epochs short beside the start-up), they run again with 4 times the epochs, `tries` times in
    all. Returns (step, CPU seconds per step of a worker's process), each the geometric mean over
    those epochs of every run."""
    from ..runtime import guard
    batch, repeats = settings.batch, settings.repeats
    paths = [os.path.join(settings.tmp, "corun-%d-%d-%d.json" % (workers, threads, i)) for i in range(workers)]
    what = "%d workers side by side, %d thread(s) each" % (workers, threads)
    epochs = 2 * repeats + 1
    for _ in range(tries):
        argvs = [train_argv(settings.model, batch, batch * settings.steps, epochs,
                            ["--ctx", "cpu0", "--kvstore", "device", "--json", path]) for path in paths]
        try:
            done = guard.run_all(argvs, timeout=settings.timeout,
                                 env=dict(settings.env, OMP_NUM_THREADS=str(threads)))
        except Exception as e:  # subprocess.TimeoutExpired: every child group was killed
            raise UserError("validation run %s did not finish: %s" % (what, e))
        _raise_if_failed(done, what)
        runs = _side_by_side(paths, what)
        fewest = min(len(run) for run in runs)
        if fewest >= repeats:
            inside = [r for run in runs for r in run]
            return (mean_step([batch / r["train_images_per_s"] for r in inside]),
                    mean_step([r["train_cpu_s"] * batch / r["images"] for r in inside]))
        epochs *= 4
    raise UserError("validation runs %s ran together for only %d of one run's epochs (need %d; %d tries); is "
                    "the machine busy?" % (what, fewest, repeats, tries))


def _side_by_side(paths, what):
    """Per train --json file of `paths`, its epoch records (the run's first left out) whose
    training lay wholly within the time every run was training (`train_started_at` and
    `train_s`): the epochs that ran side by side with all the others."""
    from ..records import read_jsonl
    runs = [[r.metrics for r, _ in read_jsonl(path) if r.bench == "train"][1:] for path in paths]
    if not all(runs) or not all("train_started_at" in r for run in runs for r in run):
        raise UserError("a run of %s wrote no epoch records with train_started_at" % what)
    begin = max(run[0]["train_started_at"] for run in runs)
    end = min(run[-1]["train_started_at"] + run[-1]["train_s"] for run in runs)
    return [[r for r in run if begin <= r["train_started_at"] and r["train_started_at"] + r["train_s"] <= end]
            for run in runs]


def ps_link(settings, gradients, lnk, singles, pairs=1):
    """The loopback link as ps-lite sees it: bandwidth from the socket measurement, the
    per-message cost from one worker and one server (dist_sync step - plain step, 2 messages
    per key of the model's `gradients`), both at one thread (the setting every worker runs with
    on 2 cores). A difference of two runs' steps, each run's own noise in it: on a 2-core Zen 5
    one pair gave half the cost the others did, so `pairs` pairs (the plain run, then the
    dist_sync one; a validation runs as many as it runs each job) are run and the median taken.
    The plain runs also give `singles[1]` (the geometric mean of theirs)."""
    extras, plain = [], []
    for _ in range(pairs):
        plain.append(single_step(settings, 1))
        dist = run_job(settings, ["-n", "1", "-s", "1"], 1, "dist_sync", 1,
                       os.path.join(settings.tmp, "dist-1-1.json"), "dist_sync 1 worker 1 server")
        extras.append(mean_step(dist) - plain[-1][0] - 2.0 * gradients.nbytes / lnk.Bps)
    singles[1] = (mean_step([s for s, _ in plain]), mean_step([c for _, c in plain]))
    per_message = max(lnk.latency_s, statistics.median(extras) / (2 * gradients.keys))
    return scaling_model.measured_link(lnk.GBps, per_message, name="loopback via ps-lite", scope="network",
                                       shared=True, source="%s; per-message cost %.3g us, the median of %d "
                                       "pairs of 1-worker runs with and without dist_sync"
                                       % (lnk.source, per_message * 1e6, pairs))


def horovod_exchange(shapes, ranks, compute_s, env, tmp, timeout, steps=20, repeats=5):
    """The exchange of a model's gradients (arrays of `shapes`) by Horovod over `ranks`
    processes of this machine, measured with a stand-in for the compute: `gluonperf.launch
    --engine horovod` over `gluonperf.workers.exchange` (`workers.exchange_rank`: each rank
    computes `compute_s` of CPU time a step, handing the arrays to Horovod over its backward).
    Returns (the wait for the sums after the compute, the helpers' CPU time while the compute
    ran, all ranks', and how long the compute lasted; seconds per step), each the geometric
    mean over the repeats."""
    import json
    plan, out = os.path.join(tmp, "exchange-%d.plan.json" % ranks), os.path.join(tmp, "exchange-%d.json" % ranks)
    with open(plan, "w") as f:
        json.dump(dict(shapes=[list(s) for s in shapes], compute_s=compute_s, steps=steps, repeats=repeats), f)
    argv = [sys.executable, "-m", "gluonperf.launch", "--engine", "horovod", "-n", str(ranks), "--timeout",
            str(timeout), "--", sys.executable, "-m", "gluonperf.workers.exchange", "--plan", plan, "--out", out]
    run_train(argv, env, timeout + 30, "horovod exchange %d ranks" % ranks, kind="calibration run")
    try:
        with open(out) as f:
            found = json.load(f)
    except (OSError, ValueError) as e:
        raise UserError("the Horovod calibration run wrote no timings to %s (%s)" % (out, e)) from None
    helpers = [max(h, 1e-9) for h in found["helper_cpu_s"]]  # geometric mean: no zeros
    return mean_step(found["exchange_s"]), mean_step(helpers), mean_step(found["compute_s"])

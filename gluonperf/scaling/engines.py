"""Which engine for this model (`python -m gluonperf.bench engines`)? One process with N
contexts, N processes on Horovod, and N processes on MXNet's parameter server (dist_sync),
training the same model on the same global batch, interleaved.

Each engine runs as a user runs it: `gluonperf.train`, through `gluonperf.launch` for the two
multi-process engines. `compare_engines` runs the rounds (the engines' order rotating), and
`engine_records` makes a record per engine: its step (every epoch but the first timed) and its
speed against the first engine, a paired ratio per round with its interval and verdict.
docs/engines.md explains the engines and how they are compared.

Nothing here parses arguments or prints.
"""
import os
import sys
from dataclasses import dataclass, replace

from ..measure import stats
from ..records import result
from ..training.model_spec import as_spec
from .runs import epoch_steps, mean_step, run_train

ENGINES = ("single", "horovod", "dist_sync")


@dataclass(frozen=True)
class Training:
    """What every engine trains: `model` (a ModelSpec, or its text) on `contexts` (names such as
    'cpu0'), `per_device_batch` images per context a step, `epochs` epochs (the first untimed) of
    `steps` steps each."""
    model: object
    contexts: list
    per_device_batch: int
    steps: int = 8
    epochs: int = 3


def engine_argv(engine, training, path, timeout):
    """The command line of one run of `engine` training as `training` says, writing its records
    to `path`: one process per device for horovod and dist_sync (a worker per context, launched
    by gluonperf.launch with its own --timeout `timeout`), all contexts in one for single."""
    if engine not in ENGINES:
        raise ValueError("unknown engine %r; choose from %s" % (engine, ", ".join(ENGINES)))
    model, contexts, per_device_batch = training.model, training.contexts, training.per_device_batch
    steps, epochs = training.steps, training.epochs
    n = len(contexts)
    train = [sys.executable, "-m", "gluonperf.train", *as_spec(model).flags, "--dataset", "synthetic",
             "--limit", str(per_device_batch * n * steps), "--epochs", str(epochs), "--lr", "0.05",
             "--log-interval", "0", "--json", path]
    launch = [sys.executable, "-m", "gluonperf.launch", "-n", str(n), "--timeout", str(timeout)]
    ctx = ",".join(contexts)
    if engine == "single":
        return train + ["--ctx", ctx, "--batch-size", str(per_device_batch * n)]
    if engine == "horovod":  # each rank takes its local rank's context of the list
        return launch + ["--engine", "horovod", "--"] + train + ["--kvstore", "horovod", "--ctx", ctx,
                                                                 "--batch-size", str(per_device_batch)]
    if any(not c.startswith("cpu") for c in contexts):
        raise ValueError("dist_sync workers here all train on --ctx's first context; with GPUs start one "
                         "worker per GPU yourself (gluonperf.launch with a per-worker --ctx), or leave dist_sync out")
    return launch + ["-s", "1", "--"] + train + ["--kvstore", "dist_sync", "--ctx", contexts[0],
                                                 "--batch-size", str(per_device_batch)]


def describe_engine(engine, n, kvstore="flat"):
    """'1 process, 2 contexts (kvstore flat)', '2 processes, Horovod allreduce', ..."""
    if engine == "single":
        return "1 process, %d contexts (kvstore %s)" % (n, kvstore)
    if engine == "horovod":
        return "%d processes, Horovod allreduce" % n
    return "%d processes + 1 server, dist_sync" % n


def compare_engines(training, engines=ENGINES, rounds=5, threshold=stats.THRESHOLD, timeout=600, progress=None,
                    steps_of=None):
    """Run every engine of `engines` once per round for `rounds` rounds (rotating their order),
    each training as `training` says (`epochs` epochs of `steps` steps of `per_device_batch`
    images per context on `contexts`); returns one record per engine (bench 'engines'): its step
    time and images/s (geometric mean over rounds, with the rounds' samples), and its speed
    against the first engine as a per-round paired ratio with interval and verdict. `steps_of`: a dict this
    fills with each engine's step per finished run, as it goes (what a stopped command keeps:
    `engine_records(steps_of, ..., partial=True)`)."""
    from ..runtime import guard
    engines, spec = list(engines), as_spec(training.model)
    contexts, per_device_batch = training.contexts, training.per_device_batch
    if len(contexts) < 2:
        raise ValueError("the engines differ in how they sum the gradients of several devices: give at "
                         "least 2 contexts, got %d" % len(contexts))
    if not engines or len(set(engines)) != len(engines):
        raise ValueError("engines must be distinct names of %s, got %r" % (", ".join(ENGINES), engines))
    if rounds < 1 or training.steps < 1 or training.epochs < 2:
        raise ValueError("need rounds >= 1, steps >= 1 and epochs >= 2 (the first epoch is not timed)")
    env = guard.package_env(drop=("DMLC_", "HOROVOD_"))  # a job of this process's own is no setting of theirs
    steps_of = {} if steps_of is None else steps_of
    steps_of.update({e: [] for e in engines})
    training = replace(training, model=spec)  # parsed once, here
    with guard.temp_dir(prefix="gluonperf-engines-") as tmp:
        for r in range(rounds):
            order = engines[r % len(engines):] + engines[:r % len(engines)]
            for engine in order:
                path = os.path.join(tmp, "%s-%d.json" % (engine, r))
                argv = engine_argv(engine, training, path, timeout)
                run_train(argv, env, timeout + 30, "%s (round %d)" % (engine, r + 1), kind="the run of engine")
                steps_of[engine].append(mean_step(epoch_steps(path, per_device_batch * len(contexts))))
                if progress:
                    progress()
    return engine_records(steps_of, training, threshold)


def engine_records(steps_of, training, threshold=stats.THRESHOLD, partial=False):
    """One record per engine of `steps_of` ({engine: its step per finished run}, the baseline
    first) that has run at least once, each trained as `training` says (see `compare_engines`);
    `partial`: the rounds were cut
    short (a stopped command), each record says so and how many rounds each engine finished.
    Against the baseline, the rounds both finished are paired."""
    from ..runtime.contexts import parse_contexts
    from ..training.trainers import default_kvstore
    model, contexts, per_device_batch = training.model, training.contexts, training.per_device_batch
    steps, epochs = training.steps, training.epochs
    kvstore = default_kvstore(parse_contexts(",".join(contexts)))  # what train takes for single, --kvstore unset
    engines = [e for e in steps_of if steps_of[e]]
    if not engines:
        return []
    base = next(iter(steps_of))
    n, global_batch = len(contexts), per_device_batch * len(contexts)
    out = []
    for engine in engines:
        samples = steps_of[engine]
        step = mean_step(samples)  # the geometric mean, as the ratios' intervals are made
        fields = dict(engine=engine, setup=describe_engine(engine, n, kvstore), processes=1 if engine == "single" else n,
                      devices=n, per_device_batch=per_device_batch, global_batch=global_batch, model=as_spec(model).text,
                      contexts=",".join(contexts), steps=steps, epochs=epochs, rounds=len(samples),
                      step_s=step, samples_s=samples, images_per_s=global_batch / step,
                      baseline=base)
        paired = min(len(steps_of[base]), len(samples))
        if engine == base:
            fields.update(vs_baseline=1.0)
        elif paired:
            interval = stats.ratio_interval(stats.paired_ratios(steps_of[base][:paired], samples[:paired]))
            judged = stats.verdict(interval, threshold, what="rounds")
            fields.update(interval.fields("vs_baseline"), **judged.fields())
        if partial:
            fields["partial"] = True
        out.append(result("engines", engine, **fields))
    return out

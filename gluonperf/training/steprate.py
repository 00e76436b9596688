"""Training-step throughput of one configuration, in this process.

`tune` measures each candidate setting in a fresh process (environment variables
such as OMP_NUM_THREADS or MXNET_ENGINE_TYPE are read once, when MXNet starts):
`python -m gluonperf.workers.steprate --model resnet18 --batch-size 64 --hybridize static`
(the command over this module) trains on synthetic in-memory batches and answers with images/s
in one line (the wire's: runtime/wire.py).

The loop is the book's concise multi-device loop (split_and_load, autograd,
backward, Trainer.step, no per-step sync), each step gluonperf.train's own
(`steps.train_step`), with the levers tune sweeps: hybridize mode, batch size,
contexts, kvstore. The timed region ends in `mx.nd.waitall()`.
"""
import time
from dataclasses import dataclass, replace
from typing import Optional

import mxnet as mx
import numpy as np
from mxnet import gluon

from ..runtime import wire
from ..runtime.worker_temp import share_with_workers
from .steps import train_step
from .model_spec import as_spec
from .models import get_model, loss_of, random_input

HYBRIDIZE = {
    "none": None,
    "hybrid": {},
    "static": {"static_alloc": True, "static_shape": True},
}


@dataclass(frozen=True)
class Setting:
    """One configuration of the book's loop, as tune's steprate worker runs it: `model` (a
    ModelSpec or its text) on `contexts` (None: the CPU) at global `batch_size`, hybridized as
    `hybridize` (a key of HYBRIDIZE), the Trainer on `kvstore`; `per_step_sync`: each step reads
    its loss back before the next is queued; `loader_workers`: batches from a DataLoader with that
    many worker processes (None: batches already in memory)."""
    model: object = "resnet18"
    contexts: Optional[tuple] = None
    batch_size: int = 64
    hybridize: str = "none"
    kvstore: str = "device"
    per_step_sync: bool = False
    loader_workers: Optional[int] = None


def synthetic_batches(model, batch_size, count, classes=10, seed=0):
    """`count` (X, y) batches of random images on the CPU, made before timing starts."""
    rng, spec = np.random.RandomState(seed), as_spec(model)
    return [(mx.nd.array(random_input(spec, batch_size, rng), dtype=spec.input_dtype),
             mx.nd.array(rng.randint(0, classes, size=batch_size).astype("float32")))
            for _ in range(count)]


def build(model, contexts, hybridize="none", kvstore="device", lr=0.1, seed=0, classes=10):
    """The book's setup: net initialised on every context, Trainer sgd, softmax CE loss."""
    mx.random.seed(seed)
    net = get_model(model, classes, contexts)
    net.initialize(mx.init.Normal(sigma=0.01), ctx=contexts)
    if HYBRIDIZE[hybridize] is not None:
        net.hybridize(**HYBRIDIZE[hybridize])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr}, kvstore=kvstore)
    return net, trainer, loss_of(model)


def loader_batches(model, batch_size, count, workers, classes=10, seed=0):
    """An endless iterator over a shuffled DataLoader with `workers` processes (as training uses)."""
    rng = np.random.RandomState(seed)
    x = random_input(model, batch_size * count, rng)
    y = rng.randint(0, classes, size=batch_size * count).astype("float32")
    if workers:
        share_with_workers()  # the workers leave no pymp-* folder behind (runtime.worker_temp)
    data = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size, shuffle=True,
                                 num_workers=workers, last_batch="discard")
    while True:
        for batch in data:
            yield batch


def run_steps(net, trainer, loss, batches, contexts, steps, per_step_sync=False):
    """`steps` training steps (`steps.train_step`, as gluonperf.train runs them), no sync unless
    `per_step_sync` (then each step reads its loss back with asscalar() before the next one is
    queued, as a loop that logs every step does). `batches`: a list to cycle through, or an iterator."""
    for i in range(steps):
        X, y = batches[i % len(batches)] if isinstance(batches, list) else next(batches)
        _, ls, _ = train_step(net, trainer, loss, X, y, contexts)
        if per_step_sync:
            sum(l.sum().asscalar() for l in ls)


def session(setting, warmup=2):
    """Build and warm up one configuration (a `Setting`); returns `timed(steps) -> seconds` (to a sync)."""
    contexts, spec = list(setting.contexts or [mx.cpu()]), as_spec(setting.model)
    batch_size, per_step_sync, loader_workers = setting.batch_size, setting.per_step_sync, setting.loader_workers
    if batch_size < len(contexts):
        raise ValueError("batch size %d is smaller than the %d contexts" % (batch_size, len(contexts)))
    net, trainer, loss = build(spec, contexts, setting.hybridize, setting.kvstore)
    if loader_workers is None:
        batches = synthetic_batches(spec, batch_size, 4)
    else:
        batches = loader_batches(spec, batch_size, 8, loader_workers)
    run_steps(net, trainer, loss, batches, contexts, warmup, per_step_sync)
    mx.nd.waitall()

    def timed(steps):
        start = time.perf_counter()
        run_steps(net, trainer, loss, batches, contexts, steps, per_step_sync)
        mx.nd.waitall()
        return time.perf_counter() - start
    return timed


def serve(timed, batch_size, stdin=None, stdout=None):
    """Answer each request on stdin ({"steps": N}, the wire's warm transport: runtime/wire.py) with
    {images_per_s, seconds, images}, after saying it is ready; stops at EOF.

    A warmed-up worker that waits (idle) between requests lets a coordinator
    interleave several configurations step-block by step-block, each in its own
    process with its own environment."""
    def run(settings):
        steps = int(settings["steps"])
        seconds = timed(steps)
        return {"images_per_s": batch_size * steps / seconds, "seconds": seconds, "images": batch_size * steps}
    wire.serve(run, stdin=stdin, stdout=stdout)


def step_rate(setting, steps=10, warmup=2, repeat=1):
    """Images/s of the book's loop in this `Setting`: a dict of the figures (the median of `repeat`
    timed runs of `steps` steps, after `warmup`)."""
    contexts, spec = list(setting.contexts or [mx.cpu()]), as_spec(setting.model)
    timed = session(replace(setting, model=spec, contexts=tuple(contexts)), warmup)  # the spec parsed once
    samples = [timed(steps) for _ in range(repeat)]
    seconds = float(np.median(samples))
    batch_size = setting.batch_size
    return {"images_per_s": batch_size * steps / seconds, "step_s": seconds / steps,
            "samples_s": samples, "steps": steps, "batch_size": batch_size,
            "contexts": ",".join("%s%d" % (c.device_type, c.device_id) for c in contexts),
            "hybridize": setting.hybridize, "kvstore": setting.kvstore, "model": spec.text,
            "per_step_sync": setting.per_step_sync, "loader_workers": setting.loader_workers}

"""Fixed training steps on 1, 2, ... N contexts, each split into compute (t1), gradient
communication (t2) and the update (`train --scaling`; the measured step of `gluonperf.scaling`).
"""
import time

import mxnet as mx
import numpy as np
from mxnet import gluon

from .. import UserError
from ..measure import stats
from ..measure.harness import Benchmark, Measurement
from ..config import JOB_KVSTORES
from ..runtime.contexts import describe
from .data import load_for
from .models import loss_of
from .steps import forward_backward
from .trainers import build_net, lr_for_devices, make_trainer, with_spec
from ..records import result


def scaling(config, contexts, steps=None, progress=None):
    """Fixed training steps on 1, 2, ... N of `contexts` with the same per-device batch.

    Per device count: the measured step time (forward, backward, Trainer.step, to a
    sync), and the step split into t1 = compute (forward + backward, to a sync),
    t2 = gradient communication (trainer.allreduce_grads(), to a sync) and the
    update; the book's model says a step costs about max(t1, t2) when
    communication overlaps compute and t1 + t2 when it does not. Speedup (with its 95%
    interval from the step times of the two phases) and parallel efficiency are relative
    to one device. Returns Results, bench='scaling'. `config.model`: a ModelSpec, or its text,
    parsed here once (`trainers.with_spec`).
    """
    contexts, config = list(contexts), with_spec(config)
    steps = steps or config.steps
    per_device = config.batch_size // len(contexts)
    if per_device < 1:
        raise UserError("--batch-size %d is smaller than the number of contexts (%d)"
                        % (config.batch_size, len(contexts)))
    if config.kvstore in JOB_KVSTORES:
        raise UserError("--scaling runs on the contexts of one machine; use --kvstore flat, device or local")
    train_set, _ = load_for(config)
    need = per_device * len(contexts)
    index = np.arange(need) % len(train_set)
    samples = [train_set[i][0] for i in index]  # numpy (named sets) or NDArray (image data)
    x_all = mx.nd.array(np.stack([x.asnumpy() if isinstance(x, mx.nd.NDArray) else x for x in samples]))
    y_all = mx.nd.array(np.array([train_set[i][1] for i in index]))
    loss_fn = loss_of(config.model)
    results, one = [], None
    for n in range(1, len(contexts) + 1):
        ctxs = contexts[:n]
        mx.random.seed(config.seed)
        net = build_net(config, ctxs)
        trainer = make_trainer(net, config, lr_for_devices(config, n), kvstore=config.kvstore)
        batch = per_device * n
        xs = gluon.utils.split_and_load(x_all[:batch], ctxs)
        ys = gluon.utils.split_and_load(y_all[:batch], ctxs)

        def step():
            forward_backward(net, loss_fn, xs, ys)
            trainer.step(batch)
        for _ in range(2):  # warm-up: deferred init, graph building, kvstore init
            step()
        samples = {"step": [], "t1": [], "t2": [], "update": [], "cpu": []}
        for _ in range(steps):
            cpu = time.process_time()
            with Benchmark() as b:
                step()
            samples["cpu"].append(time.process_time() - cpu)  # every thread of this process, to the sync
            samples["step"].append(b.seconds)
            with Benchmark() as b:
                forward_backward(net, loss_fn, xs, ys)
            samples["t1"].append(b.seconds)
            with Benchmark() as b:
                trainer.allreduce_grads()
            samples["t2"].append(b.seconds)
            with Benchmark() as b:
                trainer.update(batch)
            samples["update"].append(b.seconds)
            if progress:
                progress()
        m = {k: Measurement(k, tuple(v)) for k, v in samples.items()}
        t1, t2, upd = m["t1"].median, m["t2"].median, m["update"].median
        rate = batch / m["step"].median
        one = one or m["step"].samples
        # against one device: the step times of the two phases, measured one after the other
        # (Welch's t on their logs), times the larger batch
        ratio = stats.two_sample_interval(one, m["step"].samples, noise_floor=0) if n > 1 else None
        speedup = {"speedup": 1.0} if ratio is None else dict(
            stats.Interval(n * ratio.estimate, n * ratio.low, n * ratio.high, ratio.n, ratio.level,
                           ratio.method).fields("speedup"))
        results.append(result(
            "scaling", "%d device%s" % (n, "s" if n > 1 else ""), m["step"],
            devices=n, contexts=describe(ctxs), per_device_batch=per_device, batch_size=batch,
            model=config.model.text, kvstore=config.kvstore, steps=steps,
            step_s=m["step"].median, t1_s=t1, t2_s=t2, update_s=upd, cpu_s=m["cpu"].median,
            overlap_model_s=max(t1, t2) + upd, serial_model_s=t1 + t2 + upd,
            images_per_s=rate, efficiency=speedup["speedup"] / n, **speedup))
    return results

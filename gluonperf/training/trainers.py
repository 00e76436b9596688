"""What a data-parallel training run is built from, before its first step: its model as a
ModelSpec (`with_spec`), the model on its contexts (`build_net`), the learning rate scaled with
the devices and its schedule (`lr_for_devices`, `lr_schedule`), the kvstore (`default_kvstore`,
`create_kvstore`), the Trainer over it (`make_trainer`) and the same first weights on every
worker (`sync_initial_weights`). Used by the training loop (`training.loop.fit`), the scaling steps
(`training.device_scaling`) and the experiments that time a step.
"""
import os
from dataclasses import replace

import mxnet as mx
from mxnet import gluon

from .. import UserError
from ..config import HYBRIDIZE
from .data import classes
from .models import get_model
from .model_spec import ModelSpec, as_spec
from . import optimizers
from .horovod import Job
from ..runtime import precision

DMLC_ENV = ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_PS_ROOT_PORT", "DMLC_NUM_WORKER", "DMLC_NUM_SERVER")


def with_spec(config):
    """`config` with its model as a ModelSpec: itself when it holds one (a command puts the spec
    it resolved there, `cli.training_flags.config_from`), else a copy with its text parsed, once
    here (a checkpoint's config, a library caller's `TrainConfig(model="lenet")`). The entry
    points of a run (`loop.fit`, `device_scaling.scaling`, the experiments that take a config)
    call it, and pass on a config whose model every later step takes as the object."""
    return config if isinstance(config.model, ModelSpec) else replace(config, model=as_spec(config.model))


def create_kvstore(config):
    """A dist kvstore object or a Horovod job (`horovod.Job`), created before data is loaded,
    so rank and number of workers are known, or the kvstore name for gluon.Trainer to create
    locally."""
    if config.kvstore == "horovod":
        return Job()
    if config.kvstore.startswith("dist"):
        missing = [v for v in DMLC_ENV if v not in os.environ]
        if missing:
            raise UserError("--kvstore %s needs the DMLC_* environment of a distributed job (%s not set); "
                            "start it with python -m gluonperf.launch -n 2 -- python -m gluonperf.train "
                            "--kvstore %s ..." % (config.kvstore, ", ".join(missing), config.kvstore))
        return mx.kv.create(config.kvstore)
    return config.kvstore


def build_net(config, contexts):
    """The model, initialised on every context with the same (seeded) weights, in
    bfloat16 mixed precision with --dtype bfloat16 (gluonperf.runtime.precision)."""
    precision.enable(config.dtype, contexts)
    net = get_model(config.model, classes(config.dataset), contexts)
    net.initialize(mx.init.Xavier(), ctx=contexts)
    flags = HYBRIDIZE[config.hybridize]
    if flags is not None:
        net.hybridize(**flags)
    return net


def lr_for_devices(config, devices, num_workers=1):
    """--lr, times the number of devices (x workers) with --lr-scale linear."""
    lr = config.learning_rate  # --lr, or the optimizer's default
    return lr * devices * num_workers if config.lr_scale == "linear" else lr


def gluoncv_lr_scheduler():
    """GluonCV's module of LRScheduler and LRSequential, which needs only MXNet's lr_scheduler:
    read from its file, under its own name, where GluonCV is not loaded yet, since `import
    gluoncv` loads its whole package (model zoo, data sets), 0.2-0.3 s of each training
    command's start. Under its own name, a later `import gluoncv` reuses it (the same classes),
    and a pickled schedule (a dist kvstore's optimizer) is read back as GluonCV's."""
    import sys
    name = "gluoncv.utils.lr_scheduler"
    if name not in sys.modules:
        import importlib.util
        package = importlib.util.find_spec("gluoncv")  # finds the package without running its __init__
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(package.submodule_search_locations[0], "utils", "lr_scheduler.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def lr_schedule(config, lr, iters_per_epoch):
    """Linear warm-up over --warmup-epochs, then cosine / step (x0.1 at 50% and 75%) /
    constant: GluonCV's LRScheduler pieces joined by LRSequential."""
    gluoncv = gluoncv_lr_scheduler()
    LRScheduler, LRSequential = gluoncv.LRScheduler, gluoncv.LRSequential
    warmup = min(config.warmup_epochs, config.epochs)
    rest = config.epochs - warmup
    parts = []
    if warmup * iters_per_epoch > 1:
        parts.append(LRScheduler("linear", base_lr=0.0, target_lr=lr, nepochs=warmup,
                                 iters_per_epoch=iters_per_epoch))
    if rest > 0 or not parts:
        nepochs = max(rest, 1)
        mode = config.lr_decay if nepochs * iters_per_epoch > 1 else "none"
        if mode == "cosine":
            parts.append(LRScheduler("cosine", base_lr=lr, target_lr=0.0, nepochs=nepochs,
                                     iters_per_epoch=iters_per_epoch))
        elif mode == "step":
            parts.append(LRScheduler("step", base_lr=lr, nepochs=nepochs, iters_per_epoch=iters_per_epoch,
                                     step_epoch=[nepochs * 0.5, nepochs * 0.75], step_factor=0.1))
        else:
            parts.append(LRScheduler("constant", base_lr=lr, nepochs=nepochs, iters_per_epoch=iters_per_epoch))
    schedule = LRSequential(parts)
    schedule.base_lr = lr  # what the optimizer compares --lr with
    return schedule


def default_kvstore(contexts):
    """flat on several CPU contexts (gluonperf.training.flat: measured faster than device there,
    docs/levers.md), MXNet's device kvstore otherwise."""
    contexts = list(contexts)
    return "flat" if len(contexts) > 1 and all(c.device_type == "cpu" for c in contexts) else "device"


def make_trainer(net, config, lr, schedule=None, kvstore="device"):
    """gluon.Trainer over `kvstore`. update_on_kvstore=False: gradients are all-reduced
    over the kvstore and every context applies the update, which lets `device_scaling.scaling` time
    allreduce_grads() and update() apart and keeps trainer states savable in dist runs.
    kvstore 'flat' (several contexts): gluonperf.training.flat.FlatTrainer, which sums each
    context's share of one flat gradient array and updates each parameter once.
    The optimizer is gluonperf.training.optimizers': SGD updates each parameter with its own
    operator on CPU."""
    params = {"learning_rate": lr, "wd": config.wd, "momentum": config.momentum, "beta1": config.beta1,
              "beta2": config.beta2, "epsilon": config.epsilon}
    if schedule is not None:
        params["lr_scheduler"] = schedule
    optimizer = optimizers.create(config.optimizer, **params)
    if isinstance(kvstore, Job):
        return kvstore.trainer(net.collect_params(), optimizer)
    if kvstore == "flat":
        from .flat import FlatTrainer
        return FlatTrainer(net, optimizer)
    return gluon.Trainer(net.collect_params(), optimizer, kvstore=kvstore, update_on_kvstore=False)


def sync_initial_weights(net, trainer, contexts, sample_shape, job=None):
    """For dist kvstores: put rank 0's weights on the servers and pull them to every
    worker before the first gradient is pushed; for a Horovod `job`, broadcast rank 0's
    weights to every worker.

    MXNet 1.9.1 otherwise does this lazily inside the first `Trainer.step`, where the
    pull of the initial weights and the push of the first gradients (same key, with
    update_on_kvstore=False) are independent operations: when the gradients reach the
    server first, a worker receives the gradient sum as its weights and the workers
    diverge. Seen in 4 of 9 two-worker runs under load; 0 of 6 with this fix.

    The forward that finishes deferred initialisation runs in inference mode, where MXNet's
    oneDNN convolutions turn their weight arrays into oneDNN's blocked layout in place, which
    the dist kvstore cannot send ("kvstore doesn't handle MKLDNN correctly", MXNet's
    mkldnn_convolution.cc): rank 0's init failed in the engine and the server aborted on the
    first pull ("init 5 first" with ResNet-18). `reset_ctx` gives every parameter a copy in
    MXNet's own layout, with the same values (a forward in training mode did not turn them back).
    """
    for ctx in contexts:  # finish deferred initialisation, so every parameter is known
        net(mx.nd.zeros((1,) + tuple(sample_shape), ctx=ctx))
    for p in net.collect_params().values():
        p.reset_ctx(p.list_ctx())
    if job is not None:
        job.broadcast(net)
    else:
        trainer._init_kvstore()   # private, but the only way to order init before the first push
        trainer._init_params()
    mx.nd.waitall()

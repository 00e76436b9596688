"""Horovod (`horovod.mxnet`) as the engine of a data-parallel job: one process per device,
the gradients summed by Horovod's allreduce (a ring over Gloo between CPUs, NCCL between
GPUs), the initial weights broadcast from rank 0.

What the training loop needs of it is `Job`: rank and number of workers (as a dist kvstore
gives them), the device of this process, a `DistributedTrainer` that divides by the global
batch as every gluonperf trainer does, the broadcast of the first weights, and `check_equal`,
which every worker runs after every epoch: MXNet 1.9.1's own `kvstore='horovod'` trains
several processes without synchronising them and without an error, so that the ranks end
with different weights; gluonperf says so instead of reporting such a run.

Horovod is not a requirement of the package: its build needs flags an extra cannot carry
(scripts/install-horovod, docs/engines.md).
"""
import os

import numpy as np

from .. import UserError
from ..runtime.horovod_launcher import INSTALL

TOLERANCE = 1e-6  # relative: the ranks apply the same summed gradient, so their weights agree to rounding


class WorkersDiverged(UserError):
    """The workers' weights differ: the gradients were not synchronised."""


def load():
    """horovod.mxnet, or a UserError that says how to install it."""
    try:
        import horovod.mxnet as hvd
    except ImportError as e:
        raise UserError("--kvstore horovod needs Horovod built with MXNet support, and it does not import here "
                        "(%s); install it with %s" % (e, INSTALL)) from None
    return hvd


def device_of(contexts, local_rank=None, local_size=None):
    """This process's context among `contexts`: the only one, or the local rank's when the list
    has one context per process of this machine (`--ctx gpu0,gpu1` under horovodrun -np 2)."""
    contexts = list(contexts)
    if local_rank is None:
        local_rank = int(os.environ.get("HOROVOD_LOCAL_RANK", 0))
        local_size = int(os.environ.get("HOROVOD_LOCAL_SIZE", 1))
    if len(contexts) == 1:
        return contexts[0]
    if len(contexts) != local_size:
        raise ValueError("Horovod runs one process per device: give one context, or one per process on this "
                         "machine (%d here), not %d" % (local_size, len(contexts)))
    return contexts[local_rank]


class Job:
    """This process's place in a Horovod job (hvd.init on creation): `rank`, `num_workers`,
    `local_rank`, as a dist kvstore's rank and num_workers."""

    def __init__(self):
        self.hvd = hvd = load()
        hvd.init()
        self.rank, self.num_workers = hvd.rank(), hvd.size()
        self.local_rank, self.local_size = hvd.local_rank(), hvd.local_size()

    def trainer(self, params, optimizer):
        """hvd.DistributedTrainer over `params`, with one change: gluonperf's loop calls
        `step(global batch)` (the gradients are summed over every worker's samples), while
        Horovod's trainer expects the local batch and divides by the number of workers
        itself (in `_scale`, or by averaging in the allreduce); that division is undone,
        so the update is the sum over all samples divided by the global batch in both cases."""
        trainer = self.hvd.DistributedTrainer(params, optimizer)
        trainer._scale *= self.num_workers
        return trainer

    def broadcast(self, net):
        """Rank 0's parameters (weights and BatchNorm statistics) to every worker."""
        self.hvd.broadcast_parameters(net.collect_params(), root_rank=0)

    def check_equal(self, net, ctx, what="after training"):
        """Every worker compares its trained weights with rank 0's (sum and sum of |w| of each
        parameter with a gradient, gathered from all ranks) and raises `WorkersDiverged` on all
        ranks alike when they differ by more than `TOLERANCE`. Returns the largest relative
        difference seen."""
        import mxnet as mx
        sums = []
        for p in net.collect_params().values():
            if p.grad_req != "null":
                w = p.data(ctx).astype("float64")
                sums += [w.sum(), w.abs().sum()]
        mine = mx.nd.concat(*[s.reshape((1,)) for s in sums], dim=0).as_in_context(mx.cpu()).reshape((1, -1))
        every = self.hvd.allgather(mine, name="gluonperf.weights_check").asnumpy()
        scale = np.maximum(np.abs(every[0]), 1e-12)
        by_rank = (np.abs(every - every[0]) / scale).max(axis=1)
        worst = int(by_rank.argmax())
        if by_rank[worst] > TOLERANCE:
            raise WorkersDiverged(
                "the workers' weights differ %s: rank %d's differ from rank 0's by up to %.3g (relative; %d of %d "
                "ranks differ): the gradients were not synchronised, so this run trained %d separate models"
                % (what, worst, by_rank[worst], int((by_rank > TOLERANCE).sum()), len(by_rank), len(by_rank)))
        return float(by_rank.max())

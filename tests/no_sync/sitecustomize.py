"""Put first on PYTHONPATH by tests/test_horovod.py: in the ranks of a Horovod job (HOROVOD_RANK
set), Horovod's DistributedTrainer no longer all-reduces the gradients, as MXNet 1.9.1's own
kvstore='horovod' silently does not; every rank then trains on its own data alone. The end-of-epoch
weights check must catch it."""
import os

if "HOROVOD_RANK" in os.environ:
    import horovod.mxnet as hvd

    hvd.DistributedTrainer._allreduce_grads = lambda self: None

"""A training run's configuration, and the names the commands' flags accept, without MXNet.

The command lines build their parsers from these, so `--help` and a bad flag answer before
MXNet loads (docs/install.md, "Start-up time"); the working modules import them from here.

`TrainConfig.model` is the run's model spec: a ModelSpec inside a process, or its text from
outside one (a checkpoint's config, a library caller's `TrainConfig(model="lenet")`), which
the entry of a run (`training.trainers.with_spec`) parses once. Records and checkpoints keep
the text (`training.model_spec.text_of`). This module knows no ModelSpec: config sits below
training (tests/test_layers.py); docs/internals.md says why it holds either.
"""
from dataclasses import dataclass, fields
from typing import Optional

DATASETS = {
    "fashion-mnist": "Zalando's Fashion-MNIST (60000 + 10000 28x28 images), read from --data-dir",
    "digits": "the UCI handwritten digits (1797 8x8 images) resized to 28x28; offline",
    "synthetic": "random images whose label is learnable, for throughput",
}
# hybridize mode -> arguments of Block.hybridize (None: imperative)
HYBRIDIZE = {"none": None, "hybrid": {}, "static": {"static_alloc": True, "static_shape": True}}
LR_DECAYS = ("cosine", "step", "none")
KVSTORES = ("device", "flat", "local", "nccl", "dist_sync", "dist_device_sync", "horovod")
JOB_KVSTORES = ("dist_sync", "dist_device_sync", "horovod")  # one process per worker: a job, not one machine's contexts
OPTIMIZERS = ("sgd", "nag", "adagrad", "rmsprop", "adam", "adamw")
# the hyper-parameter flags each optimizer takes (besides --lr and --wd), and its --lr when none is given:
# SGD's 0.1 is ten to a hundred times what the adaptive methods train with (MXNet's figures and the book's)
OPTIMIZER_FLAGS = {"sgd": ("momentum",), "nag": ("momentum",), "adagrad": ("epsilon",),
                   "rmsprop": ("beta2", "epsilon"), "adam": ("beta1", "beta2", "epsilon"),
                   "adamw": ("beta1", "beta2", "epsilon")}
# optimizers with two implementations that give the same weights: one operator per parameter, or
# MXNet's multi-tensor operator with MXNET_OPTIMIZER_AGGREGATION_SIZE set (gluonperf.training.optimizers; tune's lever)
GROUPED_UPDATES = ("sgd", "adamw")
# bench optimizers: the updates the book's optimization chapter writes from scratch
# (gluonperf.experiments.optimizer_cost)
UPDATE_OPTIMIZERS = ("sgd", "adagrad", "rmsprop", "adam")
# adagrad: MXNet's own default. At 0.1 LeNet on digits blew up in its first epoch for each of 4
# seeds (docs/optimizers.md).
DEFAULT_LR = {"sgd": 0.1, "nag": 0.1, "adagrad": 0.01, "rmsprop": 0.01, "adam": 0.001, "adamw": 0.001}
# bench allreduce / scratch: the from-scratch allreduce schedules, and MXNet's kvstores beside them
ALLREDUCE_METHODS = ["book", "ring", "tree"]
ALLREDUCE_KVSTORES = ["kv-device", "kv-local"]
# ... and Horovod's allreduce (hvd.allreduce_), in one process per context started by horovodrun
ALLREDUCE_HOROVOD = "horovod"


@dataclass
class TrainConfig:
    """Everything a training run depends on; field names match the CLI flags."""
    model: object = "resnet18"      # a ModelSpec inside a process, or its text (see the module's docstring)
    hybridize: str = "static"
    dataset: str = "fashion-mnist"
    data_dir: Optional[str] = None
    limit: Optional[int] = None
    workers: int = 2
    batch_size: int = 64
    epochs: int = 4
    lr: Optional[float] = None  # None: the optimizer's DEFAULT_LR (see `learning_rate`)
    lr_scale: str = "none"
    optimizer: str = "sgd"
    momentum: float = 0.9
    wd: float = 5e-4
    beta1: Optional[float] = None    # None: the optimizer's own default (gluonperf.training.optimizers)
    beta2: Optional[float] = None
    epsilon: Optional[float] = None
    warmup_epochs: int = 1
    lr_decay: str = "cosine"
    kvstore: str = "device"
    seed: int = 0
    log_interval: int = 50
    save: Optional[str] = None
    resume: Optional[str] = None
    steps: int = 20
    checkpoint_segments: int = 0
    dtype: str = "float32"
    target_top1: Optional[float] = None
    loader: str = "dataloader"      # image data (--dataset PATH): DataLoader workers, or MXNet's ImageRecordIter
    bad_images: str = "stop"        # image data: a corrupt image stops the run, or is skipped and counted

    @property
    def learning_rate(self):
        """--lr, or the optimizer's default learning rate when it was not given."""
        return DEFAULT_LR.get(self.optimizer, 0.1) if self.lr is None else self.lr


def config_fields():
    return [f.name for f in fields(TrainConfig)]

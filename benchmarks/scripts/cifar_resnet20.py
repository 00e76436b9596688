"""A newcomer's CIFAR-10 ResNet-20, written the way GluonCV's train_cifar10.py tutorial writes it
(benchmarks/advice.py tunes it with `python -m gluonperf.tune -- python benchmarks/scripts/cifar_resnet20.py`).

As written: GluonCV's `cifar_resnet20_v1`, per-sample transforms (random crop and flip,
to tensor, normalize) in a DataLoader without workers, not hybridized, float32, the training
metric updated every batch. CIFAR-10 cannot be downloaded here: the images are random 32x32
RGB images with random labels, the same shape and type as CIFAR-10's.
The flags apply the changes a recipe can name, by hand: --hybridize {hybrid,static},
--num-workers N and --thread-pool, --amp (bfloat16 AMP), --read-every N (the metric updated
every N batches).
"""
import argparse

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.data.vision import transforms
from gluoncv.model_zoo import get_model

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=5)
p.add_argument("--hybridize", choices=["none", "hybrid", "static"], default="none")
p.add_argument("--num-workers", type=int, default=0)
p.add_argument("--thread-pool", action="store_true")
p.add_argument("--amp", action="store_true")
p.add_argument("--read-every", type=int, default=1)
args = p.parse_args()

rng = np.random.RandomState(0)
images = mx.nd.array(rng.randint(0, 256, size=(4096, 32, 32, 3)), dtype="uint8")
labels = rng.randint(0, 10, size=len(images)).astype("float32")
transform_train = transforms.Compose([
    transforms.RandomResizedCrop(32, scale=(0.8, 1.0)),
    transforms.RandomFlipLeftRight(),
    transforms.ToTensor(),
    transforms.Normalize([0.4914, 0.4822, 0.4465], [0.2023, 0.1994, 0.2010]),
])
train_data = gluon.data.DataLoader(gluon.data.ArrayDataset(images, labels).transform_first(transform_train),
                                   batch_size=64, shuffle=True, last_batch="discard",
                                   num_workers=args.num_workers, thread_pool=args.thread_pool)

if args.amp:
    from mxnet.contrib import amp
    amp.init(target_dtype="bfloat16")
net = get_model("cifar_resnet20_v1", classes=10)
net.initialize(mx.init.Xavier())
if args.hybridize != "none":
    net.hybridize(static_alloc=args.hybridize == "static", static_shape=args.hybridize == "static")
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "wd": 1e-4, "momentum": 0.9})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
metric = mx.metric.Accuracy()

for epoch in range(args.epochs):
    metric.reset()
    for i, (data, label) in enumerate(train_data):
        with autograd.record():
            output = net(data)
            loss = loss_fn(output, label)
        loss.backward()
        trainer.step(data.shape[0])
        if (i + 1) % args.read_every == 0:
            metric.update([label], [output])
    name, acc = metric.get()
    print("epoch %d: training %s %.3f" % (epoch, name, acc))

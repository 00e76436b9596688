"""A training script whose memory over time is known by construction, as a user writes one: a
2-layer MLP on batches of 64, 300 steps, and by its flags

--keep: each step's output (64 x 1024 float32, 256 KiB) goes into a list kept to the end, to
  score the run from it (a leak of 256 KiB a step); without it, the correct count is added up
  on the device (holds nothing);
--cache-at K: 16 MiB a step go into a cache at steps K to K+4 (80 MiB once), then nothing;
--loader-leak: the batches come from a DataLoader with one worker process whose dataset keeps
  256 KiB of every batch it makes (a leak on the worker's side, not in this process);
--sync: `mx.nd.waitall()` after each trainer.step (without it, nothing in the loop waits for
  the engine: Python runs ahead of it);
--truth N: the truth, as the issue measured it: waitall after each step and this process's
  resident memory (and its descendants' proportional memory) printed every N steps, as
  'rss STEP KIB CHILDREN_KIB'.

It knows nothing of gluonperf; the tests run it under `python -m gluonperf.profile --`.
"""
import argparse
import ctypes
import os

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=300)
p.add_argument("--keep", action="store_true")
p.add_argument("--cache-at", type=int, default=None)
p.add_argument("--loader-leak", action="store_true")
p.add_argument("--sync", action="store_true")
p.add_argument("--truth", type=int, default=0)
args = p.parse_args()
if args.keep:
    # glibc raises its mmap threshold each time a mapped block is freed, and the blocks under it then
    # come from heaps whose fragmentation added 0-60% to a run's resident growth, at random (257 to 400
    # KiB a step for the same 256 KiB kept, on the 2-core EPYC, 2026-11-29): held at its first value
    # (M_MMAP_THRESHOLD, 128 KiB), each kept output is a mapping of its own and the growth is what the
    # script keeps, 263 KiB a step in every run. (Without --keep it stays as glibc has it: there, every
    # step's mapped and unmapped temporaries would move the resident memory by a megabyte.)
    ctypes.CDLL(None).mallopt(-3, 128 * 1024)


def kib_of(pid):
    with open("/proc/%d/status" % pid) as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def children_kib():
    """The descendants' proportional set size (a page shared with this process counts in part)."""
    import psutil
    total = 0
    for child in psutil.Process().children(recursive=True):
        with open("/proc/%d/smaps_rollup" % child.pid) as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    return total


class Leaky(gluon.data.Dataset):
    """Random samples; with `keep`, 4 KiB kept for each sample made (256 KiB a batch of 64)."""

    def __init__(self, n, keep):
        rng = np.random.RandomState(0)
        self.x, self.y = rng.uniform(size=(n, 32)).astype("float32"), rng.randint(0, 1024, size=n).astype("float32")
        self.keep, self.kept = keep, []

    def __getitem__(self, i):
        if self.keep:
            self.kept.append(np.ones(1024, dtype="float32"))
        return self.x[i], self.y[i]

    def __len__(self):
        return len(self.x)


rng = np.random.RandomState(0)
if args.loader_leak:
    loader = gluon.data.DataLoader(Leaky(64 * args.steps, True), batch_size=64, num_workers=1)
    batches = iter(loader)
else:
    fixed = [(mx.nd.array(rng.uniform(size=(64, 32))), mx.nd.array(rng.randint(0, 1024, size=64)))
             for _ in range(16)]
    batches = (fixed[s % len(fixed)] for s in range(args.steps))
net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(1024))
net.initialize(mx.init.Xavier())
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})

outputs, labels, cache = [], [], {}
correct = mx.nd.zeros(1)
for step in range(args.steps):
    data, label = next(batches)
    with autograd.record():
        out = net(data)
        loss = loss_fn(out, label)
    loss.backward()
    trainer.step(data.shape[0])
    if args.sync or args.truth:
        mx.nd.waitall()
    if args.keep:
        outputs.append(out)
        labels.append(label)
    else:
        correct = correct + (out.argmax(axis=1) == label).sum()
    if args.cache_at is not None and args.cache_at <= step < args.cache_at + 5:
        cache[step] = mx.nd.ones((4 * 2 ** 20,))  # 16 MiB, written: resident
    if args.truth and (step + 1) % args.truth == 0:
        mx.nd.waitall()
        print("rss %d %d %d" % (step + 1, kib_of(os.getpid()), children_kib()), flush=True)
if args.keep:
    correct = sum(float((o.argmax(axis=1) == l).sum().asscalar()) for o, l in zip(outputs, labels))
else:
    correct = correct.asscalar()
print("done: accuracy %.4f, %d MiB cached" % (correct / (64 * args.steps),
                                            sum(a.size * 4 for a in cache.values()) // 2 ** 20))

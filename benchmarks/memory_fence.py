"""What `profile --`'s wait for the engine every 10 steps (script/memory.py, FENCE_EVERY) costs a
script that never syncs: a 2-layer MLP of tests/user_scripts/mlp_memory.py's shape, 300 steps
of batch 64 timed to a sync, without and with mx.nd.waitall() every 10 steps, interleaved in one
process (the order alternating from round to round); the ratio of the times with its 95% t
interval.

    python benchmarks/memory_fence.py [ROUNDS]
"""
import math, statistics, sys, time
import mxnet as mx
from mxnet import autograd, gluon
from scipy import stats as sp

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(1024, activation="relu"), gluon.nn.Dense(1024))
net.initialize(mx.init.Xavier())
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
x = mx.nd.random.uniform(shape=(64, 32)); y = mx.nd.random.randint(0, 1024, shape=(64,)).astype("float32")

def run(every):
    correct = mx.nd.zeros((1,))
    mx.nd.waitall(); t = time.perf_counter()
    for step in range(1, 301):
        with autograd.record():
            out = net(x); loss = loss_fn(out, y)
        loss.backward(); trainer.step(64)
        correct = correct + (out.argmax(axis=1) == y).sum()
        if every and step % every == 0:
            mx.nd.waitall()
    mx.nd.waitall()
    return time.perf_counter() - t

run(0); run(10)
ratios = []
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    a, b = (run(0), run(10)) if r % 2 == 0 else tuple(reversed((run(10), run(0))))
    ratios.append(b / a)
logs = [math.log(v) for v in ratios]
m, s = statistics.mean(logs), statistics.stdev(logs)
h = sp.t.ppf(0.975, len(logs) - 1) * s / math.sqrt(len(logs))
print("with a wait every 10 steps / without: %.3fx (95%% CI %.3f-%.3f, %d rounds)" % (math.exp(m), math.exp(m - h), math.exp(m + h), len(logs)))

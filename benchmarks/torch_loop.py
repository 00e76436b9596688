"""The yardstick users would pick instead: the same ResNet-18 trained with PyTorch on the CPU.

The book's 28x28 ResNet-18 (gluonperf.training.models.resnet18: 3x3 stem, no max-pool, four
stages of two residual blocks, global average pooling, dense) written as an
`nn.Module`, trained eagerly with plain SGD (momentum 0.9) and cross-entropy on
batches already in memory (random images of the synthetic set's shape), with
PyTorch's default threads (MXNet is never loaded in this process). Benchmark-only, in a
venv of its own (GluonCV 0.11 refuses to import beside torch 2.x); nothing in the
package imports it:

    python3 -m venv .venv-torch && .venv-torch/bin/pip install torch==2.13.0
    .venv-torch/bin/python benchmarks/torch_loop.py --batch-size 64 --steps 20

prints one line with images/s (gluonperf's wire, runtime/wire.py); `--serve` answers each
request for N steps on stdin like benchmarks/book_loop.py, so benchmarks/train_throughput.py can
interleave it.
"""
import argparse
import atexit
import importlib.util
import os
import shutil
import tempfile
import time

MODEL_NAMES = ("lenet", "resnet18")  # MODELS' keys (checked below), for the parser, which runs before torch loads


def parse_args(argv=None):
    """The command line, checked before torch is imported: a bad flag or --help answers at once,
    not after the 3 s torch takes to load."""
    p = argparse.ArgumentParser(description="The book's ResNet-18 in PyTorch (CPU, eager or torch.compile); "
                                            "prints one line (gluonperf's wire).")
    p.add_argument("--model", choices=MODEL_NAMES, default="resnet18", help="(default: %(default)s)")
    p.add_argument("--batch-size", type=int, default=64, help="batch size (default: %(default)s)")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default: %(default)s)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first (default: %(default)s)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="bfloat16: mixed precision with torch.autocast (default: %(default)s)")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile the model (inductor); the warm-up steps compile it, so --warmup must be >= 1")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format for the model and batches")
    p.add_argument("--serve", action="store_true",
                   help="after warm-up, answer each request on stdin ({\"steps\": N}) with one line")
    args = p.parse_args(argv)
    if args.batch_size < 1 or args.steps < 1 or args.warmup < 0:
        p.error("--batch-size and --steps must be >= 1, --warmup >= 0")
    if args.compile and args.warmup < 1:
        p.error("--compile needs --warmup 1 or more: the first step compiles the model")
    return args


ARGS = parse_args() if __name__ == "__main__" else None

# PyTorch writes under $TMPDIR even for an eager run (TorchInductor's cache, and with --compile
# its precompiled headers: torchinductor_<user>), and nothing of a run may stay in the temporary
# directory: this process works in a folder of its own there, removed at its exit (one killed
# by train_throughput leaves it in that run's folder, which the run removes).
OWN_TMP = tempfile.mkdtemp(prefix="gluonperf-torch-")
os.environ["TMPDIR"] = OWN_TMP
tempfile.tempdir = None
atexit.register(shutil.rmtree, OWN_TMP, True)

# gluonperf's wire (runtime/wire.py: how a process gluonperf starts answers it), loaded by its path:
# this venv has no gluonperf, and the file needs only the standard library
_WIRE = importlib.util.spec_from_file_location("gluonperf_wire", os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gluonperf", "runtime", "wire.py"))
wire = importlib.util.module_from_spec(_WIRE)
_WIRE.loader.exec_module(wire)

import torch  # noqa: E402
from torch import nn  # noqa: E402


class Residual(nn.Module):
    """The book's residual block: two 3x3 convolutions with batch norm, 1x1 shortcut when needed."""

    def __init__(self, cin, cout, use_1x1conv=False, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, stride=stride)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv3 = nn.Conv2d(cin, cout, 1, stride=stride) if use_1x1conv else None
        self.bn1, self.bn2 = nn.BatchNorm2d(cout), nn.BatchNorm2d(cout)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.conv3(x) if self.conv3 is not None else x))


def resnet_block(cin, cout, num_residuals, first_block=False):
    layers = []
    for i in range(num_residuals):
        if i == 0 and not first_block:
            layers.append(Residual(cin, cout, use_1x1conv=True, stride=2))
        else:
            layers.append(Residual(cout, cout))
    return nn.Sequential(*layers)


def resnet18(num_classes=10):
    """Layer for layer the network of gluonperf.training.models.resnet18."""
    return nn.Sequential(
        nn.Conv2d(1, 64, 3, stride=1, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        resnet_block(64, 64, 2, first_block=True), resnet_block(64, 128, 2),
        resnet_block(128, 256, 2), resnet_block(256, 512, 2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, num_classes))


def lenet(num_classes=10):
    """Layer for layer the network of gluonperf.training.models.lenet (the chapter's from-scratch LeNet)."""
    return nn.Sequential(
        nn.Conv2d(1, 20, 3), nn.ReLU(), nn.AvgPool2d(2, 2), nn.Conv2d(20, 50, 5), nn.ReLU(), nn.AvgPool2d(2, 2),
        nn.Flatten(), nn.Linear(50 * 4 * 4, 128), nn.ReLU(), nn.Linear(128, num_classes))


MODELS = {"resnet18": resnet18, "lenet": lenet}
assert tuple(sorted(MODELS)) == MODEL_NAMES


def batches(batch_size, count, seed=0):
    """`count` batches of random 1x28x28 images in [0, 1] with labels of 10 classes, in
    memory (the shapes of gluonperf's synthetic set; MXNet is not loaded here, as it
    would change the OpenMP settings PyTorch runs with)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(batch_size, 1, 28, 28, generator=g), torch.randint(0, 10, (batch_size,), generator=g))
            for _ in range(count)]


def trainer(batch_size, seed=0, lr=0.1, dtype="float32", channels_last=False, model="resnet18", compile=False):
    """step(n) -> seconds for n training steps. dtype bfloat16: mixed precision with
    torch.autocast (what PyTorch's CPU tutorials use; weights and optimizer stay float32);
    channels_last: the NHWC memory format Intel recommends for it. compile: the model through
    torch.compile (TorchInductor, C++ kernels built with the system's compiler; forward and
    backward compiled, the optimizer step eager), compiled on the first step."""
    torch.manual_seed(seed)
    net = MODELS[model](10)
    net.train()
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)
    model_fn = torch.compile(net, backend="inductor") if compile else net
    opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    data = [(x.to(memory_format=fmt), y) for x, y in batches(batch_size, 8, seed)]
    autocast = dtype == "bfloat16"

    def steps(n):
        start = time.perf_counter()
        for i in range(n):
            x, y = data[i % len(data)]
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                loss = loss_fn(model_fn(x), y)
            loss.backward()
            opt.step()
        return time.perf_counter() - start  # eager CPU execution: done when step() returns
    return steps


def main(args=None):
    """Run with `args` (parse_args'), by default the command line's."""
    args = args or parse_args()
    steps = trainer(args.batch_size, dtype=args.dtype, channels_last=args.channels_last, model=args.model,
                    compile=args.compile)
    steps(args.warmup)
    if args.serve:
        def timed(settings):
            n = int(settings["steps"])
            seconds = steps(n)
            return {"images_per_s": args.batch_size * n / seconds, "seconds": seconds, "images": args.batch_size * n}
        wire.serve(timed, {"ready": True, "threads": torch.get_num_threads(), "compiled": args.compile})
        return
    seconds = steps(args.steps)
    print(wire.say({"images_per_s": args.batch_size * args.steps / seconds, "seconds": seconds,
                    "threads": torch.get_num_threads(), "torch": torch.__version__,
                    "model": args.model, "compiled": args.compile, "dtype": args.dtype}))


if __name__ == "__main__":
    main(ARGS)

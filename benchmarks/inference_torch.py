"""PyTorch's side of benchmarks/inference.py: one instance of gluonperf's system under test that
serves ResNet-18 or ResNet-50 with PyTorch instead of MXNet.

The networks are torchvision's (`torchvision.models.resnet18` / `resnet50`: 7x7 stride-2 stem,
max-pool, basic or bottleneck blocks with the stride on the 3x3 convolution, 1x1 projection
shortcuts, 1000 classes), written here layer for layer in plain PyTorch because torchvision
does not import beside torch 2.13 in the benchmarks' venv; layer for layer GluonCV's
`resnet18_v1b` / `resnet50_v1b`, which the MXNet side serves. Random weights (seeded), as on
the MXNet side: speed does not depend on them.

Benchmark-only, in a venv of its own (nothing in the package imports it; MXNet is never
loaded here):

    python3 -m venv .venv-torch && .venv-torch/bin/pip install torch==2.13.0 numpy

benchmarks/inference.py starts it through `gluonperf.inference.instances.Pool` as
`.venv-torch/bin/python benchmarks/inference_torch.py '<json config>'`; it pins itself to its
cores before torch loads, maps the shared-memory sample library and speaks the protocol of
`gluonperf.workers.serving` (`ready`; `w CALLS SIZE ...` -> `t SIZE:SECONDS ...`; `c ID
INDEX ...` -> `d ID` once the batch's outputs exist; `s` -> `s SIZE:CALLS,... COLD,...`; `q`),
so the same LoadGen, dispatch and
clock serve both engines. The systems (config `kind`):

- `eager`: `model.eval()` under `torch.inference_mode()`, float32: what a script does.
- `compile`: `torch.compile(model, dynamic=False)` (TorchInductor) with inductor's `freezing`
  on (constant weights folded, oneDNN's prepacked convolutions: PyTorch's advice for CPU
  inference), compiled during the warm-up, one kernel set per batch size.
- `int8`: PyTorch's x86 post-training quantization, calibrated on the same samples as MXNet's
  INT8: PT2E (`torch.export`, `prepare_pt2e` with `X86InductorQuantizer`, `convert_pt2e`,
  from torchao or, in older PyTorch, `torch.ao.quantization`), lowered by `torch.compile` with
  freezing, as PyTorch's "PT2E quantization with X86 backend through Inductor" tutorial does;
  where PT2E is not importable, FX graph mode (`torch.ao.quantization.quantize_fx`, qconfig
  mapping "x86": fbgemm and oneDNN kernels, run eagerly). `--describe` says which.

A compiled system pads a batch smaller than a size it was warmed at (offline's last batch)
with copies of its first sample, so that no call compiles while LoadGen keeps the clock.
"""
import collections
import importlib.util
import json
import os
import statistics
import sys
import time

# gluonperf's wire (runtime/wire.py: how a process gluonperf starts answers it), loaded by its path:
# this venv has no gluonperf, and the file needs only the standard library
_WIRE = importlib.util.spec_from_file_location("gluonperf_wire", os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gluonperf", "runtime", "wire.py"))
wire = importlib.util.module_from_spec(_WIRE)
_WIRE.loader.exec_module(wire)

CALIBRATION_BATCH = 32


def build(name, classes=1000):
    """torchvision's ResNet-18 or ResNet-50, layer for layer, seeded random weights."""
    import torch
    from torch import nn

    class Basic(nn.Module):
        expansion = 1

        def __init__(self, cin, planes, stride, down):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
            self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False), nn.BatchNorm2d(planes)
            # a ReLU module per use: PT2E's X86 quantizer matches patterns by module, and one ReLU called
            # twice is one partition with two outputs, which it refuses ('more than one output node')
            self.relu1, self.relu2, self.down = nn.ReLU(), nn.ReLU(), down

        def forward(self, x):
            y = self.relu1(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return self.relu2(y + (self.down(x) if self.down is not None else x))

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, cin, planes, stride, down):
            super().__init__()
            self.conv1, self.bn1 = nn.Conv2d(cin, planes, 1, bias=False), nn.BatchNorm2d(planes)
            self.conv2, self.bn2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False), nn.BatchNorm2d(planes)
            self.conv3, self.bn3 = nn.Conv2d(planes, planes * 4, 1, bias=False), nn.BatchNorm2d(planes * 4)
            self.relu1, self.relu2, self.relu3, self.down = nn.ReLU(), nn.ReLU(), nn.ReLU(), down

        def forward(self, x):
            y = self.relu1(self.bn1(self.conv1(x)))
            y = self.relu2(self.bn2(self.conv2(y)))
            y = self.bn3(self.conv3(y))
            return self.relu3(y + (self.down(x) if self.down is not None else x))

    block, counts = {"resnet18": (Basic, (2, 2, 2, 2)), "resnet50": (Bottleneck, (3, 4, 6, 3))}[name]
    layers, cin = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)], 64
    for planes, count, stride in zip((64, 128, 256, 512), counts, (1, 2, 2, 2)):
        for i in range(count):
            s = stride if i == 0 else 1
            down = None
            if s != 1 or cin != planes * block.expansion:
                down = nn.Sequential(nn.Conv2d(cin, planes * block.expansion, 1, s, bias=False),
                                     nn.BatchNorm2d(planes * block.expansion))
            layers.append(block(cin, planes, s, down))
            cin = planes * block.expansion
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    torch.manual_seed(0)
    net = nn.Sequential(*layers)
    for m in net.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
    return net.eval()


def _compiled(model):
    import torch
    import torch._inductor.config as inductor
    inductor.freezing = True
    return torch.compile(model, dynamic=False)


def _pt2e():
    """(prepare_pt2e, convert_pt2e, the X86 inductor quantizer module, where from), or None."""
    try:
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq
        return prepare_pt2e, convert_pt2e, xiq, "torchao"
    except ImportError:
        pass
    try:
        from torch.ao.quantization.quantize_pt2e import convert_pt2e, prepare_pt2e
        import torch.ao.quantization.quantizer.x86_inductor_quantizer as xiq
        return prepare_pt2e, convert_pt2e, xiq, "torch.ao.quantization"
    except ImportError:
        return None


def quantized(model, calibration):
    """(forward, how) of PyTorch's x86 INT8 of `model`, calibrated on `calibration` (n, C, H, W)."""
    import torch
    batches = [torch.from_numpy(calibration[i:i + CALIBRATION_BATCH])
               for i in range(0, len(calibration), CALIBRATION_BATCH)]
    pt2e = _pt2e()
    if pt2e is not None:
        prepare_pt2e, convert_pt2e, xiq, where = pt2e
        example = (batches[0][:2],)
        batch = torch.export.Dim("batch", min=1, max=4096)
        graph = torch.export.export(model, example, dynamic_shapes=({0: batch},)).module()
        quantizer = xiq.X86InductorQuantizer()
        quantizer.set_global(xiq.get_default_x86_inductor_quantization_config())
        prepared = prepare_pt2e(graph, quantizer)
        with torch.no_grad():
            for x in batches:
                prepared(x)
        converted = convert_pt2e(prepared)
        return _compiled(converted), "PT2E X86InductorQuantizer (%s), torch.compile with freezing" % where
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
    torch.backends.quantized.engine = "x86"
    prepared = prepare_fx(model, get_default_qconfig_mapping("x86"), (batches[0],))
    with torch.no_grad():
        for x in batches:
            prepared(x)
    return convert_fx(prepared), "FX graph mode, qconfig mapping x86 (eager quantized kernels)"


def system(config):
    """(forward, what it is, whether it pads to warmed sizes) of the config's model and kind."""
    import numpy as np
    model = build(config["model"])
    kind = config["kind"]
    if kind == "eager":
        return model, "eager float32", False
    if kind == "compile":
        return _compiled(model), "torch.compile (inductor, freezing, dynamic=False)", True
    if kind == "int8":
        forward, how = quantized(model, np.load(config["calibration"]))
        return forward, "INT8: " + how, how.startswith("PT2E")
    raise ValueError("unknown kind %r: eager, compile or int8" % kind)


def describe():
    """What this PyTorch is and does, for the benchmark's records: one JSON line (numpy, which
    the samples come through, must import too)."""
    import numpy  # noqa: F401
    import torch
    pt2e = _pt2e()
    return {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "int8": ("PT2E X86InductorQuantizer (%s), torch.compile with freezing" % pt2e[3]) if pt2e else
            "FX graph mode, qconfig mapping x86 (eager quantized kernels)"}


class Library:
    """The parent's shared-memory sample library, mapped (gluonperf.inference.samples, without
    gluonperf: its resource tracker kept out, as there)."""

    def __init__(self, spec):
        import numpy as np
        from multiprocessing import resource_tracker, shared_memory
        register = resource_tracker.register
        resource_tracker.register = lambda *args, **kwargs: None
        try:
            self.shm = shared_memory.SharedMemory(name=spec["name"])
        finally:
            resource_tracker.register = register
        self.array = np.ndarray(tuple(spec["shape"]), np.dtype(spec["dtype"]), buffer=self.shm.buf)

    def take(self, indices):
        return self.array[[int(i) % len(self.array) for i in indices]]


def serve(config, stdin, stdout):
    """Answer the parent's lines until `q` or the end of input (gluonperf.workers.serving's)."""
    import numpy as np
    import torch
    forward, _, pads = system(config)
    library = Library(config["samples"])
    warmed, served = [], collections.Counter()

    def call(batch):
        n = len(batch)
        size = min((s for s in warmed if s >= n), default=n) if pads else n
        if size > n:
            batch = np.concatenate([batch, np.repeat(batch[:1], size - n, axis=0)])
        return forward(torch.from_numpy(batch))[:n]  # eager CPU tensors: computed when returned
    with torch.inference_mode():
        stdout.write(b"ready\n")
        stdout.flush()
        for line in stdin:
            words = line.split()
            if not words or words[0] == b"q":
                break
            if words[0] == b"c":
                call(library.take(words[2:]))
                served[len(words) - 2] += 1
                stdout.write(b"d " + words[1] + b"\n")
            elif words[0] == b"s":
                cold = sorted(set(served) - set(warmed))
                stdout.write(("s %s %s\n" % (",".join("%d:%d" % kv for kv in sorted(served.items())) or "-",
                                             ",".join(map(str, cold)) or "-")).encode())
                served.clear()
            elif words[0] == b"w":
                times = {}
                for size in (int(w) for w in words[2:]):
                    warmed.append(size)
                    batch = library.take(range(size))
                    spent = []
                    for _ in range(int(words[1])):
                        start = time.perf_counter()
                        call(batch)
                        spent.append(time.perf_counter() - start)
                    times[size] = statistics.median(spent[1:] or spent)
                stdout.write(("t %s\n" % " ".join("%d:%.6g" % kv for kv in times.items())).encode())
            else:
                raise ValueError("unknown request %r" % line[:40])
            stdout.flush()
    library.shm.close()


def main(argument):
    config = json.loads(argument)
    # gluonperf.inference.instances.Pool sends the system's own fields (TorchSystem.to_text) as "rung"
    config.update(json.loads(config.pop("rung")))
    if config.get("cache"):  # inductor's compiled kernels go to the benchmark's folder, removed after it
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = config["cache"]
    if config.get("cores"):
        os.sched_setaffinity(0, config["cores"])  # before torch loads: its OpenMP threads inherit them
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # a stray print must not break the protocol
    try:
        serve(config, sys.stdin.buffer, protocol)
    except Exception as e:  # noqa: BLE001 (one line for the parent, which reports it)
        text = " ".join(str(e).split()) or type(e).__name__
        sys.stderr.write("instance %s: %s: %s\n" % (config.get("instance"), type(e).__name__, text[:300]))
        sys.stderr.flush()
        sys.exit(1)


if __name__ == "__main__":
    if sys.argv[1:] == ["--describe"]:
        print(wire.say(describe()))
        sys.exit(0)
    if len(sys.argv) != 2 or not sys.argv[1].startswith("{"):
        print("benchmarks/inference_torch.py: error: this is PyTorch's instance of benchmarks/inference.py; run that "
              "(see its --help)", file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])

"""gluonperf's precision rungs against PyTorch, served under the same MLPerf scenarios, side by
side in one run (issue 61, item 8).

    python benchmarks/inference.py --json benchmarks/results/inference_<machine>_<date>.jsonl

For ResNet-18 and ResNet-50 at 3x224x224 (random weights, seeded), single-stream (queries of
one sample: LoadGen's p90 latency) and offline (every sample at once, in batches of
--offline-batch: samples/s), these systems:

- MXNet, gluonperf's ladder (`gluonperf.inference.ladder.prepare`): `static` (hybridized,
  static_alloc and static_shape), `fused` (oneDNN's backend), `bf16` where the CPU has it,
  `int8` (`quantize_net_v2`, naive calibration on 64 samples), and the same graph exported to
  ONNX and served by ONNX Runtime and OpenVINO (`ort-fp32`, `ort-int8`, `ov-fp32`, `ov-int8`,
  `ov-bf16` where the CPU has it: `gluonperf.inference.runtimes`), each served by gluonperf's
  own instance (`gluonperf.workers.serving`). The network is GluonCV's `resnet18_v1b` /
  `resnet50_v1b`: torchvision's layout (the stride on the 3x3 convolution).
- PyTorch (benchmarks/inference_torch.py, in .venv-torch): eager, `torch.compile` (inductor,
  freezing), and its own x86 INT8 (PT2E with the X86 inductor quantizer, calibrated on the
  same 64 samples), the same network written layer for layer.

Every system is one instance over all the cores (layout 1xN, pinned to them), fed the same
held-out samples from one shared-memory library by one LoadGen in this process, through
gluonperf's own system under test (`gluonperf.inference.serve.Session`): the same load
generator, dispatch and clock for both engines, so what differs is the engine. Every round
runs each scenario on every system once, the systems' order rotating from round to round
(the host's drift hits all alike); each MXNet rung's figure is set against each PyTorch
system's of the same round (per-round ratios: PyTorch's p90 over MXNet's, MXNet's samples/s
over PyTorch's; above 1, MXNet is faster), with the geometric mean's 95% t interval over the
rounds (`gluonperf.measure.stats.ratio_interval`) and a verdict. The best rung (gluonperf's
best: the highest samples/s or lowest p90, median over rounds) of each model and scenario is
marked `best`. Records of bench `inference` (infer's fields: precision, p50/p90/p99,
samples_per_s, loadgen_valid, ratio to static) plus `vs_<system>` with `_ci_low`, `_ci_high`,
`_n` and `vs_<system>_verdict`; the environment with them. LoadGen's logs are kept beside
--json (PATH-loadgen/MODEL/...). docs/benchmarks.md says how PyTorch's venv is made; without
it, the PyTorch rows are left out with a note.
"""
import argparse
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import suite_stats  # noqa: E402  (benchmarks/, this script's folder)
from gluonperf.cli import common as cli  # noqa: E402

PROG = "benchmarks/inference.py"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "benchmarks", "inference_torch.py")
TORCH_PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")
MODELS = {"resnet18": "resnet18_v1b", "resnet50": "resnet50_v1b"}   # PyTorch's name: GluonCV's
TORCH = (("pytorch eager", "eager"), ("pytorch compile", "compile"), ("pytorch int8", "int8"))
SCENARIOS = ("single-stream", "offline")
CALIBRATION = 64
LIBRARY = 256
WARM_TIMEOUT = 1800.0  # s an instance may take to load and warm up: torch.compile builds its kernels then
QUICK = {"models": ["resnet18"], "image_size": 64, "rounds": 2, "duration": 0.05, "offline_batch": 8}


@dataclass(frozen=True)
class TorchSystem:
    """A PyTorch system as Session serves it: a rung with a name, no error, and its text."""
    name: str
    kind: str
    model: str
    input_shape: tuple
    calibration: str
    cache: str                          # inductor's cache folder (TORCHINDUCTOR_CACHE_DIR), in the run's own
    error: Optional[str] = None

    def to_text(self):
        import json
        return json.dumps(asdict(self))


def build_parser():
    from gluonperf.cli.units import duration_seconds
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=cli.comma_list(_model, "resnet18,resnet50"), default=list(MODELS),
                   help="of %s (default: both)" % ",".join(MODELS))
    p.add_argument("--rungs", default=None, metavar="RUNGS",
                   help="gluonperf's rungs, of static,fused,bf16,int8 and the runtimes' ort-fp32,ort-int8,ov-fp32,"
                        "ov-bf16,ov-int8 (default: every one this CPU and install have)")
    p.add_argument("--rounds", type=cli.positive_int, default=5, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--duration", type=duration_seconds, default=2.0, metavar="TIME",
                   help="the least a LoadGen run lasts (default: 2s), and at least the queries LoadGen's early "
                        "stopping needs")
    p.add_argument("--offline-batch", type=cli.positive_int, default=64, help="offline's batch per call "
                                                                               "(default: %(default)s)")
    p.add_argument("--image-size", type=cli.positive_int, default=224, help="S of the 3xSxS input (default: 224)")
    p.add_argument("--no-torch", dest="torch", action="store_false", help="leave PyTorch out (gluonperf's rungs only)")
    p.add_argument("--torch-python", metavar="PATH",
                   help="a Python with torch and numpy (default: $GLUONPERF_TORCH_PYTHON or .venv-torch/bin/python)")
    p.add_argument("--quick", action="store_true",
                   help="a check that it runs, not a measurement: ResNet-18 at 64x64, 2 rounds of 0.05 s runs, "
                        "offline batch 8")
    p.add_argument("--json", metavar="PATH", help="write the records as JSON lines, with the environment")
    return p


def _model(text):
    if text not in MODELS:
        raise argparse.ArgumentTypeError("unknown model %r; choose from %s" % (text, ",".join(MODELS)))
    return text


def rungs_of(args):
    """gluonperf's rungs to run: --rungs, or every graph rung this CPU has; UserError when one is
    unknown or none is left."""
    from gluonperf import UserError
    from gluonperf.inference import ladder
    graph = [r for r in ladder.RUNGS if r != "fp32"]
    asked = [r.strip() for r in args.rungs.split(",")] if args.rungs else graph
    bad = [r for r in asked if r not in graph]
    if bad or not asked:
        raise UserError("--rungs %s: unknown rung %s; choose from %s" % (args.rungs, ",".join(bad), ",".join(graph)))
    why = ladder.available(asked)
    if args.rungs is None:
        return [r for r in asked if why[r] is None]
    return asked


def torch_python(args):
    """The PyTorch interpreter and what it says of itself (inference_torch.py --describe), or
    (None, why not)."""
    from gluonperf.runtime import wire
    python = args.torch_python or os.environ.get("GLUONPERF_TORCH_PYTHON") or TORCH_PYTHON
    if not os.path.exists(python):
        return None, "no %s (docs/benchmarks.md: python3 -m venv .venv-torch && .venv-torch/bin/pip install " \
                     "torch==2.13.0 numpy)" % python
    p = subprocess.run([python, WORKER, "--describe"], capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        return None, "%s: %s" % (python, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
    return python, wire.answer(p.stdout, "%s --describe" % python)


def serve_model(args, name, rungs, python, about, log_dir, progress):
    """One model: gluonperf's rungs built, the PyTorch systems described, all served in rounds
    by one Session (kept in `measured` as it runs); its records (`against_torch`)."""
    import mxnet as mx
    import numpy as np
    from gluonperf.inference import calibration, ladder
    from gluonperf.inference.instances import Layout, core_groups
    from gluonperf.inference.loadgen import Minimums
    from gluonperf.inference.samples import SampleLibrary
    from gluonperf.inference.serve import Plan, Session
    from gluonperf.runtime import guard
    shape = (3, args.image_size, args.image_size)
    calib, held = calibration.split(calibration.load(None, shape, CALIBRATION + LIBRARY), CALIBRATION)
    with guard.temp_dir() as work:
        built = ladder.prepare(ladder.model_source(MODELS[name], input_shape=shape), rungs, mx.cpu(), work,
                               calibration=calib)
        systems = []
        if python:
            np.save(os.path.join(work, "calibration.npy"), calib.data)
            systems = [TorchSystem(label, kind, name, shape, os.path.join(work, "calibration.npy"),
                                   os.path.join(work, "torchinductor"))
                       for label, kind in TORCH]
        base = {"model": name, "mxnet_model": MODELS[name], "input_shape": list(shape), "ctx": "cpu(0)",
                "calibration_n": len(calib), "held_out_n": len(held),
                "rungs": dict({r.name: {"note": r.note, "build_s": r.build_s} for r in built if not r.error},
                              **{s.name: {"note": s.kind if s.kind != "int8" else "INT8: " + about["int8"],
                                          "torch": about["torch"]} for s in systems})}
        plan = Plan(rungs=built + systems, layouts=[Layout(1, len(core_groups()))], scenarios=SCENARIOS,
                    batch_sizes=(args.offline_batch,), rounds=args.rounds, minimums=Minimums(args.duration),
                    ctx="cpu", log_dir=os.path.join(log_dir, name), base=base,
                    commands={s.name: [python, WORKER] for s in systems}, ready_timeout_s=WARM_TIMEOUT)
        with SampleLibrary.create(held.data) as library:
            session = Session(plan, library, progress)
            measured[name] = (session, [r.name for r in built], [s.name for s in systems])
            session.run()
    return against_torch(*measured[name])


measured = {}  # model -> (its Session, gluonperf's rungs, PyTorch's systems): what a stopped run keeps


def vs_key(system):
    """'pytorch compile' -> 'vs_pytorch_compile'."""
    return "vs_" + system.replace(" ", "_")


def against_torch(session, rungs, systems):
    """The session's records, named by their model, each MXNet rung's set against each PyTorch
    system round by round (`vs_<system>` with its interval, n and verdict), the best rung of
    each scenario (the best median figure, of those LoadGen called valid in every round when
    any is) marked `best`."""
    from gluonperf.inference import rounds
    from gluonperf.records import Result
    records = [Result(r.bench, "%s %s" % (r.metrics.get("model"), r.name), r.metrics) for r in session.records()]
    layout = session.plan.layouts[0]
    for record in records:
        m = record.metrics
        if m.get("error") or m.get("precision") not in rungs or m.get("scenario") not in SCENARIOS:
            continue
        ours = session.runs.get((layout, m["precision"], m["scenario"], m["batch_size"]), [])
        for system in systems:
            theirs = session.runs.get((layout, system, m["scenario"], m["batch_size"]), [])
            ratios = rounds.round_ratios(m["scenario"], theirs, ours)
            m.update(suite_stats.ratio_fields(ratios, vs_key(system), record.name, system,
                                              prefix=vs_key(system) + "_"))
            m[vs_key(system) + "_rounds"] = ratios
    for scenario in SCENARIOS:
        figure = _figure(scenario)
        ours = [r for r in records if r.metrics.get("scenario") == scenario and r.metrics.get("precision") in rungs
                and r.metrics.get(figure) is not None]
        ours = [r for r in ours if r.metrics.get("loadgen_valid")] or ours  # of the valid ones, when any is
        if ours:
            pick = min if scenario == "single-stream" else max
            pick(ours, key=lambda r: r.metrics[figure]).metrics["best"] = True
    return records


def _figure(scenario):
    from gluonperf.inference.loadgen import FIGURE
    return FIGURE[scenario]


def readings(records):
    """One line per model and scenario: gluonperf's best rung against each PyTorch system."""
    from gluonperf.records import format_value
    lines = []
    for r in records:
        m = r.metrics
        if not m.get("best"):
            continue
        figure = _figure(m["scenario"])
        parts = []
        for label, _ in TORCH:
            key = vs_key(label)
            if m.get(key) is not None:
                parts.append("%s %.2fx (95%% CI %.2f-%.2f, %d rounds, %s)" % (
                    label, m[key], m[key + "_ci_low"], m[key + "_ci_high"], m[key + "_n"],
                    m.get(key + "_verdict", "-")))
        lines.append("%s %s: gluonperf's best, %s, %s %s%s" % (
            m["model"], m["scenario"], m["precision"], figure.replace("_per_s", "/s").replace("_s", ""),
            format_value(figure, m[figure]), "; against " + ", ".join(parts) if parts else ""))
    return lines


def main(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            if getattr(args, key) == p.get_default(key):
                setattr(args, key, value)
    cli.check_outputs(args)
    rungs = rungs_of(args)
    cli.guard_command(args, PROG, stall_timeout=0)
    python, about = torch_python(args) if args.torch else (None, "--no-torch")
    if python is None:
        cli.note("note: PyTorch is left out: %s" % about)
    else:
        cli.note("note: PyTorch %s, %d threads; its INT8: %s" % (about["torch"], about["threads"], about["int8"]))
    log_dir = (os.path.splitext(os.path.abspath(args.json))[0] + "-loadgen") if args.json else None
    systems = [label for label, _ in TORCH] if python else []
    total = len(args.models) * (len(rungs) + len(systems)) * len(SCENARIOS) * args.rounds
    with cli.progress_bar(total, "inference vs PyTorch") as bar, guard_temp(log_dir) as logs:
        with cli.keep_on_stop(lambda: [r for kept in measured.values() for r in against_torch(*kept)], args,
                              "inference vs PyTorch", ["name", "scenario", "p90_s", "samples_per_s"]):
            records = []
            for name in args.models:
                records += serve_model(args, name, rungs, python, about, logs, bar.update)
    cli.emit_sections(sections(records, systems, args.rounds), args, records=records)
    for line in readings(records):
        print(line)
    return 0


def sections(records, systems, rounds):
    """A table per model and scenario: each system's figure (median over the rounds) and each
    gluonperf rung against each PyTorch system."""
    vs = [c for s in systems for c in suite_stats.columns(vs_key(s))[:3]]
    out = []
    for model in dict.fromkeys(r.metrics.get("model") for r in records):
        for scenario in SCENARIOS:
            rows = [r for r in records if r.metrics.get("model") == model and r.metrics.get("scenario") == scenario]
            if rows:
                out.append(("%s %s: %s, median of %d interleaved rounds; vs_*: gluonperf's rung against that PyTorch "
                            "system, geometric mean of per-round ratios (95%% CI), above 1: gluonperf faster"
                            % (model, scenario, "p90 latency" if scenario == "single-stream" else "samples/s",
                               rounds), rows, ["name", _figure(scenario)] + vs + ["loadgen_valid"]))
        failed = [r for r in records if r.metrics.get("model") == model and r.metrics.get("error")]
        if failed:
            out.append(("%s: not run" % model, failed, ["name", "error"]))
    return out


def guard_temp(log_dir):
    """LoadGen's logs: beside --json (kept), else in a temporary folder."""
    import contextlib
    from gluonperf.runtime import guard
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        return contextlib.nullcontext(log_dir)
    return guard.temp_dir()


if __name__ == "__main__":
    cli.run(main, PROG)

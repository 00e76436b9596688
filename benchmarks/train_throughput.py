"""gluonperf's training command against the book's loop, side by side in one run.

    python benchmarks/train_throughput.py --batch-sizes 64,128 --rounds 3 --json results.json

For each batch size, in fresh processes, interleaved round by round:
  - `book loop`: benchmarks/book_loop.py, the chapter's concise ResNet-18 loop
    (imperative, one context, DataLoader with the book's 4 workers, default
    environment) - the yardstick, ratio 1.0;
  - `gluonperf.train`: `python -m gluonperf.train --dataset synthetic` as a user
    runs it, with its defaults;
  - `gluonperf.train OMP_NUM_THREADS=<cores> --workers 0`: the same with the
    levers docs/levers.md found (one OpenMP thread per core, batches loaded
    in the main thread; --hybridize static is already train's default);
  - `gluonperf.train --ctx cpu0,cpu1 --kvstore device` and `... --kvstore flat`: the
    same global batch split over two CPU contexts on the same cores, with train's
    defaults for two contexts (one OpenMP thread each, MXNET_CPU_TEMP_COPY=64), the
    gradients summed by MXNet's kvstore or by gluonperf.training.flat: data parallelism's own cost.
  - `ceiling`: benchmarks/ceiling_probe.py, the peak FLOP/s `gluonperf.profile` measures
    over the model's training FLOPs per image: the most images/s any loop could reach
    (float32 runs only).
Every round runs the book loop and each candidate once, in a rotating order
(gluonperf.tuning.search), and a run's ratio is to the book loop's run of its round.
Until gluonperf.train exists in this checkout, gluonperf.workers.steprate (the same loop
on in-memory batches) stands in for it, and the records say so (`runner`).
Each record holds images/s (median over rounds) and its ratio to the book's loop: the
geometric mean of the per-round ratios (kept in round_ratios) with its 95% confidence
interval and n (ratio_ci_low, ratio_ci_high, ratio_n) and a verdict (faster / slower /
same / inconclusive, gluonperf.measure.stats.verdict); with PyTorch also vs_pytorch and
vs_torch_compile: per round (its ratio) / (the yardstick's ratio in the same round), with
their intervals and verdicts (vs_pytorch_verdict, ...); of_ceiling likewise against the
ceiling's ratio in the same round: the run's share of what the machine could do at that
moment, not of a ceiling measured at another (a shared machine's speed drifts).
PyTorch runs eager and compiled (torch.compile, inductor; each run compiles first, and
only the steps after warm-up are timed). On a CPU with bfloat16 (AMX or AVX512-BF16),
gluonperf.train --dtype bfloat16 and PyTorch's bfloat16 autocast run beside float32;
elsewhere one note says why not. docs/suites.md says how to read the columns.
The JSON file also holds the environment, so `python -m gluonperf.compare OLD NEW` can
compare two such files.
"""
import argparse
import contextlib
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import suite_stats  # noqa: E402  (benchmarks/, this script's folder)
from gluonperf.runtime.threads import load_warning, physical_cores  # noqa: E402
from gluonperf.cli import common as cli  # noqa: E402
from gluonperf.runtime import guard  # noqa: E402
from gluonperf.training.runners import STEPRATE, TRAIN, CommandRunner as Runner, default_runner  # noqa: E402
from gluonperf.tuning.candidates import Candidate  # noqa: E402
from gluonperf.tuning.schedule import Sweeps  # noqa: E402
from gluonperf.tuning.search import Observers, sweep  # noqa: E402

PROG = "benchmarks/train_throughput.py"
BOOK = Runner("benchmarks/book_loop.py", ("--warmup", "2"), serves=True)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# PyTorch lives in a venv of its own (GluonCV 0.11 refuses to import beside torch 2.x):
#   python3 -m venv .venv-torch && .venv-torch/bin/pip install torch==2.13.0
TORCH_PYTHON = os.path.join(ROOT, ".venv-torch", "bin", "python")
CEILING = Runner("benchmarks/ceiling_probe.py", (), steps_flag=None)
CEILING_NAME = "ceiling (peak FLOP/s over FLOPs per image)"
TORCH_EAGER, TORCH_COMPILE, BF16 = "pytorch eager", "pytorch torch.compile", " bfloat16 autocast"
# each run is set against these, round by round: (the yardstick's name in float32 / bfloat16 runs, key)
YARDSTICKS = ((TORCH_EAGER, "vs_pytorch"), (TORCH_COMPILE, "vs_torch_compile"))


def torch_runner(python=None):
    """The PyTorch yardstick's Runner, or None when its interpreter has no torch."""
    import subprocess
    python = python or os.environ.get("GLUONPERF_TORCH_PYTHON") or TORCH_PYTHON
    try:
        ok = subprocess.run([python, "-c", "import torch"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    return Runner("benchmarks/torch_loop.py", ("--warmup", "2"), serves=True, python=python) if ok else None


@contextlib.contextmanager
def own_temporary_folder():
    """The run's children write in a temporary folder of the run's (TMPDIR), removed at its end,
    on a signal and on a stall (guard.temp_dir: a stopped run exits through os._exit): the PyTorch
    yardstick removes what PyTorch writes there (torchinductor_<user>, even for an eager run) when
    it exits, and a run of it killed on a timeout leaves it here."""
    with guard.temp_dir(prefix="gluonperf-throughput-") as folder, mock.patch.dict(os.environ, TMPDIR=folder):
        yield  # the runs inherit TMPDIR; the user's own comes back after


def torch_models():
    """The models benchmarks/torch_loop.py has, layer for layer gluonperf's."""
    return ("resnet18", "lenet")


def no_bf16_reason():
    """Why this CPU gets no bfloat16 rows (one phrase), or None where it has them: gluonperf's
    --dtype bfloat16 needs oneDNN's AVX-512 kernels (precision.why_no_bf16), and bfloat16 pays
    only with AMX or AVX512-BF16 (precision.has_bf16), for PyTorch's autocast as for MXNet's."""
    from gluonperf.runtime.precision import has_bf16, why_no_bf16
    return why_no_bf16() or (None if has_bf16() else "this CPU has no bfloat16 instructions (AMX or AVX512-BF16)")


def candidates(batch_size, runner, model="resnet18", torch=None, dtype="float32", ceiling=True, bf16=False):
    """The runs of one batch size. With `torch` (and a model torch_loop has): PyTorch eager
    and torch.compile (inductor), the yardsticks. `bf16` (float32 runs on a CPU with bfloat16):
    also gluonperf.train --dtype bfloat16 and PyTorch's bfloat16 autocast, eager and compiled,
    beside their float32. dtype bfloat16: gluonperf.train (float32 and --dtype bfloat16, one and
    two contexts) against PyTorch's bfloat16 autocast, eager (plain and channels_last) and
    compiled; the book loop stays the book's float32, and the (float32) ceiling is left out.
    `ceiling`: run the ceiling probe (CEILING_NAME) in float32."""
    cores = physical_cores()
    book = Candidate("book loop", (), (("batch_size", str(batch_size)), ("model", model)), BOOK)
    flags = (("batch_size", str(batch_size)), ("model", model))
    if runner is STEPRATE:
        flags += (("hybridize", "none"),)
    ours = Candidate(runner.module, (), flags, runner)
    tuned = ours.with_flags("", hybridize="static", workers=0).with_env(
        "%s OMP_NUM_THREADS=%d --workers 0" % (runner.module, cores), OMP_NUM_THREADS=cores)
    if runner is STEPRATE:  # steprate has no DataLoader by default
        tuned = ours.with_flags("", hybridize="static").with_env(
            "%s OMP_NUM_THREADS=%d" % (runner.module, cores), OMP_NUM_THREADS=cores)
    two = [ours.with_flags("%s --ctx cpu0,cpu1 --kvstore %s" % (runner.module, kv), ctx="cpu0,cpu1", kvstore=kv)
           for kv in ("device", "flat")]
    out = [book, ours, tuned] if runner is STEPRATE else [book, ours, tuned] + two
    torch_flags = (("batch_size", str(batch_size)),) + ((("model", model),) if model != "resnet18" else ())
    pytorch = Candidate(TORCH_EAGER, (), torch_flags, torch)
    compiled = pytorch.with_flags(TORCH_COMPILE, compile="")
    yardsticks = [pytorch, compiled]
    if dtype == "bfloat16":
        if runner is STEPRATE:
            raise ValueError("dtype bfloat16 needs gluonperf.train as the runner")
        bf16_run = ours.with_flags("%s --dtype bfloat16" % runner.module, dtype="bfloat16")
        out = [book, ours, bf16_run, bf16_run.with_flags("%s --dtype bfloat16 --ctx cpu0,cpu1" % runner.module,
                                                         ctx="cpu0,cpu1")]
        yardsticks = [pytorch.with_flags(TORCH_EAGER + BF16, dtype="bfloat16"),
                      compiled.with_flags(TORCH_COMPILE + BF16, dtype="bfloat16")]
        if model == "resnet18" and torch is not None:
            out.append(yardsticks[0].with_flags(TORCH_EAGER + BF16 + " channels_last", channels_last=""))
    elif bf16 and runner is not STEPRATE:
        out.append(ours.with_flags("%s --dtype bfloat16" % runner.module, dtype="bfloat16"))
        if model in torch_models() and torch is not None:
            out += [y.with_flags(y.name + BF16, dtype="bfloat16") for y in yardsticks]
    if ceiling and dtype == "float32":
        out.append(Candidate(CEILING_NAME, (), (("model", model),), CEILING))
    if model in torch_models() and torch is not None:
        out += yardsticks
    return out


def against(results, yardstick, key="vs_pytorch", verdict=True):
    """Set every result against the one named `yardstick`, round by round: `key` (vs_pytorch)
    is the geometric mean over rounds of (its ratio to the book loop) / (the yardstick's, the
    same round), with its 95% interval and n (suite_stats.ratio_fields); rounds where either
    run failed are left out. `verdict`: each other result also gets `key`_verdict,
    `key`_verdict_text (faster / slower / same / inconclusive against the yardstick)."""
    base = next((r.metrics.get("round_ratios") for r in results if r.name == yardstick), None)
    if base is None:
        raise ValueError("no result named %r with round_ratios" % yardstick)
    for r in results:
        mine = r.metrics.get("round_ratios") or []
        q = [a / b if a and b else None for a, b in zip(mine, base)]
        suite_stats.replace(r.metrics, key, suite_stats.ratio_fields(
            q, key, r.name, yardstick if verdict else None, prefix=key + "_"))
    return results


def run(batch_sizes, rounds, steps, runner=None, progress=None, model="resnet18", torch=None, dtype="float32",
         sweeps=None, ceiling=True, bf16=False, compile=True):
    """Every batch size's sweep; `sweeps` (a schedule.Sweeps) keeps what has finished for a stopped run.
    Each result's ratio to the book loop comes with its interval and verdict from schedule.summarize
    (at a level corrected for the runs compared); its ratio to each yardstick that ran (PyTorch
    eager, torch.compile; the ceiling without a verdict) gets a 95% interval here (`against`)."""
    runner = runner or default_runner()
    sweeps = sweeps or Sweeps()
    out = []
    for b in batch_sizes:
        cands = candidates(b, runner, model, torch, dtype, ceiling, bf16)
        if not compile:
            cands = [c for c in cands if not c.name.startswith(TORCH_COMPILE)]
        modules = {c.name: c.runner.module for c in cands}
        suffix = BF16 if dtype == "bfloat16" else ""
        yardsticks = [(name + suffix, key, True) for name, key in YARDSTICKS
                      if any(c.name == name + suffix for c in cands)]
        yardsticks += [(CEILING_NAME, "of_ceiling", False)] if any(c.name == CEILING_NAME for c in cands) else []

        def tidy(results, b=b, yardsticks=yardsticks, modules=modules):
            # a stopped sweep may not have run a yardstick yet
            for name, key, judge in yardsticks:
                if any(r.name == name and any(r.metrics.get("round_ratios") or ()) for r in results):
                    against(results, name, key, judge)
            for r in results:
                r.metrics.update(batch_size=b, runner=modules[r.name], model=model)
        sweeps.tidy = tidy
        out.extend(sweep(cands, runner, steps, rounds, lever="train_throughput b%d" % b,
                         observers=Observers(progress=progress, log=lambda m: print(m, file=sys.stderr, flush=True),
                                             sweeps=sweeps)))
    return out


def verdicts(results):
    """The lines printed after the table: gluonperf's runs against each yardstick, with the
    interval, n and verdict (the yardsticks and the book loop judged only against the book loop)."""
    lines = []
    for r in results:
        if r.metrics.get("runner") in (CEILING.module,):
            continue
        ours = r.metrics.get("runner", "").startswith("gluonperf")
        m = r.metrics
        if m.get("verdict_text"):  # schedule.summarize's, against the sweep's baseline
            lines.append("b%s %s vs book loop: %s" % (m.get("batch_size"), r.name, m["verdict_text"]))
        for key in ("vs_pytorch_", "vs_torch_compile_"):
            if ours and m.get(key + "verdict_text"):
                lines.append("b%s %s" % (m.get("batch_size"), m[key + "verdict_text"]))
    return lines


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="resnet18", help="model for every runner (default: %(default)s)")
    p.add_argument("--batch-sizes", type=cli.positive_int_list, default=[64, 128],
                   help="comma-separated (default: 64,128)")
    p.add_argument("--steps", type=cli.positive_int, default=8, help="timed steps per run (default: %(default)s)")
    p.add_argument("--rounds", type=cli.positive_int, default=3, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--runner", choices=("auto", "train", "steprate"), default="auto",
                   help="what stands for gluonperf (default: gluonperf.train when it exists)")
    p.add_argument("--torch-python", metavar="PATH",
                   help="a Python with torch for the PyTorch yardstick (default: $GLUONPERF_TORCH_PYTHON or "
                        ".venv-torch/bin/python)")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32",
                   help="bfloat16: gluonperf.train --dtype bfloat16 (and float32) against PyTorch's bfloat16 "
                        "autocast (default: %(default)s)")
    p.add_argument("--no-compile", dest="compile", action="store_false",
                   help="leave out the torch.compile yardstick (each of its runs compiles the model first)")
    p.add_argument("--no-ceiling", dest="ceiling", action="store_false",
                   help="leave out the ceiling probe (benchmarks/ceiling_probe.py) and the of_ceiling column")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON lines, with the environment")
    return p


def main(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    cli.check_outputs(args)  # before the model's check below loads MXNet: refused at once
    if args.dtype == "bfloat16" and args.runner == "steprate":
        p.error("--dtype bfloat16 needs --runner train")
    if args.dtype == "bfloat16":
        from gluonperf.runtime.precision import check
        try:  # refused before any run starts, not by every gluonperf.train run
            check(args.dtype, [])
        except ValueError as e:
            p.error("--%s" % e)
    from gluonperf.training.models import list_models
    models = list_models()
    if args.model not in models:
        p.error("unknown model %r; python -m gluonperf.train --list-models shows the %d names --model accepts"
                % (args.model, len(models)))
    cli.guard_command(args, PROG, stall_timeout=0)  # each run has its own timeout; stop children on signals
    with own_temporary_folder():
        suite(args)


def suite(args):
    """The suite's runs, their table and verdicts (main's arguments checked)."""
    runner = {"auto": None, "train": TRAIN, "steprate": STEPRATE}[args.runner]
    has_torch_model = args.model in torch_models()
    torch = torch_runner(args.torch_python) if has_torch_model else None
    if has_torch_model and torch is None:
        print("note: no PyTorch at %s, so the PyTorch yardsticks (eager, torch.compile) are left out (python3 -m "
              "venv .venv-torch && .venv-torch/bin/pip install torch==2.13.0)"
              % (args.torch_python or TORCH_PYTHON), file=sys.stderr)
    bf16 = False
    if args.dtype == "float32" and runner is not STEPRATE:
        why = no_bf16_reason()
        bf16 = why is None
        if why:
            print("note: no bfloat16 rows (gluonperf.train --dtype bfloat16, PyTorch's bfloat16 autocast): %s"
                  % why, file=sys.stderr)
    warning = load_warning()
    if warning:
        print("note: " + warning, file=sys.stderr)
    title = ("training throughput vs the book's loop (%d interleaved rounds; images/s: median; ratio: geometric "
             "mean of the per-round ratios with its CI, 95%% corrected for the runs compared (ratio_level), and n; "
             "vs_*: 95%% CI)" % args.rounds)
    columns = ["batch_size", "name", "images_per_s"] + suite_stats.columns("ratio") + ["verdict"] + (
        suite_stats.columns("vs_pytorch") + (suite_stats.columns("vs_torch_compile") if args.compile else [])
        if torch is not None else []) + (
        suite_stats.columns("of_ceiling") if args.ceiling and args.dtype == "float32" else []) + ["error"]
    sweeps = Sweeps()
    with cli.keep_on_stop(sweeps.results, args, title, columns):  # a stopped suite keeps its finished runs
        results = run(args.batch_sizes, args.rounds, args.steps, runner, model=args.model, torch=torch,
                      dtype=args.dtype, sweeps=sweeps, ceiling=args.ceiling, bf16=bf16, compile=args.compile)
    cli.emit(results, args, (), title=title, columns=columns)
    lines = verdicts(results)
    if lines:
        print("\nverdicts (faster/slower: the CI excludes 1 and the ratio is past +-%g%%; docs/suites.md):"
              % (100 * suite_stats.stats.THRESHOLD))
        for line in lines:
            print("  " + line)


if __name__ == "__main__":
    cli.run(main, PROG)

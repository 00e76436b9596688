"""Each throughput lever against the book's loop, side by side in one run.

    python benchmarks/levers.py --batch-size 64 --rounds 3 --steps 6 --json levers64.json

Every candidate is its own process (environment variables are read when MXNet
starts), started and warmed up once, then asked to run --steps training steps
per round while the others wait idle (gluonperf.tuning.search.paired_sweep); rounds rotate the
order, and each candidate is scored by its images/s divided by the book loop's in the
same round: the geometric mean of those per-round ratios with its confidence interval
(95%, corrected for the candidates tried, in ratio_level) and a verdict against the book
loop (faster / slower / same / inconclusive; schedule.summarize, gluonperf.measure.stats), read as
docs/suites.md says. The baseline is benchmarks/book_loop.py (the chapter's concise
ResNet-18 loop, imperative, DataLoader with 4 workers, default environment); the others
are gluonperf.workers.steprate (the same loop on in-memory batches) with one or more levers
changed. See docs/levers.md for what they gave.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gluonperf.cli import common as cli  # noqa: E402
from gluonperf.training.levers import HUGE_PAGES  # noqa: E402
from gluonperf.training.runners import STEPRATE, CommandRunner as Runner  # noqa: E402
from gluonperf.tuning.candidates import Candidate  # noqa: E402
from gluonperf.tuning.schedule import Sweeps  # noqa: E402
from gluonperf.tuning.search import Observers, paired_sweep, spins_when_idle  # noqa: E402

JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"  # Debian's libjemalloc2
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"  # Debian's libtcmalloc-minimal4
# OpenMP runtimes that stand in for GNU libgomp (both export its GOMP_* symbols):
LLVM_OMP = "/usr/lib/x86_64-linux-gnu/libomp.so.5"  # Debian's libomp5-14
INTEL_OMP = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                         ".venv-torch", "lib", "libiomp5.so")  # pip install intel-openmp into the bench venv
BOOK = Runner("benchmarks/book_loop.py", ("--warmup", "2"), serves=True)


def candidates(batch_size, model="resnet18"):
    """{name: Candidate}: the book's loop, then one lever (or a stack of levers) at a time."""
    book = Candidate("book loop", (), (("batch_size", str(batch_size)),), BOOK)
    base = Candidate("", (), (("batch_size", str(batch_size)), ("model", model), ("hybridize", "none")), STEPRATE)
    omp2 = base.with_env("", OMP_NUM_THREADS=2)
    static2 = omp2.with_flags("", hybridize="static")
    out = [
        book,
        base.with_env("in-memory batches (no DataLoader)"),
        omp2.with_env("OMP_NUM_THREADS=2"),
        omp2.with_flags("OMP_NUM_THREADS=2 + hybridize", hybridize="hybrid"),
        static2.with_env("OMP_NUM_THREADS=2 + hybridize static"),
        base.with_flags("hybridize static (default threads)", hybridize="static"),
        static2.with_env("OMP_NUM_THREADS=2 + static + OMP_WAIT_POLICY=PASSIVE", OMP_WAIT_POLICY="PASSIVE"),
        static2.with_env("OMP_NUM_THREADS=2 + static + MXNET_SUBGRAPH_BACKEND=MKLDNN", MXNET_SUBGRAPH_BACKEND="MKLDNN"),
        static2.with_env("OMP_NUM_THREADS=2 + static + ThreadedEngine", MXNET_ENGINE_TYPE="ThreadedEngine"),
        static2.with_flags("cpu0,cpu1 + OMP_NUM_THREADS=1 + static", ctx="cpu0,cpu1")
               .with_env("cpu0,cpu1 + OMP_NUM_THREADS=1 + static", OMP_NUM_THREADS=1),
        static2.with_env("OMP_NUM_THREADS=2 + static + MXNET_MKLDNN_ENABLED=0", MXNET_MKLDNN_ENABLED=0),
        static2.with_flags("OMP_NUM_THREADS=2 + static + sync every step", per_step_sync=""),
        static2.with_flags("OMP_NUM_THREADS=2 + static + DataLoader 2 workers", loader_workers=2),
        static2.with_flags("OMP_NUM_THREADS=2 + static + DataLoader 0 workers", loader_workers=0),
        base.with_flags("", hybridize="static").with_env(
            "static + MXNET_CPU_WORKER_NTHREADS=2 (default threads)", MXNET_CPU_WORKER_NTHREADS=2),
        base.with_flags("", hybridize="static").with_env(
            "static + OMP_NUM_THREADS=1 + MXNET_CPU_WORKER_NTHREADS=2", MXNET_CPU_WORKER_NTHREADS=2, OMP_NUM_THREADS=1),
        base.with_flags("static + DataLoader 2 workers (default threads)", hybridize="static", loader_workers=2),
        base.with_flags("static + sync every step (default threads)", hybridize="static", per_step_sync=""),
        static2.with_env("OMP_NUM_THREADS=2 + static + GOMP_SPINCOUNT=10000", GOMP_SPINCOUNT=10000),
        static2.with_env("OMP_NUM_THREADS=2 + static + GOMP_SPINCOUNT=infinite", GOMP_SPINCOUNT="infinite"),
        static2.with_flags("OMP_NUM_THREADS=2 + static + sync every step", per_step_sync="", loader_workers=2)
               .with_env("OMP_NUM_THREADS=2 + static + DataLoader 2 workers + sync every step"),
        static2.with_env("OMP_NUM_THREADS=2 + static + NaiveEngine", MXNET_ENGINE_TYPE="NaiveEngine"),
        static2.with_flags("", loader_workers=0).with_env(
            "OMP_NUM_THREADS=2 + static + NaiveEngine + DataLoader 0 workers", MXNET_ENGINE_TYPE="NaiveEngine"),
        # the levers, each alone on top of gluonperf.train's one-context defaults (static2)
        static2.with_env("train defaults + jemalloc (LD_PRELOAD)", LD_PRELOAD=JEMALLOC),
        static2.with_env("train defaults + tcmalloc (LD_PRELOAD)", LD_PRELOAD=TCMALLOC),
        static2.with_env("train defaults + glibc MALLOC_MMAP_THRESHOLD_=32M, MALLOC_TRIM_THRESHOLD_=1G",
                         MALLOC_MMAP_THRESHOLD_=32 << 20, MALLOC_TRIM_THRESHOLD_=1 << 30),
        static2.with_env("train defaults + bulk execution off", MXNET_EXEC_BULK_EXEC_TRAIN=0),
        static2.with_env("train defaults + MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=1000",
                         MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=1000),
        static2.with_env("train defaults + MXNET_OPTIMIZER_AGGREGATION_SIZE=60", MXNET_OPTIMIZER_AGGREGATION_SIZE=60),
        static2.with_env("train defaults + MXNET_OPTIMIZER_AGGREGATION_SIZE=1", MXNET_OPTIMIZER_AGGREGATION_SIZE=1),
        static2.with_env("train defaults + OMP_PROC_BIND=true OMP_PLACES=cores", OMP_PROC_BIND="true",
                         OMP_PLACES="cores"),
        static2.with_env("train defaults + MXNET_CPU_WORKER_NTHREADS=2", MXNET_CPU_WORKER_NTHREADS=2),
        static2.with_flags("", ctx="cpu0,cpu1").with_env(
            "cpu0,cpu1 + train defaults (OMP_NUM_THREADS=1, MXNET_CPU_TEMP_COPY=64)",
            OMP_NUM_THREADS=1, MXNET_CPU_TEMP_COPY=64),
        static2.with_env("train defaults but OMP_NUM_THREADS=1", OMP_NUM_THREADS=1),
        static2.with_flags("", ctx="cpu0,cpu1", per_step_sync="").with_env(
            "cpu0,cpu1 + train defaults + sync every step", OMP_NUM_THREADS=1, MXNET_CPU_TEMP_COPY=64),
        # the OpenMP runtime, in place of GNU libgomp
        static2.with_env("train defaults + LLVM libomp (LD_PRELOAD)", LD_PRELOAD=LLVM_OMP),
        static2.with_env("train defaults + Intel libiomp5 (LD_PRELOAD)", LD_PRELOAD=INTEL_OMP),
        static2.with_flags("", ctx="cpu0,cpu1").with_env(
            "cpu0,cpu1 + train defaults + LLVM libomp", OMP_NUM_THREADS=1, MXNET_CPU_TEMP_COPY=64,
            LD_PRELOAD=LLVM_OMP),
        static2.with_flags("", ctx="cpu0,cpu1").with_env(
            "cpu0,cpu1 + train defaults + Intel libiomp5", OMP_NUM_THREADS=1, MXNET_CPU_TEMP_COPY=64,
            LD_PRELOAD=INTEL_OMP),
        static2.with_env("train defaults + Intel libiomp5 + KMP_BLOCKTIME=0", LD_PRELOAD=INTEL_OMP,
                         KMP_BLOCKTIME=0),
        # transparent huge pages for malloc'd memory (glibc >= 2.35; THP "madvise")
        static2.with_env("train defaults + GLIBC_TUNABLES=" + HUGE_PAGES, GLIBC_TUNABLES=HUGE_PAGES),
        # MXNet's remaining switches (docs/levers.md: none moved the step)
        static2.with_env("train defaults + MXNET_EXEC_INPLACE_GRAD_SUM_CAP=2", MXNET_EXEC_INPLACE_GRAD_SUM_CAP=2),
        static2.with_env("train defaults + MXNET_USE_OPERATOR_TUNING=0", MXNET_USE_OPERATOR_TUNING=0),
        static2.with_env("train defaults + MXNET_CPU_PARALLEL_SIZE=4096", MXNET_CPU_PARALLEL_SIZE=4096),
        # oneDNN 2.4's ISA hint: AVX-512 kernels that honour it use 256-bit
        # registers, which on some Intel Xeons keeps the cores at a higher clock. None of the kernels
        # ResNet-18's training runs does (DNNL_VERBOSE: the same implementations with and without it)
        static2.with_env("train defaults + DNNL_CPU_ISA_HINTS=PREFER_YMM", DNNL_CPU_ISA_HINTS="PREFER_YMM"),
    ]
    return out


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch-size", type=cli.positive_int, default=64, help="global batch size (default: %(default)s)")
    p.add_argument("--steps", type=cli.positive_int, default=3,
                   help="timed steps per candidate per round (default: %(default)s)")
    p.add_argument("--rounds", type=cli.positive_int, default=5, help="interleaved rounds (default: %(default)s)")
    p.add_argument("--only", help="comma-separated candidate numbers to run (0 = book loop, always run)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON lines, with the environment")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    cands = candidates(args.batch_size)
    spinning = [i for i, c in enumerate(cands) if spins_when_idle(c)]
    if args.only:
        items = [i.strip() for i in args.only.split(",")]
        if not all(i.isdigit() and int(i) < len(cands) for i in items):
            raise cli.UserError("--only %r: give candidate numbers from 1 to %d, comma-separated (0, the book "
                                "loop, always runs)" % (args.only, len(cands) - 1))
        keep = {0} | {int(i) for i in items}
        bad = sorted(keep & set(spinning))
        if bad:
            raise cli.UserError("--only: candidate %d (%s) cannot run in this sweep: its idle OpenMP threads spin "
                                "for ever and take the cores from every other candidate (docs/levers.md); leave it out"
                                % (bad[0], cands[bad[0]].name))
        cands = [c for i, c in enumerate(cands) if i in keep]
    else:
        for i in spinning:
            cli.note("note: left out %r: its idle OpenMP threads spin for ever and would take the cores from the "
                     "other candidates" % cands[i].name)
        cands = [c for i, c in enumerate(cands) if i not in spinning]
    # a library the loader cannot find is ignored with a warning: the run would measure without it
    preloads = {c.name: dict(c.env).get("LD_PRELOAD") for c in cands}
    missing = [c.name for c in cands if preloads[c.name] and not os.path.isfile(preloads[c.name])]
    if missing and args.only:
        raise cli.UserError("%r needs %s, which is not there; install it (see docs/levers.md) or leave the candidate "
                            "out of --only" % (missing[0], preloads[missing[0]]))
    for name in missing:
        cli.note("note: left out %r: %s is not there" % (name, preloads[name]))
    cands = [c for c in cands if c.name not in missing]
    cli.check_outputs(args)
    cli.guard_command(args, "benchmarks/levers.py", stall_timeout=0)  # stop the candidates on signals
    title = ("levers at batch %d: images/s (median of %d interleaved rounds) and ratio to the book's loop "
             "(geometric mean of the per-round ratios, its CI at ratio_level: 95%% corrected for the candidates "
             "tried) with the verdict" % (args.batch_size, args.rounds))
    columns = ["rank", "name", "images_per_s", "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_level", "rounds",
               "verdict", "error"]
    sweeps = Sweeps(tidy=lambda results: [r.metrics.update(bench_batch=args.batch_size) for r in results])
    with cli.keep_on_stop(sweeps.results, args, title, columns):  # a stopped suite keeps its finished rounds
        results = paired_sweep(cands, STEPRATE, args.steps, args.rounds, lever="levers",
                               observers=Observers(log=lambda m: print(m, file=sys.stderr, flush=True),
                                                   sweeps=sweeps))
    cli.emit(results, args, (), title=title, columns=columns)


if __name__ == "__main__":
    cli.run(main, "benchmarks/levers.py")

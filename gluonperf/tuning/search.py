"""The sweep engine behind `python -m gluonperf.tune`: which settings make a model train fastest.

`tune` sweeps the levers one at a time, keeping the best of each before trying the next
(coordinate search): threads (OMP_NUM_THREADS; MXNet's default on x86 is half the
processors, assuming hyper-threading), hybridize (none / hybrid / static),
the engine (MXNET_ENGINE_TYPE), oneDNN (MXNET_MKLDNN_ENABLED), the contexts
(one context vs all given, with each --kvstore) and the batch size. Every
candidate runs in a fresh process, because MXNet reads these environment
variables once, at start-up. Candidates of one lever are measured interleaved,
round after round in rotating order, and each is scored by its images/s ratio to
the baseline of that round: on a machine other people use, load changes during
the sweep hit every candidate alike.

Plain functions returning Results (`sweep`, `paired_sweep`, `tune`); they never parse
arguments and never print (gluonperf.tune does).
"""
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional, Tuple

from ..runtime import guard
from ..measure import machine, stats
from ..runtime.threads import TAKEN_VARIABLE, TEMP_COPY_FOR_CONTEXTS, idle_warnings, physical_cores, recommended_threads
from ..runtime.precision import has_bf16, why_no_bf16
from ..records import Result
from ..tuning import schedule
from ..tuning.rounds import Rounds, as_rounds
from ..tuning.schedule import Sweeps, summarize, winner  # noqa: F401 (the names tune and the benchmarks use)
from ..training.model_spec import spec_flags

# the folder that holds the gluonperf package: runs start there, with it on PYTHONPATH
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass(frozen=True)
class Candidate:
    """One setting to try: environment variables plus command-line flags of the runner."""
    name: str
    env: Tuple[Tuple[str, str], ...] = ()
    flags: Tuple[Tuple[str, str], ...] = ()
    runner: Optional["Runner"] = None  # None: the sweep's runner

    def with_env(self, name, **env):
        merged = dict(self.env)
        for k, v in env.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = str(v)
        return Candidate(name, tuple(sorted(merged.items())), self.flags, self.runner)

    def with_flags(self, name, **flags):
        merged = dict(self.flags)
        merged.update({k: str(v) for k, v in flags.items()})
        return Candidate(name, self.env, tuple(sorted(merged.items())), self.runner)

    def flag(self, key, default=None):
        return dict(self.flags).get(key, default)


@dataclass(frozen=True)
class Runner:
    """How a candidate is run: `python -m <module>` (or `python <script>.py`) with its flags,
    figure read from its output.

    `steprate` (gluonperf.workers.steprate) prints one JSON line with images_per_s;
    `train` (gluonperf.train --dataset synthetic) writes --json records with
    train_images_per_s per epoch (the last epoch counts: the first one pays for
    graph building and first allocations)."""
    module: str
    fixed: Tuple[str, ...] = ()
    steps_flag: Optional[str] = "--steps"
    serves: bool = False  # answers `run N` on stdin after `--serve` (see steprate.serve)
    python: Optional[str] = None  # the interpreter (default: this one), e.g. another venv's

    def argv(self, candidate, steps, json_path=None, serve=False):
        head = [self.module] if self.module.endswith(".py") else ["-m", self.module]
        args = [self.python or sys.executable, *head, *self.fixed]
        for k, v in candidate.flags:  # an empty value is a switch (store_true flag)
            if k == "model" and self.module == "gluonperf.train":
                args += spec_flags(v)  # a model of one's own as its flags, as a user would type them
                continue
            args += ["--" + k.replace("_", "-")] + ([v] if v != "" else [])
        if self.module == "gluonperf.train":
            batch = int(candidate.flag("batch_size", 64))
            args += ["--limit", str(batch * steps), "--json", json_path]
        elif serve:
            args += ["--serve"]
        elif self.steps_flag:
            args += [self.steps_flag, str(steps)]
        return args

    def command_line(self, candidate, steps):
        env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in candidate.env)
        argv = self.argv(candidate, steps, "RESULTS.json")
        argv[0] = "python"
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in argv)


STEPRATE = Runner("gluonperf.workers.steprate", ("--warmup", "2"), serves=True)
TRAIN = Runner("gluonperf.train", ("--dataset", "synthetic", "--epochs", "2"), None)


def train_available():
    """True when this gluonperf has the gluonperf.train command (found as a module, wherever
    the package is installed, whatever the current directory)."""
    return importlib.util.find_spec(TRAIN.module) is not None


def default_runner():
    """gluonperf.train once it exists in this package, else the steprate worker."""
    return TRAIN if train_available() else STEPRATE


def candidate_env(candidate):
    """This environment without MXNet/OpenMP settings (the candidate says them all), plus the candidate's."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MXNET_", "OMP_", "KMP_", "GOMP_", "DNNL_", "ONEDNN_")) and k != TAKEN_VARIABLE}
    env.update(dict(candidate.env))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    return env


def measure_candidate(runner, candidate, steps, timeout=900):
    """Run one candidate in a fresh process: (images_per_s, None) or (None, one-line error)."""
    env = candidate_env(candidate)
    with guard.temp_dir(prefix="gluonperf-tune-") as tmp:
        json_path = os.path.join(tmp, "out.json")
        try:
            p = guard.run(runner.argv(candidate, steps, json_path), env=env, cwd=ROOT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timed out after %ds" % timeout
        if p.returncode != 0:
            return None, "exit %d: %s" % (p.returncode, guard.last_line(p.stderr, "no message"))
        try:
            if runner.module == "gluonperf.train":
                with open(json_path) as f:
                    rows = [json.loads(l) for l in f if l.strip()]
                rows = [r for r in rows if r.get("train_images_per_s")]
                return float(rows[-1]["train_images_per_s"]), None
            return float(json.loads(p.stdout.strip().splitlines()[-1])["images_per_s"]), None
        except (OSError, ValueError, KeyError, IndexError):
            return None, "no throughput figure in the output of %s" % runner.module


def sweep(candidates, runner, steps, rounds=3, lever="", progress=None, timeout=900, log=None, sweeps=None,
          threshold=stats.THRESHOLD, left=None):
    """Measure candidates, each run in a fresh process, interleaved with the baseline.

    The first candidate is the baseline; each round runs it and every other candidate
    still in once, in an order that rotates from round to round, and a candidate's ratio
    is its images/s over the baseline's in the same round (gluonperf.tuning.schedule). `rounds`: a number, or a `Rounds` (`Rounds()`: each
    candidate until its verdict is settled). `log(message)`, if given, hears of every run as
    it ends, `progress()` too, `left(runs)` of the most runs still to come after each round;
    `sweeps` (a `Sweeps`) keeps what has finished for a command that is stopped.
    Returns one Result per candidate, best first (see `schedule.summarize`)."""
    def measure(c):
        r = c.runner or runner
        if hasattr(r, "measure"):  # a runner that runs candidates its own way (tune --'s ScriptRunner)
            return r.measure(c, steps, timeout)
        return measure_candidate(r, c, steps, timeout)
    table = _table(candidates, runner, steps, rounds, lever, sweeps, threshold)
    schedule.interleave(table, measure, progress, left, log, guard.stopping)
    results = schedule.summarize(table)
    return sweeps.finish(results) if sweeps else results


def _table(candidates, runner, steps, rounds, lever, sweeps, threshold):
    """The schedule's table of one sweep, registered with `sweeps`: each record also says its
    batch size, settings and the command line that reproduces it."""
    def describe(c):
        return {"batch_size": int(c.flag("batch_size", 0)) or None, "env_vars": dict(c.env), "flags": dict(c.flags),
                "command": (c.runner or runner).command_line(c, steps)}
    table = schedule.Table(list(candidates), rounds, lever, threshold, describe)
    if sweeps:
        sweeps.start(table)
    return table


class Worker:
    """A warmed-up candidate process that runs N steps when asked (`--serve`)."""

    def __init__(self, runner, candidate, timeout):
        self.candidate, self.timeout = candidate, timeout
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = guard.popen(runner.argv(candidate, 0, serve=True), env=candidate_env(candidate),
                                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=self.err, text=True, bufsize=1)
        self.error = None
        self._read()  # {"ready": true} after warm-up

    def _read(self):
        """The worker's next line as JSON; None with `error` set when it exited, or when no
        line came within --timeout (the worker is then killed)."""
        import select
        line = ""
        if self.error is None:
            if select.select([self.proc.stdout], [], [], self.timeout)[0]:
                line = self.proc.stdout.readline()
            else:
                guard.kill_group(self.proc)
                self.error = "timed out after %ds" % self.timeout
        if not line:
            self.proc.wait()
            self.err.seek(0)
            self.error = self.error or "exit %s: %s" % (self.proc.returncode,
                                                        guard.last_line(self.err.read(), "no message"))
            return None
        try:
            return json.loads(line)
        except ValueError:
            self.error = "unexpected output: %s" % line.strip()[:200]
            return None

    def run(self, steps):
        """(images_per_s, None) or (None, error)."""
        if self.error:
            return None, self.error
        try:
            self.proc.stdin.write("run %d\n" % steps)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        row = self._read()
        return (float(row["images_per_s"]), None) if row else (None, self.error)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            pass
        guard.kill_group(self.proc)  # also reaps it, and anything it started
        self.err.close()


def spins_when_idle(candidate):
    """True for a candidate whose OpenMP threads never sleep (GOMP_SPINCOUNT=infinite): waiting
    warm in a paired sweep, it spins on the cores, and every other candidate ran several times
    slower beside it (docs/levers.md, "Threads")."""
    return str(dict(candidate.env).get("GOMP_SPINCOUNT", "")).lower() == "infinite"


def paired_sweep(candidates, runner, steps, rounds=5, lever="", progress=None, timeout=900, log=None,
                 sweeps=None, threshold=stats.THRESHOLD, left=None):
    """Like `sweep` (the same rounds), but each candidate is ONE warmed-up
    process (started once, with its own environment) that runs `steps` steps when asked
    while the others wait idle: rounds are short, and start-up and warm-up are paid
    once and never timed. ValueError for a candidate that `spins_when_idle`: it would
    slow every other one (`sweep` runs it alone, in a process that exits)."""
    spinning = [c.name for c in candidates if spins_when_idle(c)]
    if spinning:
        raise ValueError("%r cannot wait warm beside the other candidates: its idle OpenMP threads spin for ever "
                         "and take the cores from them; leave it out, or measure it with sweep" % spinning[0])
    table = _table(candidates, runner, steps, rounds, lever, sweeps, threshold)
    workers = {}
    try:
        for c in candidates:  # one at a time, so warm-ups do not compete
            workers[c.name] = Worker(c.runner or runner, c, timeout)
        schedule.interleave(table, lambda c: workers[c.name].run(steps), progress, left, log, guard.stopping)
    finally:
        for w in workers.values():
            w.close()
    results = schedule.summarize(table)
    return sweeps.finish(results) if sweeps else results


# malloc replacements tried through LD_PRELOAD, each by its library names in order of
# preference (e.g. Debian's libjemalloc2, libtcmalloc-minimal4)
ALLOCATORS = (("jemalloc",), ("tcmalloc_minimal", "tcmalloc"))


def allocators():
    """The malloc replacements installed here, as LD_PRELOAD names: the first name found of each."""
    import ctypes.util
    found = (next((lib for lib in map(ctypes.util.find_library, names) if lib), None) for names in ALLOCATORS)
    return [lib for lib in found if lib]


THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"
HUGE_PAGES = "glibc.malloc.hugetlb=1"  # GLIBC_TUNABLES: malloc asks for transparent huge pages


def huge_pages_tunable():
    """HUGE_PAGES when it can change something here: glibc 2.35 or later (the tunable's
    first release) and Linux transparent huge pages in "madvise" mode (with "always"
    malloc's large blocks get huge pages anyway, with "never" not at all); else None."""
    import platform
    libc, version = platform.libc_ver()
    try:
        with open(THP_MODE) as f:
            mode = f.read()
        new_enough = libc == "glibc" and tuple(int(v) for v in version.split(".")[:2]) >= (2, 35)
    except (OSError, ValueError):
        return None
    return HUGE_PAGES if new_enough and "[madvise]" in mode else None


def levers(base, contexts, batch_sizes, kvstores, cores=None, runner=None):
    """The lever stages: (lever name, function best_candidate -> [candidates])."""
    cores = cores or physical_cores()
    n = len(contexts)
    stages = [("threads", lambda b: [
        b, b.with_env("OMP_NUM_THREADS=%d" % cores, OMP_NUM_THREADS=cores),
        b.with_env("OMP_NUM_THREADS=1", OMP_NUM_THREADS=1)] if cores > 1 else [b])]
    stages.append(("hybridize", lambda b: [b] + [b.with_flags("hybridize=%s" % m, hybridize=m)
                                                 for m in ("hybrid", "static") if b.flag("hybridize") != m]))
    if runner is not None and runner.module == "gluonperf.train":
        # a .rec (tune --dataset) can also be read by MXNet's ImageRecordIter, its threads set by --workers
        rec = any(str(a).endswith(".rec") for a in runner.fixed)
        stages.append(("data", lambda b: [b] + [b.with_flags("workers=%d" % w, workers=w)
                                               for w in sorted({0, 1, cores}) if b.flag("workers") != str(w)]
                       + ([b.with_flags("loader=recorditer workers=%d" % w, loader="recorditer", workers=w)
                           for w in sorted({1, cores})] if rec and b.flag("loader") != "recorditer" else [])))
    stages.append(("engine", lambda b: [b, b.with_env("MXNET_ENGINE_TYPE=ThreadedEngine",
                                                      MXNET_ENGINE_TYPE="ThreadedEngine")]))
    stages.append(("onednn", lambda b: [b, b.with_env("MXNET_MKLDNN_ENABLED=0", MXNET_MKLDNN_ENABLED=0)]))

    def allocator(b):  # looked up only when this lever runs
        huge = huge_pages_tunable()
        return ([b] + [b.with_env("LD_PRELOAD=%s" % lib, LD_PRELOAD=lib) for lib in allocators()]
                + ([b.with_env("GLIBC_TUNABLES=" + huge, GLIBC_TUNABLES=huge)] if huge else []))
    stages.append(("allocator", allocator))
    stages.append(("bulk", lambda b: [b, b.with_env("MXNET_EXEC_BULK_EXEC_TRAIN=0", MXNET_EXEC_BULK_EXEC_TRAIN=0),
                                      b.with_env("MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=1000",
                                                 MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN=1000)]))
    # implementations of one optimizer that give the same weights (gluonperf.training.optimizers, tested
    # there): SGD and AdamW update each parameter with its own operator unless this is set, and
    # with MXNet's multi-tensor operator in groups of 4 (MXNet's default) when it is. MXNet 1.9.1
    # has one implementation of the others (bench optimizers), so for them there is nothing to try
    def optimizer(b):
        from ..config import GROUPED_UPDATES
        if (b.flag("optimizer") or "sgd") not in GROUPED_UPDATES:
            return [b]
        return [b, b.with_env("MXNET_OPTIMIZER_AGGREGATION_SIZE=4", MXNET_OPTIMIZER_AGGREGATION_SIZE=4)]
    stages.append(("optimizer", optimizer))
    # (not GOMP_SPINCOUNT=infinite: its idle threads spin for ever, taking a core from
    # everything else, including the other candidates of a paired sweep)
    stages.append(("openmp", lambda b: [b, b.with_env("OMP_PROC_BIND=true OMP_PLACES=cores",
                                                      OMP_PROC_BIND="true", OMP_PLACES="cores")]))
    if n > 1:
        all_ctx = ",".join(contexts)

        def split(b):
            out = [b]
            if b.flag("ctx") != contexts[0]:
                out.append(b.with_flags("ctx=%s" % contexts[0], ctx=contexts[0]))
            threads = max(1, cores // n)
            label = many = None
            for kv in kvstores:
                if kv != b.flag("kvstore") or b.flag("ctx") != all_ctx:
                    label = "ctx=%s kvstore=%s OMP_NUM_THREADS=%d" % (all_ctx, kv, threads)
                    many = b.with_flags("", ctx=all_ctx, kvstore=kv).with_env("", OMP_NUM_THREADS=threads)
                    out.append(many.with_env("%s MXNET_CPU_TEMP_COPY=%d" % (label, TEMP_COPY_FOR_CONTEXTS),
                                             MXNET_CPU_TEMP_COPY=TEMP_COPY_FOR_CONTEXTS))
            if many is not None and any(c.startswith("cpu") for c in contexts):
                # MXNet's own workspace pool, shared by all CPU contexts (it serialised them:
                # docs/levers.md), against the larger one gluonperf sets
                out.append(many.with_env("%s MXNET_CPU_TEMP_COPY=1 (MXNet's default)" % label,
                                         MXNET_CPU_TEMP_COPY=1))
            return out
        stages.append(("contexts", split))
    if (runner is not None and runner.module == "gluonperf.train" and has_bf16() and not why_no_bf16()
            and all(c.startswith("cpu") for c in contexts)):
        # bfloat16 mixed precision: a lever of the arithmetic, so only where it can pay (AMX, AVX512-BF16)
        stages.append(("dtype", lambda b: [b, b.with_flags("dtype=bfloat16", dtype="bfloat16")]))
    return stages


def tune(model="resnet18", contexts=("cpu",), batch_sizes=(64,), steps=10, rounds=None, kvstores=("device",),
         runner=None, only=None, progress=None, timeout=900, sweeps=None, threshold=stats.THRESHOLD,
         optimizer=None):
    """The whole sweep, per batch size: each lever's candidates against the best so far.

    `rounds`: a number of rounds per lever, or a `Rounds` (None: `Rounds()`, as many as the
    intervals need within its budget). A candidate is kept only when it is judged faster than
    the lever's baseline (`winner`: its interval, corrected for the candidates tried, above 1
    and its estimate past `threshold`). Returns every candidate's Result (bench='tune', with
    `lever`, `ratio` to that stage's baseline with its interval, `verdict` and `rank`) plus, per
    batch size, a 'best' Result: the winning settings and `command`, and their `speedup` over
    the defaults measured in one interleaved confirmation run of the two (with its interval and
    verdict), not a product of the levers' ratios. `sweeps` (a `Sweeps`) keeps every lever's
    results as they come, for a stopped tune. `optimizer` (train runner only): train with it in
    every candidate (None: train's default, SGD)."""
    if optimizer is not None and (runner or default_runner()).module != "gluonperf.train":
        raise ValueError("--optimizer needs the train runner; the steprate worker trains with SGD only")
    runner = runner or default_runner()
    rounds = Rounds() if rounds is None else rounds
    contexts = list(contexts)
    out = []
    for batch in batch_sizes:
        # the baseline is the book's run: one context, imperative, MXNet's default environment
        flags = {"model": model, "batch_size": batch, "ctx": contexts[0], "hybridize": "none"}
        if optimizer is not None:
            flags["optimizer"] = optimizer
        # (gluonperf.train picks its own thread count when OMP_NUM_THREADS is unset, so with
        # that runner the baseline is imperative with train's thread default, not MXNet's)
        name = "imperative, train's thread default" if runner.module == "gluonperf.train" else "book defaults"
        defaults = best = Candidate(name, (), tuple(sorted((k, str(v)) for k, v in flags.items())))
        kept = []
        measure = paired_sweep if runner.serves else sweep
        for lever, make in levers(best, contexts, batch_sizes, kvstores, runner=runner):
            if only and lever not in only:
                continue
            cands = _unique(make(best))
            if len(cands) < 2:
                continue
            results = measure(cands, runner, steps, rounds, lever, progress, timeout, sweeps=sweeps,
                              threshold=threshold)
            out.extend(results)
            won = winner(results)
            if won is not None:
                best = next(c for c in cands if c.name == won.name)
                kept.append(lever)
        confirm = {"speedup": 1.0, "verdict": "defaults", "verdict_text": "no lever beat its baseline: the "
                   "defaults stay"}
        if kept:  # one interleaved run of the winning settings against the defaults
            final = Candidate("winning settings", best.env, best.flags, best.runner)
            results = measure([defaults, final], runner, steps, rounds, "confirm", progress, timeout,
                              sweeps=sweeps, threshold=threshold)
            out.extend(results)
            r = next(r for r in results if r.name == final.name).metrics
            confirm = {"speedup": r.get("ratio"), "verdict": r.get("verdict"), "verdict_text": r.get("verdict_text"),
                       "rounds": r.get("rounds")}
            confirm.update({"speedup" + k[len("ratio"):]: v for k, v in r.items() if k.startswith("ratio_")})
        ctxs = best.flag("ctx", "cpu").split(",")
        env = dict(best.env)
        if runner.module == "gluonperf.train" and "OMP_NUM_THREADS" not in env:  # train sets its own
            env["OMP_NUM_THREADS"] = str(recommended_threads(sum(1 for c in ctxs if c.startswith("cpu"))))
        out.append(Result("tune", "best", dict(confirm, **{
            "lever": "all", "batch_size": batch, "kept_levers": kept, "env_vars": dict(best.env),
            "flags": dict(best.flags), "command": runner.command_line(best, steps),
            "warnings": idle_warnings(ctxs, env) + (
                ["--dtype bfloat16 changes the arithmetic (convolutions and dense layers in bfloat16): check "
                 "that your model learns as well before keeping it"] if best.flag("dtype") == "bfloat16" else [])})))
    return out


def _unique(cands):
    seen, out = set(), []
    for c in cands:
        k = (c.env, c.flags)
        if k not in seen:
            seen.add(k)
            out.append(c)
    return out


# What a lever needs to have a candidate besides its baseline (the others always have one)
LEVER_NEEDS = {"threads": "more than one core", "data": "the train runner (the default)",
               "allocator": "jemalloc or tcmalloc installed, or glibc's transparent huge pages left to madvise",
               "contexts": "several contexts in --ctx",
               "optimizer": "--optimizer sgd or adamw (the others have one implementation)",
               "dtype": "the train runner (the default), CPU contexts and a CPU with AMX or AVX512-BF16"}


def _candidate_counts(contexts, batch_sizes, kvstores, only=None, runner=None, optimizer=None):
    """{lever: candidates including its baseline} of the levers (of `only`, or all) that have
    a candidate besides the baseline here."""
    base = Candidate("b", (), (("ctx", contexts[0]), ("hybridize", "none"))
                     + ((("optimizer", optimizer),) if optimizer else ()))
    counts = {}
    for lever, make in levers(base, contexts, batch_sizes, kvstores, runner=runner):
        if not only or lever in only:
            n = len(_unique(make(base)))
            if n > 1:
                counts[lever] = n
    return counts


def levers_to_try(contexts, batch_sizes, kvstores, only=None, runner=None, optimizer=None):
    """The names of the levers (of `only`, or all) that have something to try here."""
    return list(_candidate_counts(contexts, batch_sizes, kvstores, only, runner, optimizer))


def count_runs(model, contexts, batch_sizes, rounds, kvstores, only=None, runner=None, optimizer=None):
    """The most subprocess runs `tune` can make (for the progress bar: the sequential plan's
    candidates leave as their verdicts settle, and the bar's total shrinks with them)."""
    counts = _candidate_counts(contexts, batch_sizes, kvstores, only, runner, optimizer)
    planned = as_rounds(rounds).planned if rounds is not None else Rounds().planned
    # each round runs the baseline and every candidate once (and the confirmation: the defaults and the winner)
    return (sum(n * planned for n in counts.values()) + 2 * planned) * len(batch_sizes)


# every lever `levers` can make, in its order (the names tune --levers takes)
LEVER_NAMES = ("threads", "hybridize", "data", "engine", "onednn", "allocator", "bulk", "optimizer", "openmp",
               "contexts", "dtype")

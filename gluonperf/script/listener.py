"""What to change in a training script gluonperf has never seen, measured on it:
`python -m gluonperf.tune -- python train.py` (the command starts the script again and again;
this module is what runs inside each run, and what turns the runs into a recipe).

Inside the script (`install`, called by the hooks' sitecustomize of `profile --` once the script
has imported MXNet, with GLUONPERF_TUNE_SETTINGS in its environment): the candidate's changes
that can be made from outside are made (`hybridize` the model the Trainer updates, a
`Sequential` of HybridBlocks turned into a `HybridSequential` first; a `DataLoader`'s
`num_workers` and `thread_pool`; bfloat16 AMP before the model is built), then --warmup steps
(`Trainer.step` calls) run untouched, the next --steps are timed as the script runs them, with
no fence between them (`mx.nd.waitall()` before the first and after the last only: a script that
lets Python run ahead keeps that gain), and the process stops (exit status 0). The script's own
waits for the engine in the timed steps (`asnumpy`, `asscalar`, `wait_to_read`, `waitall`, a
metric's `update`) are counted by the line of the script that waited, with the time Python was
blocked there. A probe run (the first run of the baseline) also describes the script: its
Trainer, the model (what it is, where it is built), its DataLoaders (where, with how many
workers). Everything goes to `$GLUONPERF_SCRIPT_OUT/<pid>.jsonl`.

In the command: `ScriptRunner` runs a candidate (a `sweep.Candidate`: environment variables,
and the changes above as flags) and reads its images/s; `script_levers` makes the candidates
from what the probe found; `tune_script` sweeps them with tune's engine (`sweep.sweep`: runs
interleaved with the baseline, ratios with intervals corrected for the candidates tried, only
`faster` kept, the kept set confirmed together); `recipe` turns the results and the waits into
records of kind `advice`: the change, where it goes in the script, its measured speedup with
its interval and verdict, or for a wait its measured cost.
"""
import glob
import json
import linecache
import os
import statistics
import subprocess
import sys
import time

from ..records import result
from ..measure import stats
from ..runtime import guard
from . import lever_bounds, sweep
from ..training.hybrid_blocks import hybrid_kind, hybrid_mode, hybridize
from .script_profile import (ADVICE, ENV_OUT, READ_LESS, _code, _images, _part, _where, find_model,
                             hybridize_code, shown, times)

ENV_SETTINGS = "GLUONPERF_TUNE_SETTINGS"  # JSON: warmup, steps, probe, levers
ENTRY = "gluonperf.experiments.script_tune:install"
SITE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime", "script_site")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# the levers tune -- tries, in the order it tries them (names for --levers)
LEVER_NAMES = ("hybridize", "data", "threads", "dtype", "bulk", "engine", "allocator", "openmp")
# a wait is worth a line of the recipe when Python is blocked there this share of a step or more, at
# least every other step: a read once an epoch is where the epoch's queued work drains, which is the
# pattern the advice asks for, not a cost
WAIT_SHARE = 0.05
WAIT_EVERY = 0.5
PROFILED_STEPS = 5   # the probe's steps under MXNet's profiler, after its timed ones
DATA_ROUNDS = 10     # the probe's timed steps cut into this many runs of consecutive steps, for the data wait


# --- inside the script ------------------------------------------------------------------

def install():
    """Apply the candidate's changes to the script this process runs and time its steps (MXNet
    is imported): called once by the sitecustomize of `profile --` and `tune --`."""
    return _Run(os.environ[ENV_OUT], json.loads(os.environ.get(ENV_SETTINGS) or "{}"))


class _Run:
    """The listener of `runtime.script_hooks` in one run of the script (see the module's docstring)."""

    def __init__(self, out_dir, settings):
        from ..runtime import script_hooks
        self.pid = os.getpid()
        self.out = open(os.path.join(out_dir, "%d.jsonl" % self.pid), "a")
        self.warmup, self.steps = int(settings.get("warmup", 5)), int(settings.get("steps", 20))
        self.min_seconds = float(settings.get("min_seconds", 0))  # the probe's: time at least this long
        self.window = settings.get("window")  # the probe's: "startup" to time at least as long as start-up took
        self.done = False
        self.probe, self.levers = bool(settings.get("probe")), settings.get("levers") or {}
        self.trainer, self.index, self.start, self.images = None, 0, None, 0
        self.data_s = 0.0      # seconds inside the data loaders' next() in the timed steps
        self.marks = []        # the timed steps' ends: (perf_counter, data_s so far)
        self.startup_s = None  # process start to the first timed step
        self.profiled = None   # probe: (the Trace, the step it ends at) of its steps under MXNet's profiler
        self.waits = {}        # (what, file, line) -> [calls, seconds], in the timed steps
        self.calls = {}        # probe: id(block) -> [block, args, images] of outermost calls after the first step
        self.made = {}         # probe: id(block) -> (file, line) where the script built it
        self.loaders = []      # every DataLoader the script made: where, and with what
        self.applied = None    # what the hybridize lever did, once done
        self.write(kind="start", argv=sys.argv)
        if self.levers.get("amp"):
            from ..runtime.precision import enable
            enable(self.levers["amp"], [])  # before the script builds its model
        script_hooks.install(self, waits=True)
        script_hooks.watch_loaders(True)
        if self.probe:
            script_hooks.watch_construction(True)
        if self.probe or self.levers.get("hybridize"):
            script_hooks.watch_blocks(True)
        import atexit
        atexit.register(self.at_exit)

    def write(self, **line):
        if os.getpid() != self.pid:  # a forked DataLoader worker
            return
        self.out.write(json.dumps(line, default=str) + "\n")
        self.out.flush()

    # the hooks' listener

    def before_update(self, trainer, batch_size):
        if self.trainer is None:
            self.trainer = trainer

    def after_update(self, trainer, batch_size):
        if trainer is not self.trainer:
            return
        import mxnet as mx
        self.index += 1
        if self.profiled is not None:
            if self.index >= self.profiled[1]:
                found = _part(self.stop_profiler)
                self.write(kind="operators", **(found if isinstance(found, dict) else {"error": found}))
                raise SystemExit(0)
            return
        if self.start is not None and not self.done:
            self.images += batch_size
            self.marks.append((time.perf_counter(), self.data_s))
        if self.index == self.warmup:
            mx.nd.waitall()  # gluonperf's own fence: not one of the script's waits
            self.start = time.perf_counter()
            self.startup_s = time.time() - _process_start()
            if self.probe and self.window == "startup":  # measure at least as long as the script took to start
                self.min_seconds = max(self.min_seconds, self.startup_s)
        elif (self.start is not None and self.index - self.warmup >= self.steps
              and time.perf_counter() - self.start >= self.min_seconds):
            mx.nd.waitall()
            self.finish(time.perf_counter() - self.start)
            if self.probe:  # a few more steps under MXNet's profiler: what the operators take
                self.profiled = (_part(self.start_profiler), self.index + PROFILED_STEPS)
                return
            raise SystemExit(0)  # measured: the run ends here (its DataLoader workers with it)

    def data_wait(self, seconds, loader):
        if self.start is not None and not self.done:
            self.data_s += seconds

    def start_profiler(self):
        from ..measure.trace import Trace
        trace = Trace(os.path.join(os.path.dirname(self.out.name), "%d-trace.json" % self.pid), aggregate_stats=True,
                      profile_symbolic=True, profile_imperative=True)
        trace.__enter__()
        self.profile_start = time.perf_counter()
        return trace

    def stop_profiler(self):
        """The profiled steps' operators: {"ops": {name: seconds}, "seconds": their wall time, "steps"}."""
        from ..measure.trace import aggregate_stats
        trace, _ = self.profiled
        if isinstance(trace, str):  # the profiler could not start
            return {"error": trace}
        trace.__exit__(None, None, None)
        seconds = time.perf_counter() - self.profile_start
        ops = {name: stat["Total"] / 1000.0
               for name, stat in aggregate_stats().get("Time", {}).get("operator", {}).items()}
        return {"ops": ops, "seconds": seconds, "steps": PROFILED_STEPS}

    def engine_wait(self, seconds, what, file, line):
        if self.start is None:
            return
        seen = self.waits.setdefault((what, file, line), [0, 0.0])
        seen[0] += 1
        seen[1] += seconds

    def block_called(self, block, args):
        if self.trainer is None:
            return  # the Trainer is known at its first step: the model is found from the second on
        if self.probe:
            from .script_profile import _arrays
            arrays = _arrays(args)
            seen = self.calls.setdefault(id(block), [block, None, 0])
            seen[1] = args
            seen[2] += arrays[0].shape[0] if arrays and arrays[0].shape else 0
        if self.levers.get("hybridize") and self.applied is None:
            wanted = {id(p) for p in self.trainer._params}
            have = {id(p) for p in block.collect_params().values()}
            if wanted and len(wanted & have) * 2 > len(wanted):
                self.applied = _part(lambda: hybridize(block, self.levers["hybridize"]))
                self.write(kind="applied", lever="hybridize", result=self.applied)
                if not self.probe:
                    from ..runtime import script_hooks
                    script_hooks.watch_blocks(False)  # the timed steps run without the Block hook

    def loader_arguments(self, loader, args, kwargs):
        workers, pool = self.levers.get("num_workers"), self.levers.get("thread_pool")
        if workers is None and pool is None:
            return None
        import inspect
        bound = inspect.signature(type(loader).__init__.__wrapped__).bind(loader, *args, **kwargs)
        if workers is not None:
            bound.arguments["num_workers"] = int(workers)
        if pool is not None:
            bound.arguments["thread_pool"] = bool(pool)
        return bound.args[1:], bound.kwargs

    def loader_made(self, loader, file, line):
        self.loaders.append({"file": file, "line": line, "num_workers": getattr(loader, "_num_workers", None),
                             "thread_pool": bool(getattr(loader, "_thread_pool", False)),
                             "batch_size": getattr(getattr(loader, "_batch_sampler", None), "_batch_size", None)})

    def block_made(self, block, file, line):
        self.made[id(block)] = (file, line)

    # the end

    def finish(self, seconds, at_exit=False):
        self.done = True
        steps = self.index - self.warmup
        self.write(kind="rate", steps=steps, seconds=seconds, images=self.images, at_exit=at_exit,
                   images_per_s=self.images / seconds if seconds > 0 else None, startup_s=self.startup_s,
                   data_s=self.data_s, data_rounds=_data_rounds(self.start, self.marks),
                   waits=[{"what": w, "file": f, "line": l, "calls_per_step": c / steps, "seconds_per_step": s / steps}
                          for (w, f, l), (c, s) in sorted(self.waits.items(), key=lambda kv: -kv[1][1])])
        if self.probe:
            found = _part(self.describe)
            self.write(kind="probe", **(found if isinstance(found, dict) else {"error": found}))
        self.out.flush()

    def describe(self):
        """What the probe found: the Trainer, the model and its kind, the DataLoaders."""
        from ..runtime.contexts import describe
        from ..measure.steps import _contexts
        trainer = self.trainer
        kv = getattr(trainer, "_kvstore", None) or getattr(trainer, "_kvstore_params", {}).get("kvstore")
        model, _, _, note = find_model(trainer, self.calls.values(), max(1, self.index - 1))
        out = {"contexts": describe(_contexts(trainer)), "kvstore": getattr(kv, "type", kv if isinstance(kv, str)
                                                                             else None),
               "optimizer": type(trainer._optimizer).__name__, "loaders": self.loaders, "model_note": note}
        if model is not None:
            where = self.made.get(id(model))
            out["model"] = {"class": type(model).__name__, "kind": hybrid_kind(model), "mode": hybrid_mode(model),
                            "file": where[0] if where else None, "line": where[1] if where else None}
        return out

    def at_exit(self):
        """The script ended: a probe that timed --steps steps but not --min-time seconds keeps them
        (timed to here, the script's last lines included; the runs after it stop sooner)."""
        if self.profiled is not None:  # the script ended during the probe's profiled steps
            found = _part(self.stop_profiler)
            self.write(kind="operators", **(found if isinstance(found, dict) else {"error": found}))
        if not self.done and self.start is not None and self.index - self.warmup >= self.steps and self.probe:
            import mxnet as mx
            mx.nd.waitall()
            self.finish(time.perf_counter() - self.start, at_exit=True)
        self.write(kind="exit", steps_seen=self.index)


def _process_start():
    """When this process started, by the system clock."""
    import psutil
    return psutil.Process().create_time()


def _data_rounds(start, marks, rounds=DATA_ROUNDS):
    """The timed steps (`marks`: each step's end and the data wait so far) cut into at most `rounds`
    runs of consecutive steps: [[seconds, seconds waiting for data], ...]."""
    if start is None or not marks:
        return []
    k = min(rounds, len(marks))
    ends = [marks[round(i * len(marks) / k) - 1] for i in range(1, k + 1)]
    out, last = [], (start, 0.0)
    for end in ends:
        out.append([end[0] - last[0], end[1] - last[1]])
        last = end
    return out


# --- in the command ---------------------------------------------------------------------------

class ScriptRunner:
    """Runs the user's command for a candidate, in a fresh process with the hooks, and reads
    its images/s (the `sweep` engine's runner for `tune --`). Keeps every finished run's record
    by candidate name (`runs`), the waits with them."""
    serves = False
    module = "script"

    def __init__(self, command, warmup, steps, cwd=None, min_seconds=0.0, window=None):
        self.command, self.warmup, self.steps = list(command), warmup, steps
        self.min_seconds = min_seconds  # the probe's; the runs after it time the steps the probe timed
        self.window = window            # the probe's: "startup" times at least as long as the start-up took
        self.cwd = cwd or os.getcwd()
        self.runs = {}

    def environment(self, candidate, out_dir, probe=False):
        env = {k: v for k, v in os.environ.items() if k not in (ENV_OUT, ENV_SETTINGS, "GLUONPERF_SCRIPT_HOOKS",
                                                               "GLUONPERF_SCRIPT_ROOT")}
        env.update(dict(candidate.env))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (SITE, os.environ.get("PYTHONPATH")) if p)
        levers = {k: _value(v) for k, v in candidate.flags}
        env.update({ENV_OUT: out_dir, "GLUONPERF_SCRIPT_HOOKS": ENTRY, "GLUONPERF_SCRIPT_ROOT": ROOT,
                    ENV_SETTINGS: json.dumps({"warmup": self.warmup, "steps": self.steps, "probe": probe,
                                              "min_seconds": self.min_seconds if probe else 0,
                                              "window": self.window if probe else None, "levers": levers})})
        return env

    def run(self, candidate, timeout, probe=False):
        """One run: (its records by kind, the CompletedProcess or None, an error or None)."""
        with guard.temp_dir(prefix="gluonperf-tune-") as tmp:
            try:
                done = guard.run(self.command, env=self.environment(candidate, tmp, probe), cwd=self.cwd,
                                 timeout=timeout)
            except subprocess.TimeoutExpired:
                return {}, None, "timed out after %ds" % timeout
            lines = _read(tmp)
        if "rate" in lines:
            return lines, done, None
        if done.returncode != 0:
            return lines, done, "exit %d: %s" % (done.returncode, guard.last_line(done.stderr, "no message"))
        seen = lines.get("exit", {}).get("steps_seen")
        if seen is None:
            return lines, done, ("the script never imported MXNet under gluonperf's hooks" if not lines else
                                 "the script ended before its steps were counted")
        return lines, done, ("the script ended after %d Trainer.step calls, before the %d tune needs (--warmup %d, "
                             "--steps %d)" % (seen, self.warmup + self.steps, self.warmup, self.steps))

    def measure(self, candidate, steps, timeout):
        """(images_per_s, None) or (None, one-line error): the `sweep` engine's call."""
        lines, _, error = self.run(candidate, timeout)
        if error:
            return None, error
        self.runs.setdefault(candidate.name, []).append(lines["rate"])
        return lines["rate"]["images_per_s"], None

    def command_line(self, candidate, steps=None):
        import shlex
        env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in candidate.env)
        changes = ", ".join("%s=%s" % kv for kv in candidate.flags)
        line = (env + " " if env else "") + " ".join(shlex.quote(a) for a in shown(self.command))
        return line + (" (with %s)" % changes if changes else "")


def _value(text):
    """A flag's text as the in-script value: whole numbers as ints, else the text."""
    try:
        return int(text)
    except ValueError:
        return text


def _read(out_dir):
    """The records of the process that timed the steps (or of the first process that wrote any),
    by kind (the last of each kind)."""
    best = {}
    for path in sorted(glob.glob(os.path.join(out_dir, "*.jsonl"))):
        lines = {}
        with open(path) as f:
            for text in f:
                try:
                    line = json.loads(text)
                except ValueError:
                    continue
                lines[line.get("kind")] = line
        if "rate" in lines or not best:
            best = lines
            if "rate" in lines:
                break
    return best


def probe(command, warmup, steps, timeout, cwd=None, min_seconds=1.0, window=None):
    """One run of the script as it is, describing it and timing at least `steps` steps and
    `min_seconds` seconds (or every step the script has, if fewer): (runner, the probe's records,
    the CompletedProcess, an error or None). The runner then times as many steps as the probe did
    (fewer when the probe reached the script's end, so that every run stops inside the script)."""
    runner = ScriptRunner(command, warmup, steps, cwd, min_seconds, window)
    lines, done, error = runner.run(sweep.Candidate("as it is"), timeout, probe=True)
    if not error:
        timed = lines["rate"]["steps"]
        runner.steps = max(steps, timed - 1 if lines["rate"].get("at_exit") else timed)
    return runner, lines, done, error


def script_levers(found, cores, only=None, environ=None, measured=None, threshold=stats.THRESHOLD, bounds=True):
    """The lever stages for a script, in the order they are tried (levers that pay on many
    scripts first: hybridize, data, threads, dtype; then bulk, engine, allocator, openmp), from
    what the probe `found` and `measured` (its `rate` and `operators` records): only what can
    change something here (a model that can be hybridized and is not yet static, a DataLoader,
    bfloat16 where the CPU has it, a thread count other than MXNet's own here), and, unless
    `bounds` is False, only what can reach 1 + `threshold` at best (`lever_bounds`). Returns
    (stages: [(lever, best candidate -> [candidates], best candidate -> why nothing to try or
    None)], {lever: why it has nothing to try})."""
    from ..runtime.precision import has_bf16, prepare, why_no_bf16
    from ..runtime.threads import omp_threads
    environ = os.environ if environ is None else environ
    measured = measured or {}
    stages, idle = [], {}
    model = found.get("model")
    if model is None:
        idle["hybridize"] = "no model found (%s)" % (found.get("model_note") or "?")
    elif model["kind"] == "imperative":
        idle["hybridize"] = "the model, %s, is not a HybridBlock nor a Sequential of HybridBlocks" % model["class"]
    elif model["mode"] == "static":
        idle["hybridize"] = "the model is hybridized with static_alloc and static_shape already"
    else:
        modes = ["hybrid", "static"] if model["mode"] == "none" else ["static"]
        stages.append(("hybridize", lambda b: [b] + [b.with_flags("hybridize=%s" % m, hybridize=m) for m in modes]))
    loaders = found.get("loaders") or []
    waits = lever_bounds.data_bound(measured.get("rate"))
    if not loaders:
        idle["data"] = "no gluon DataLoader"
    elif bounds and lever_bounds.cannot_pay(waits, threshold):
        idle["data"] = ("the step waits %s for its data (95%% CI %s-%s): workers could make it at most %.3gx faster, "
                        "less than the %g%% worth a change" % (_share(1 - 1 / waits.estimate), _share(1 - 1 / waits.low),
                                                              _share(1 - 1 / waits.high), waits.high, 100 * threshold))
    else:
        stages.append(("data", _data_lever(loaders, cores)))
    current = omp_threads(environ)
    if cores > 1:
        stages.append(("threads", lambda b: [b] + [b.with_env("OMP_NUM_THREADS=%d" % n, OMP_NUM_THREADS=n)
                                                   for n in range(1, cores + 1) if n != current]))
    else:
        idle["threads"] = "one core"
    ctxs = (found.get("contexts") or "cpu").split(",")
    why = why_no_bf16(environ) if has_bf16() else "this CPU has no bfloat16 instructions (AMX, AVX512-BF16)"
    if why is None and not all(c.startswith("cpu") for c in ctxs):
        why = "bfloat16 AMP runs on CPU contexts only"
    bf16 = lever_bounds.bf16_bound(measured.get("operators"))
    if why is None and bounds and lever_bounds.cannot_pay(bf16, threshold):
        why = ("the operators bfloat16 would run take %s of a step: it could make it at most %.3gx faster, less "
               "than the %g%% worth a change" % (_share(1 - 1 / bf16), bf16, 100 * threshold))
    if why:
        idle["dtype"] = why
    else:
        env = {}
        prepare("bfloat16", environ=env)  # what oneDNN needs for it here (AMX's ISA setting), if anything
        stages.append(("dtype", lambda b: [b, b.with_flags("amp=bfloat16", amp="bfloat16").with_env(
            "amp=bfloat16", **env)]))
    wanted = ("engine", "allocator", "bulk", "openmp")
    for name, make in sweep.levers(sweep.Candidate("b"), ["cpu"], [1], ["device"], cores):
        if name in wanted:
            stages.append((name, make))
    order = {name: i for i, name in enumerate(LEVER_NAMES)}
    stages = [(name, make, _bulk_idle(model) if name == "bulk" else _never)
              for name, make in sorted(stages, key=lambda s: order[s[0]])]
    if only:
        stages = [s for s in stages if s[0] in only]
        idle = {k: v for k, v in idle.items() if k in only}
    return stages, idle


def _never(best):
    return None


def _share(x):
    return "%.1f%%" % (100 * x) if abs(x) < 0.1 else "%.0f%%" % (100 * x)


def _data_lever(loaders, cores):
    current = max(l.get("num_workers") or 0 for l in loaders)
    workers = [n for n in range(1, cores + 1) if n != current]

    def data(b):
        out = [b] + [b.with_flags("num_workers=%d" % n, num_workers=n) for n in workers]
        if not any(l.get("thread_pool") for l in loaders):
            out.append(b.with_flags("num_workers=%d thread_pool" % cores, num_workers=cores, thread_pool=1))
        return out
    return data


def _bulk_idle(model):
    """Bulk execution groups the operators of a hybridized graph (MXNet's CachedOp): nothing to try while
    the model runs imperatively, as the script has it and with no hybridize kept."""
    hybridized = (model or {}).get("mode") in ("hybrid", "static")

    def why(best):
        if hybridized or best.flag("hybridize") in ("hybrid", "static"):
            return None
        return ("bulk execution groups the operators of a hybridized graph, and the model runs imperatively (as "
                "the script has it, and hybridize was not kept)")
    return why


def count_runs(stages, rounds):
    """The most runs of the script `tune_script` makes in its levers (each round runs the baseline and
    every candidate once), for the progress bar."""
    sizes = [len(sweep._unique(make(sweep.Candidate("as it is")))) for _, make, _ in stages]
    return sum(n * rounds.planned for n in sizes if n > 1)


def tune_script(runner, stages, rounds, progress=None, timeout=900, sweeps=None, threshold=stats.THRESHOLD,
                left=None, idle=None):
    """Each lever's candidates against the best so far (the script as it is to start with),
    in fresh runs of the script interleaved with that baseline; a lever's candidate is kept
    only when judged `faster`; the kept set confirmed against the script as it is in one
    interleaved run. `progress()` hears of every run, `left(runs)` of the most runs still to
    come in the whole tune; a lever with nothing to try once the levers before it are kept goes
    into `idle` ({lever: why}). Returns (every candidate's Result, the confirmation's Result or
    None, the kept levers' names)."""
    base = best = sweep.Candidate("as it is")
    out, kept = [], []
    plans = [len(sweep._unique(make(base))) for _, make, _ in stages]
    for i, (lever, make, why) in enumerate(stages):
        later = sum(n * rounds.planned for n in plans[i + 1:] if n > 1)
        reason = why(best)
        cands = [] if reason else sweep._unique(make(best))
        if len(cands) < 2:
            if reason and idle is not None:
                idle[lever] = reason
            continue
        results = sweep.sweep(cands, runner, runner.steps, rounds, lever, progress, timeout, sweeps=sweeps,
                              threshold=threshold, left=(lambda n, later=later: left(n + later)) if left else None)
        out.extend(results)
        won = sweep.winner(results)
        if won is not None:
            best = next(c for c in cands if c.name == won.name)
            kept.append(lever)
        if left:
            left(later)
    confirm = None
    if len(kept) > 1:  # one kept change was measured against the script as it is already
        final = sweep.Candidate("together", best.env, best.flags)
        results = sweep.sweep([base, final], runner, runner.steps, rounds, "confirm", progress, timeout,
                              sweeps=sweeps, threshold=threshold, left=left)
        out.extend(results)
        confirm = next(r for r in results if r.name == "together")
    return out, confirm, kept


def change_of(lever, candidate, found, cwd):
    """(the change in words or code, where it goes in the script) of a kept candidate's lever."""
    flags = dict(candidate.flags)
    if lever == "hybridize":
        model = found.get("model") or {}
        return (hybridize_code(model.get("kind"), flags.get("hybridize") == "static"),
                _where(model.get("file"), model.get("line") or 0, cwd))
    if lever == "data":
        loader = max(found.get("loaders") or [{}], key=lambda l: l.get("num_workers") or 0)
        change = "DataLoader(..., num_workers=%s%s)" % (flags["num_workers"],
                                                       ", thread_pool=True" if "thread_pool" in flags else "")
        return change, _where(loader.get("file"), loader.get("line") or 0, cwd)
    if lever == "dtype":
        model = found.get("model") or {}
        return ("from mxnet.contrib import amp; amp.init(target_dtype='bfloat16') before the model is built (check "
                "that it learns as well)"), _where(model.get("file"), model.get("line") or 0, cwd)
    env = " ".join("%s=%s" % kv for kv in candidate.env)
    return "run with %s in the environment" % env, "the environment"


def recipe(results, confirm, kept, found, rates, cwd, tried, took=None):
    """The advice records: one per kept change (its lever's measured ratio, interval and
    verdict), one per costly wait for the engine (its measured cost, from `rates`: the `rate`
    records of the runs of the script as it is), and the combination's confirmed speedup, or "no
    change pays here" with what was tried; with `took` ({wall_s, runs, levers, idle}), first a
    record of what the tune cost (lever 'run')."""
    out = []
    if took:
        out.append(result(ADVICE, "tune", lever="run", measured=False, change=None, where=None, **took))
    by_lever = {}
    for r in results:
        if r.metrics.get("lever") in kept and r.metrics.get("verdict") == "faster":
            held = by_lever.get(r.metrics["lever"])
            if held is None or r.metrics["ratio_ci_low"] > held.metrics["ratio_ci_low"]:
                by_lever[r.metrics["lever"]] = r
    for lever in kept:
        r = by_lever[lever]
        cand = sweep.Candidate(r.name, tuple(sorted(r.metrics["env_vars"].items())),
                               tuple(sorted(r.metrics["flags"].items())))
        # the lever's own part of the candidate: its flags or its environment beside the ones kept before
        own = _own(cand, lever)
        change, where = change_of(lever, own, found, cwd)
        out.append(result(ADVICE, lever, lever=lever, change=change, where=where, measured=True,
                          env_vars=dict(own.env), hooks=dict(own.flags),
                          **{k: r.metrics.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n",
                                                           "ratio_level", "ratio_joint_level", "verdict", "rounds")}))
    step_s = None
    if rates:
        step_s = statistics.median(l["seconds"] / l["steps"] for l in rates)
    for w in merge_waits(rates):
        share = w["seconds_per_step"] / step_s if step_s else None
        if share is None or share < WAIT_SHARE or w["calls_per_step"] < WAIT_EVERY:
            continue
        code = _code(w["file"], w["line"])
        # its cost is measured; what removing it gains is not (measured=False)
        out.append(result(ADVICE, "wait", lever="wait", where=_where(w["file"], w["line"], cwd), code=code,
                          measured=False, what=w["what"], calls_per_step=w["calls_per_step"],
                          blocked_s_per_step=w["seconds_per_step"], blocked_share=share, step_s=step_s,
                          change=("Python waits here for the engine %.3g ms of each %.3g ms step (%.0f%%), %s a step: "
                                  "%s (to try: what it saves is not measured; at most the time blocked here, and "
                                  "nothing where the step's other work also waits for the engine)" % (
                                      1e3 * w["seconds_per_step"], 1e3 * step_s, 100 * share,
                                      times(w["calls_per_step"]), READ_LESS))))
    if confirm is not None:
        m = confirm.metrics
        out.append(result(ADVICE, "together", lever="together", change="all of the above",
                          where=None, measured=True, **{k: m.get(k) for k in (
                              "ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n", "ratio_level", "ratio_joint_level", "verdict",
                              "verdict_text", "rounds")}))
    elif not kept:
        out.append(result(ADVICE, "nothing", lever="none", measured=True, tried=tried,
                          change="no change pays here: %s" % (tried or "nothing could be tried")))
    return out


def _own(candidate, lever):
    """The candidate with only what its lever sets (a kept candidate carries the levers kept before it)."""
    flags = dict(candidate.flags)
    keys = {"hybridize": ("hybridize",), "data": ("num_workers", "thread_pool"), "dtype": ("amp",)}.get(lever)
    if keys:
        return sweep.Candidate(candidate.name, (), tuple((k, v) for k, v in flags.items() if k in keys))
    return sweep.Candidate(candidate.name, tuple((k, v) for k, v in candidate.env if _env_lever(k) == lever), ())


def _env_lever(name):
    return {"OMP_NUM_THREADS": "threads", "MXNET_ENGINE_TYPE": "engine", "LD_PRELOAD": "allocator",
            "GLIBC_TUNABLES": "allocator", "MXNET_EXEC_BULK_EXEC_TRAIN": "bulk",
            "MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN": "bulk", "OMP_PROC_BIND": "openmp", "OMP_PLACES": "openmp",
            "DNNL_MAX_CPU_ISA": "dtype"}.get(name)


def merge_waits(rates):
    """The waits of several runs, by line: the median over runs of the calls and seconds per step."""
    by_site = {}
    for r in rates:
        for w in r.get("waits", ()):
            by_site.setdefault((w["what"], w["file"], w["line"]), []).append(w)
    out = []
    for (what, file, line), ws in by_site.items():
        ws += [{"calls_per_step": 0.0, "seconds_per_step": 0.0}] * (len(rates) - len(ws))
        out.append({"what": what, "file": file, "line": line,
                    "calls_per_step": statistics.median(w["calls_per_step"] for w in ws),
                    "seconds_per_step": statistics.median(w["seconds_per_step"] for w in ws)})
    return sorted(out, key=lambda w: -w["seconds_per_step"])


def failure_notes(results):
    """What a candidate's failure means for the user, where gluonperf knows: a DataLoader's workers
    hand batches over in shared memory (cpu_shared), which a model hybridized with static_alloc
    refuses (MXNet's CachedOp wants every input on the model's context)."""
    out = []
    if any("cpu_shared" in str(r.metrics.get("error", "")) for r in results if r.metrics.get("lever") == "data"):
        out.append("note: DataLoader workers hand batches over in shared memory (cpu_shared), which a model "
                   "hybridized with static_alloc refuses: copy each batch to the model's context first "
                   "(data = data.as_in_context(mx.cpu())), then try the workers again (tune --levers data)")
    return out


def tried_text(results, idle):
    """What was tried and how each came out, for "no change pays here"."""
    parts = []
    for r in results:
        m = r.metrics
        if m.get("verdict") in ("baseline", None) or m.get("lever") == "confirm":
            continue
        if m.get("ratio") is None:
            parts.append("%s: %s" % (r.name, m.get("error", "no figure")))
        else:
            parts.append("%s %s, %s" % (r.name, interval_text(m), m["verdict"]))
    parts += ["%s not tried: %s" % kv for kv in idle.items()]
    return "; ".join(parts)


def interval_text(m, key="ratio"):
    """'1.29x (95% CI 1.21-1.37, 5 rounds)', or where the rounds are too few for an interval a reader
    can use (`stats.readable`), '0.72x (2 rounds: too few for an interval; about 4 would give one)'."""
    iv = stats.Interval(m[key], m[key + "_ci_low"], m[key + "_ci_high"], m.get(key + "_n") or 0,
                        m.get(key + "_joint_level") or m.get(key + "_level") or stats.LEVEL)
    if stats.readable(iv):
        return "%.2fx (%g%% CI %.2f-%.2f, %d rounds)" % (iv.estimate, 100 * iv.level, iv.low, iv.high, iv.n)
    need = stats.rounds_for_readable(m.get("round_ratios") or [], iv.level)
    return "%.2fx (%d round%s: too few for an interval%s)" % (
        iv.estimate, iv.n, "s" if iv.n != 1 else "", "; about %d would give one" % need if need else "")


def found_text(found, rate, cwd):
    """What the probe found, in one line."""
    parts = ["as it is: %s images/s" % _images(rate["images_per_s"])]
    if found.get("contexts"):
        parts.append("a Trainer (%s) on %s" % (found.get("optimizer"), found["contexts"]))
    model = found.get("model")
    if model:
        kind = {"hybrid": "a HybridBlock", "sequential": "a Sequential of HybridBlocks",
                "imperative": "not hybridizable"}[model["kind"]]
        mode = {"none": "not hybridized", "hybrid": "hybridized", "static": "hybridized static"}[model["mode"]]
        where = _where(model.get("file"), model.get("line") or 0, cwd)
        parts.append("the model %s (%s, %s%s)" % (model["class"], kind, mode, ", built at %s" % where if where else ""))
    for l in found.get("loaders") or []:
        parts.append("a DataLoader at %s (num_workers=%s%s)" % (_where(l["file"], l["line"], cwd), l["num_workers"],
                                                                 ", thread_pool" if l.get("thread_pool") else ""))
    return "; ".join(parts)


def duration(seconds):
    """'45 s', '4 min 12 s', '1 h 3 min'."""
    seconds = int(round(seconds))
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%d min %d s" % (seconds // 60, seconds % 60)
    return "%d h %d min" % (seconds // 3600, seconds % 3600 // 60)


def left_alone(found):
    """What tune -- does not change in the script, when that matters: several contexts, a dist kvstore."""
    ctxs = (found.get("contexts") or "").split(",")
    kv = str(found.get("kvstore") or "")
    said = []
    if len(ctxs) > 1:
        said.append("the script's %d contexts (%s)" % (len(ctxs), found["contexts"]))
    if kv.startswith("dist") or kv == "horovod":
        said.append("its kvstore (%s)" % kv)
    if not said:
        return None
    return ("tune leaves %s as the script sets them, and its batch size: it tunes what can be changed from outside "
            "in each process" % " and ".join(said))


def recipe_lines(advice):
    """The recipe as the terminal shows it."""
    lines = []
    for r in advice:
        if r.metrics["lever"] == "run":
            lines.append("recipe (tune took %s: %d runs of the script, the probe included)" % (
                duration(r.metrics["wall_s"]), r.metrics["runs"]))
    changes = [r for r in advice if r.metrics["lever"] not in ("wait", "together", "none", "run")]
    waits = [r for r in advice if r.metrics["lever"] == "wait"]
    together = [r for r in advice if r.metrics["lever"] == "together"]
    if changes:
        lines.append("what to change (each measured on this script, here, against it as it is):")
        for i, r in enumerate(changes, 1):
            m = r.metrics
            lines.append("%d. %s: %s" % (i, m["where"] or "?", m["change"]))
            lines.append("   faster: %s" % interval_text(m))
    for r in together:
        m = r.metrics
        lines.append("together, confirmed in one interleaved run: %s" % m.get("verdict_text"))
    for r in advice:
        if r.metrics["lever"] == "none":
            lines.append(r.metrics["change"])
    if waits:
        lines.append("waits for the engine (tune cannot remove them from outside: they change what the script "
                     "computes):")
        for r in waits:
            m = r.metrics
            lines.append("- %s: `%s`: %s" % (m["where"], m["code"], m["change"]))
    return lines

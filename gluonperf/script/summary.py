"""A training script gluonperf has never seen, profiled from inside its own process:
`python -m gluonperf.profile -- python train.py` (the command starts the script; this module
is what runs inside it, and what turns what it wrote into records).

Inside the script (`install`, called by gluonperf/runtime/script_site/sitecustomize.py once
the script has imported MXNet): a `measure.steps.StepProfiler` listens to the hooks of
`runtime.script_hooks` (`Trainer.step` ends a step and gives its images, the data loaders'
`next()` is waiting for data, outermost Block calls show the model). After --warmup steps it
times --steps fenced steps, then runs --operator-steps under MXNet's profiler; then, once:
the model (the Block called in the measured steps whose parameters the Trainer updates), its
FLOPs (`measure.flops.count_flops` on its input's shape), its Blocks timed alone
(`experiments.block_profile`, on the last batch it saw, with its parameters and gradients
put back afterwards) and the model alone as the script runs it against hybridized static
(`hybridize_alone`); the script's own waits for the engine in the measured steps, by line.
Everything goes to `$GLUONPERF_SCRIPT_OUT/<pid>.jsonl`, a line at a time and flushed, so that a script that raises or is stopped leaves what was measured.
The script then runs on as it would have (or stops, with `stop`).

In the command (`read_runs`, `choose`, `summarise`): the step's time and images/s, the share
of it spent waiting for data, in the update and in the rest, each with its 95% interval over
rounds of consecutive steps (`ROUNDS`), the input verdict (`stats.verdict` on the slowdown
the waits cause, as profile's input section judges it), the operators per step with their
GFLOP/s against the ceiling, the Blocks, the peak memory, the waits for the engine, the model
alone hybridized: Results, as every command's; and `advice`: what to change, each record
measured (a ratio with its interval) or to try, with the `tune --` command that tries it.

From Python, `report(profiler)` gives the same tables for a `StepProfiler` of one's own loop.
"""
import atexit
import json
import math
import os
import sys

from ..measure import stats
from ..measure.harness import Measurement
from ..records import format_table, result

ENV_OUT = "GLUONPERF_SCRIPT_OUT"            # the folder the script's processes write into
ENV_SETTINGS = "GLUONPERF_SCRIPT_SETTINGS"  # JSON: warmup, steps, operator_steps, depth, stop, trace
ENTRY = "gluonperf.experiments.script_profile:install"
BENCH = "script"
OPERATORS = "script-operators"
ROUNDS = 10         # the steps are cut into at most this many rounds of consecutive steps
TOP_OPERATORS = 15
HOW_STEPS_ARE_FOUND = ("steps are found through gluon.Trainer.step(batch_size) (of the first Trainer that steps; or "
                       "Trainer.update, for a loop that calls allreduce_grads and update itself)")


# --- inside the script ------------------------------------------------------------------

def install():
    """Hook the script this process runs (MXNet is imported): called once by the
    sitecustomize of `profile --`, with the settings the command put in the environment."""
    settings = json.loads(os.environ.get(ENV_SETTINGS) or "{}")
    return _Driver(os.environ[ENV_OUT], settings)


class _Driver:
    """The StepProfiler of a script, and what is written for the command."""

    def __init__(self, out_dir, settings):
        from ..measure.steps import StepProfiler
        from ..runtime import script_hooks
        self.pid = os.getpid()
        self.settings = settings
        self.out = open(os.path.join(out_dir, "%d.jsonl" % self.pid), "a")
        self.calls = {}       # id(block) -> [block, args of its last call on the first context, images]
        self.first_ctx = None
        self.described = False
        self.prof = StepProfiler(warmup=settings.get("warmup", 3), active=settings.get("steps", 20),
                                 profiled=settings.get("operator_steps", 5), trace_path=settings.get("trace"),
                                 trainer_steps=True, on_step=self.step, on_block=self.block, on_ready=self.ready,
                                 hooks=False)
        from .script_memory import Follower
        self.follower = Follower(self.prof, self.write)  # memory at every step, to the script's end
        script_hooks.install(self.follower, waits=True)  # the script's own waits for the engine too
        self.prof.start()
        self.write(kind="start", argv=sys.argv)
        atexit.register(self.at_exit)

    def write(self, **line):
        if os.getpid() != self.pid:  # a forked DataLoader worker
            return
        self.out.write(json.dumps(line, default=_plain) + "\n")
        self.out.flush()

    def step(self, record):
        if not self.described:
            self.described = True
            self.write(kind="process", **_process(self.prof))
            # What `ready` needs, imported now (between two steps, outside their times): a module first
            # imported in an atexit handler after Ctrl-C turns the script's exit status from 130 into 1.
            from . import block_profile, step_time  # noqa: F401
            from ..training import hybrid_blocks  # noqa: F401
            from ..measure import flops  # noqa: F401
        self.write(kind="step", **record)

    def block(self, block, args):
        arrays = _arrays(args)
        if not arrays:
            return
        if self.first_ctx is None:
            self.first_ctx = arrays[0].context
        seen = self.calls.setdefault(id(block), [block, None, 0])
        seen[2] += arrays[0].shape[0] if arrays[0].shape else 0
        if arrays[0].context == self.first_ctx:
            seen[1] = args

    def ready(self, prof):
        """Once, after the measured steps (or at exit, when the script ended first)."""
        partial = prof.phase != "done"
        if not prof.steps:  # stopped before its first measured step: nothing to add
            self.write(kind="end", partial=partial)
            return
        done = [s for s in prof.steps if s["phase"] == "active"]
        self.write(kind="loaders", loaders=list(prof.loaders.values()))
        self.write(kind="waits", steps=len(done), step_s=sum(s["step_s"] for s in done) / max(1, len(done)),
                   waits=[{"what": w, "file": f, "line": l, "calls": c, "seconds": t,
                           "calls_per_step": c / max(1, len(done)), "seconds_per_step": t / max(1, len(done))}
                          for (w, f, l), (c, t) in sorted(prof.waits.items(), key=lambda kv: -kv[1][1])])
        if prof.memory is not None:
            self.write(kind="memory", rss_before_bytes=prof.memory.rss_before, **prof.memory.summary())
        model = _part(lambda: self.model(prof, len(done) + sum(s["phase"] == "profiled" for s in prof.steps)))
        operators = _part(lambda: operators_of(prof))
        if operators is not None:
            self.write(kind="operators", **(operators if isinstance(operators, dict) else {"note": operators}))
        if isinstance(model, dict) and model.get("block") is not None and not partial and self.settings.get("depth"):
            blocks = _part(lambda: self.blocks(model))
            self.write(kind="blocks", **(blocks if isinstance(blocks, dict) else {"error": blocks}))
        if isinstance(model, dict) and model.get("block") is not None:
            why = ("the script ended before its measured steps were done" if partial
                   else "--depth 0" if not self.settings.get("depth") else None)
            if why:
                self.write(kind="hybridize", skipped=why)
            else:
                timed = _part(lambda: hybridize_alone(model["block"], model["args"]))
                if timed is not None:
                    self.write(kind="hybridize", **(timed if isinstance(timed, dict) else {"error": timed}))
        self.calls.clear()
        self.follower.follow(model.get("block") if isinstance(model, dict) else None,  # the script runs on
                             sum(s["step_s"] for s in done) / max(1, len(done)))  # unprofiled, memory sampled
        self.write(kind="end", partial=partial)
        if self.settings.get("stop") and not partial:
            sys.stderr.write("gluonperf: stopped the script after its measured steps (--stop)\n")
            sys.stderr.flush()
            raise SystemExit(0)

    def model(self, prof, steps):
        found, args, images, note = find_model(prof.trainer, self.calls.values(), steps)
        line = {"note": note}
        if found is not None:
            line.update(_describe_model(found, args, images))
            flops = _part(lambda: _flops(found, args))
            if isinstance(flops, dict):
                line["flops"] = flops
            elif flops:
                line["flops_note"] = flops
        self.write(kind="model", **line)
        line["block"], line["args"] = found, args
        return line

    def blocks(self, model):
        from .block_profile import block_profile
        block, args = model["block"], model["args"]
        arrays = _arrays(args)
        saved = _snapshot(block)
        try:
            rows = block_profile(block, list(args), arrays[0].context, depth=self.settings["depth"],
                                 repeat=max(2, min(10, self.settings.get("steps", 10))), warmup=1)
        finally:
            _restore(saved)
        return {"records": [r.row() for r in rows]}

    def at_exit(self):
        try:
            if not self.prof.finished:
                self.prof.close()
        except BaseException as e:  # noqa: BLE001 (at exit, the script's status must stand)
            self.write(kind="error", where="at exit", error="%s: %s" % (type(e).__name__, e))
        self.write(kind="exit", steps_seen=self.prof.index)
        try:
            self.follower.at_exit()
        except BaseException as e:  # noqa: BLE001
            self.write(kind="error", where="memory at exit", error="%s: %s" % (type(e).__name__, e))


def _plain(value):
    """JSON for numpy scalars (their Python value) and anything else (its text)."""
    return value.item() if hasattr(value, "item") else str(value)


def shown(command):
    """The command as a user would type it, as a list: a Python interpreter given by its path shown by
    its name (`/venv/bin/python train.py` -> `python train.py`)."""
    first = os.path.basename(command[0])
    return [first if first.startswith("python") else command[0]] + list(command[1:])


def _part(fn):
    """fn()'s value, or the one line of what it raised (a part of the report that failed)."""
    from .. import error_line
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (the script must run on)
        return "%s: %s" % (type(e).__name__, error_line(e))


def _arrays(args):
    import mxnet as mx
    return [a for a in (args or ()) if isinstance(a, mx.nd.NDArray)]


def _process(prof):
    """Where the script runs: its contexts and, in a dist_sync job, its rank."""
    from ..runtime.contexts import describe
    trainer = prof.trainer
    kv = getattr(trainer, "_kvstore", None)
    dist = kv is not None and "dist" in getattr(kv, "type", "")
    return {"contexts": describe(prof.contexts), "rank": kv.rank if dist else None,
            "num_workers": kv.num_workers if dist else None, "kvstore": getattr(kv, "type", None),
            "parameters": len(getattr(trainer, "_params", []))}


def find_model(trainer, calls, steps):
    """The Block the Trainer updates, among the outermost Blocks called in the measured steps
    (`calls`: [block, args, images]): the one holding most of the Trainer's parameters (the
    smallest, among equals). Returns (block, its args, images it saw per step, a note)."""
    if trainer is None:
        return None, None, None, "no Trainer stepped"
    wanted = {id(p) for p in getattr(trainer, "_params", [])}
    best = None
    for block, args, images in calls:
        try:
            have = {id(p) for p in block.collect_params().values()}
        except Exception:  # noqa: BLE001
            continue
        covered = len(wanted & have)
        if covered and args is not None and (best is None or (covered, -len(have)) > best[0]):
            best = ((covered, -len(have)), block, args, images)
    if best is None:
        return None, None, None, ("no Block called with arrays in the measured steps holds the Trainer's parameters "
                                  "(a model called inside another framework's code, or not through Block.__call__)")
    (covered, _), block, args, images = best
    note = None if covered == len(wanted) else "the model found holds %d of the %d parameters the Trainer updates" % (
        covered, len(wanted))
    return block, args, images / max(1, steps), note


def _describe_model(block, args, images):
    from .block_profile import parameter_count
    arrays = _arrays(args)
    return {"model": type(block).__name__, "prefix": getattr(block, "prefix", None),
            "input_shape": list(arrays[0].shape), "inputs": len(arrays), "images_per_step": images,
            "parameter_values": parameter_count(block),
            "hybridized": bool(getattr(block, "_active", False))}


def _flops(block, args):
    """The model's FLOPs per image (measure.flops.count_flops), or why there are none."""
    import mxnet as mx
    from ..measure.flops import count_flops
    arrays = _arrays(args)
    if not isinstance(block, mx.gluon.HybridBlock):
        return "no FLOPs: %s is not a HybridBlock (FLOPs are counted on its symbol graph)" % type(block).__name__
    if len(arrays) != 1 or len(args) != 1:
        return "no FLOPs: the model takes %d inputs (counted for one input only)" % len(args)
    count = count_flops(block, arrays[0].shape[1:])
    return {"forward_by_op": count.forward_by_op, "backward_by_op": count.backward_by_op,
            "layers_by_op": count.layers_by_op, "input_shape": list(count.input_shape),
            "matmul_forward": count.matmul_forward, "uncounted": list(count.uncounted),
            "forward": count.forward, "training": count.training}


def flop_count(flops):
    """A measure.flops.FlopCount back from its JSON form (`_flops`)."""
    from ..measure.flops import FlopCount
    return FlopCount(flops["forward_by_op"], flops["backward_by_op"], flops["layers_by_op"],
                     tuple(flops["input_shape"]), flops["matmul_forward"], tuple(flops["uncounted"]))


def _snapshot(block):
    """Copies of a model's parameters and gradients on every context, and which of its Blocks
    are hybridized: timing its Blocks alone moves BatchNorm's statistics and writes gradients."""
    import mxnet as mx
    saved = []
    for p in block.collect_params().values():
        try:
            data = p.list_data()
        except Exception:  # noqa: BLE001 (not initialised)
            continue
        grads = p.list_grad() if p.grad_req != "null" else []
        saved.append((data, [d.copy() for d in data], grads, [g.copy() for g in grads]))
    from .block_profile import walk
    active = [(b, b._active) for _, _, b in walk(block, math.inf) if isinstance(b, mx.gluon.HybridBlock)]
    flags = {id(b): list(b._flags) for b, _ in active}
    return saved, active, flags


HYBRIDIZE_ROUNDS = 5       # interleaved rounds of the model alone, as the script runs it against hybridized static
HYBRIDIZE_REGION_S = 0.05  # each round times enough steps of each to last about this long (1 to 20 steps)


def hybridize_alone(block, args, rounds=HYBRIDIZE_ROUNDS):
    """The model the Trainer updates, timed alone on the input it got in the script (`args`): one
    training step's forward and backward (under autograd.record, backward from a gradient of ones on
    its floating-point outputs, as the Blocks table times the model), as the script runs it (not
    hybridized, or hybridized without static_alloc) against hybridize(static_alloc=True,
    static_shape=True) (a gluon.nn.Sequential of HybridBlocks turned into a HybridSequential first,
    as `tune --` does), in `rounds` interleaved rounds (which goes first alternates), each mode
    re-applied and run once untimed before its timed steps, every step fenced (mx.nd.waitall).
    Plain data: {'model_kind', 'mode', 'steps_per_round', 'as_is_s', 'static_s' (seconds per step, per
    round), 'batch_size', 'ctx'}, or {'skipped': why}. The model is put back as it was: its class
    (a Sequential), its parameters and gradients, and how each of its Blocks is hybridized."""
    import time
    import mxnet as mx
    from .block_profile import _Step, walk
    from ..training.hybrid_blocks import hybrid_kind, hybrid_mode, hybridize
    kind, mode = hybrid_kind(block), hybrid_mode(block)
    base = {"model_kind": kind, "mode": mode, "model": type(block).__name__}
    if kind == "imperative":
        return dict(base, skipped="%s is neither a HybridBlock nor a gluon.nn.Sequential of HybridBlocks: it cannot "
                                  "be hybridized as it is" % type(block).__name__)
    if mode == "static":
        return dict(base, skipped="the model is already hybridized with static_alloc and static_shape")
    arrays = _arrays(args)
    if len(arrays) != len(args or ()):
        return dict(base, skipped="the model takes arguments that are not arrays")
    saved = _snapshot(block)
    sequentials = [(b, set(vars(b))) for _, _, b in walk(block, math.inf) if type(b) is mx.gluon.nn.Sequential]
    try:
        step = _Step(block, list(args), None, None)
        step.check()  # as the script runs it: the heads (ones) of its outputs
        hybridize(block, "static")  # a Sequential becomes a HybridSequential here, in place
        found = [(b, was, saved[2][id(b)]) for b, was in saved[1]] + [(b, False, []) for b, _ in sequentials]
        step.forward_backward()
        mx.nd.waitall()

        def as_is():
            for b, was, flags in found:
                b._active, b._flags = was, list(flags)
                b._clear_cached_op()

        def static():
            block.hybridize(static_alloc=True, static_shape=True)

        def timed(setup, n):
            setup()
            step.forward_backward()  # untimed: builds the graph of this mode
            mx.nd.waitall()
            start = time.perf_counter()
            for _ in range(n):
                step.forward_backward()
                mx.nd.waitall()
            return (time.perf_counter() - start) / n

        first = timed(as_is, 1)
        n = max(1, min(20, int(math.ceil(HYBRIDIZE_REGION_S / max(first, 1e-6)))))
        samples = {"as_is": [], "static": []}
        for r in range(rounds):
            order = [("as_is", as_is), ("static", static)]
            for name, setup in (order if r % 2 == 0 else order[::-1]):
                samples[name].append(timed(setup, n))
    finally:
        for b, keys in sequentials:  # back to the script's own class, without a HybridBlock's attributes
            for key in set(vars(b)) - keys:
                del b.__dict__[key]
            b.__class__ = mx.gluon.nn.Sequential
        _restore(saved)
    return dict(base, steps_per_round=n, rounds=rounds, as_is_s=samples["as_is"], static_s=samples["static"],
                batch_size=arrays[0].shape[0] if arrays and arrays[0].shape else None, ctx=str(arrays[0].context))


def _restore(snapshot):
    import mxnet as mx
    saved, active, flags = snapshot
    for data, copies, grads, grad_copies in saved:
        for target, copy in list(zip(data, copies)) + list(zip(grads, grad_copies)):
            copy.copyto(target)
    for b, was in active:
        if b._active != was or list(b._flags) != flags[id(b)]:
            b._active, b._flags = was, list(flags[id(b)])
            b._clear_cached_op()
    mx.nd.waitall()


def operators_of(prof):
    """The profiled steps' operators as plain data: {name: [calls, seconds]} over `steps`
    steps, their mean step time, the time some operator ran (busy_s) and each context's wait."""
    if not prof.operators:
        return {"note": prof.operator_note} if prof.operator_note else None
    from .step_time import busy_seconds, context_waits
    profiled = [s for s in prof.steps if s["phase"] == "profiled"]
    if not profiled:
        return None
    ops = {name: [stat["Count"], stat["Total"] / 1000.0]
           for name, stat in prof.operators.get("Time", {}).get("operator", {}).items()}
    trace = prof.trace or {"traceEvents": []}
    return {"steps": len(profiled), "step_s": sum(s["step_s"] for s in profiled) / len(profiled), "ops": ops,
            "busy_s": busy_seconds(trace), "context_waits": context_waits(trace, prof.contexts),
            "note": prof.operator_note}


# --- in the command: what the script's processes wrote --------------------------------------

def read_runs(out_dir):
    """What each process of the script wrote: a list of runs (dicts: pid, start, process, steps,
    loaders, memory, model, operators, blocks, end, exit, errors), and the pids in which the
    hooks' sitecustomize ran (`<pid>.site`), whether or not they imported MXNet."""
    runs, sites = [], []
    for name in sorted(os.listdir(out_dir)):
        pid, _, ext = name.partition(".")
        if ext == "site":
            sites.append(int(pid))
        if ext != "jsonl":
            continue
        run = {"pid": int(pid), "steps": [], "errors": []}
        with open(os.path.join(out_dir, name)) as f:
            for text in f:
                try:
                    line = json.loads(text)
                except ValueError:  # the last line of a process killed while writing it
                    continue
                kind = line.pop("kind", None)
                if kind == "step":
                    run["steps"].append(line)
                elif kind == "error":
                    run["errors"].append(line)
                elif kind:
                    run[kind] = line
        runs.append(run)
    return runs, sites


def choose(runs):
    """The run to report (rank 0 of a dist_sync job, else the process with most steps) and a
    note on the others (their step times), or (None, None) when no process stepped."""
    stepped = [r for r in runs if r["steps"]]
    if not stepped:
        return None, None
    ranked = [r for r in stepped if (r.get("process") or {}).get("rank") is not None]
    if ranked:
        chosen = min(ranked, key=lambda r: r["process"]["rank"])
    else:
        chosen = max(stepped, key=lambda r: len(r["steps"]))
    others = [r for r in stepped if r is not chosen]
    if not others:
        return chosen, None
    def who(r):
        rank = (r.get("process") or {}).get("rank")
        return "rank %d" % rank if rank is not None else "process %d" % r["pid"]
    median = lambda r: sorted(s["step_s"] for s in r["steps"])[len(r["steps"]) // 2]  # noqa: E731
    return chosen, "%d processes stepped; reported: %s; the others' median step: %s" % (
        len(stepped), who(chosen), ", ".join("%s %.4g ms" % (who(r), 1e3 * median(r)) for r in others))


def nothing_measured(runs, sites):
    """Why there is no report, in one line, or None when there is one."""
    if any(r["steps"] for r in runs):
        return None
    if not sites:
        return ("gluonperf's hooks never loaded in the command: it ran no Python, or a Python that ignores "
                "PYTHONPATH (python -E or -I); profile runs a Python training command, e.g. -- python train.py")
    if not runs:
        return "the script never imported MXNet: nothing to profile (%s)" % HOW_STEPS_ARE_FOUND
    seen = max((r.get("exit") or {}).get("steps_seen", 0) for r in runs)
    if seen:
        return "the script ended after %d step%s, before the first measured one (--warmup steps come first)" % (
            seen, "s" if seen != 1 else "")
    return ("no training step seen: %s, which the script never called; call trainer.step(batch_size) in the loop, "
            "or mark steps with gluonperf.measure.steps.StepProfiler" % HOW_STEPS_ARE_FOUND)


def run_of(prof):
    """A run (as `read_runs` gives them) of a StepProfiler in this process."""
    from ..runtime.contexts import describe
    run = {"pid": os.getpid(), "steps": list(prof.steps), "errors": [],
           "process": {"contexts": describe(prof.contexts), "rank": None},
           "loaders": {"loaders": list(prof.loaders.values())},
           "end": {"partial": prof.phase != "done"}}
    if prof.memory is not None:
        run["memory"] = dict(prof.memory.summary(), rss_before_bytes=prof.memory.rss_before)
    operators = operators_of(prof)
    if operators:
        run["operators"] = operators
    return run


# --- the summaries ------------------------------------------------------------------------

def rounds_of(steps, rounds=ROUNDS):
    """`steps` cut into at most `rounds` runs of consecutive steps, as even as can be."""
    k = min(rounds, len(steps))
    bounds = [round(i * len(steps) / k) for i in range(k + 1)]
    return [steps[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _sum(steps, key):
    return sum(s.get(key) or 0.0 for s in steps)


def share_interval(groups, key):
    """The share of a step spent in `key` (wait_s, update_s), from per-round slowdowns
    t(step) / (t(step) - t(part)) (a t interval on their logs, as profile's input section
    makes it): (share, low, high, Interval of the slowdown)."""
    ratios = []
    for g in groups:
        total = _sum(g, "step_s")
        ratios.append(total / max(total - _sum(g, key), 1e-9 * total))
    iv = stats.ratio_interval(ratios)
    high = 1 - 1 / iv.high if math.isfinite(iv.high) else 1.0
    return 1 - 1 / iv.estimate, max(0.0, 1 - 1 / iv.low) if iv.low > 0 else 0.0, high, iv


def _rate(groups, images, seconds):
    values = [images(g) / seconds(g) for g in groups if seconds(g) > 0 and images(g) > 0]
    return stats.ratio_interval(values) if values else None


def _pct(x):
    return "%.1f%%" % (100 * x) if abs(x) < 0.1 else "%.0f%%" % (100 * x)


def summarise(run, command=None, threshold=stats.THRESHOLD, peak_flops=None, ceiling_devices=1):
    """Records of one run (`read_runs`): {'steps': the step and its parts, 'input': the verdict,
    'operators': the top operators and the time none ran, 'blocks': the Blocks, 'memory': the
    peak}, each a list of Results; 'notes': lines to show under the tables. `peak_flops`: this
    machine's ceiling on one context (FLOP/s), for GFLOP/s against it; `ceiling_devices`: how
    many of it the script's contexts hold (measure.ceiling.ceiling_devices)."""
    steps = [s for s in run["steps"] if s["phase"] == "active"]
    if not steps:
        steps = [s for s in run["steps"] if s["phase"] == "profiled"]
    process = run.get("process") or {}
    model = run.get("model") or {}
    flops = model.get("flops")
    batch = steps[-1].get("batch_size") or 0
    groups = rounds_of(steps)
    per_step = Measurement("step", tuple(s["step_s"] for s in steps))
    step_iv = stats.ratio_interval([_sum(g, "step_s") / len(g) for g in groups])
    common = {"command": command, "model": model.get("model"), "batch_size": batch,
              "contexts": process.get("contexts"), "steps": len(steps), "rounds": len(groups),
              "partial": bool((run.get("end") or {"partial": True}).get("partial"))}
    rate = _rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "step_s"))
    wait, wait_low, wait_high, slowdown = share_interval(groups, "wait_s")
    has_update = all(s.get("update_s") is not None for s in steps)
    update = share_interval(groups, "update_s") if has_update else None
    step_s = step_iv.estimate
    step_fields = dict(per_step.summary(), **step_iv.fields("time_s"))
    step_fields.update(part="step", share=1.0)
    if rate:
        step_fields.update(rate.fields("images_per_s"))
    notes = []
    if flops and rate:
        achieved = flops["training"] * rate.estimate
        step_fields.update(training_flops_per_image=flops["training"], gflop_per_s=achieved / 1e9)
        if peak_flops:
            step_fields["of_ceiling"] = achieved / (peak_flops * ceiling_devices)
    rows = [result(BENCH, "step", **step_fields, **common)]
    parts = [("waiting for data", "wait_s", (wait, wait_low, wait_high, slowdown))]
    if update:
        parts.append(("update (Trainer.step)", "update_s", update))
    for name, key, (share, low, high, iv) in parts:
        rows.append(result(BENCH, name, part=name, time_s=_sum(steps, key) / len(steps), share=share,
                           share_ci_low=low, share_ci_high=high, share_n=iv.n, share_level=iv.level,
                           **{key.replace("_s", "_samples_s"): [s.get(key) for s in steps]}, **common))
    rest = 1.0 - wait - (update[0] if update else 0.0)
    rows.append(result(BENCH, "rest", part="forward, backward, the rest" if update else "the rest of the step",
                       time_s=step_s * rest, share=rest, **common))
    verdict = input_verdict(groups, slowdown, wait, wait_low, wait_high, threshold, run, batch, common)
    if batch and model.get("images_per_step") and abs(model["images_per_step"] - batch) > 0.5:
        notes.append("note: Trainer.step was given batch_size=%d while the model took %.4g samples a step: images/s "
                     "counts the Trainer's batch_size" % (batch, model["images_per_step"]))
    operators, op_notes = operator_rows(run, batch, peak_flops, common)
    notes += op_notes
    blocks = block_rows(run, peak_flops, notes)
    memory = []
    if run.get("memory"):
        m = run["memory"]
        memory.append(result(BENCH, "memory", part="peak memory", rss_peak_bytes=m["rss_peak_bytes"],
                             rss_growth_bytes=m["rss_growth_bytes"], child_processes=m.get("children"),
                             children_peak_bytes=m.get("children_peak_bytes"),
                             **{k: v for k, v in m.items() if k.startswith("device_peak")}, **common))
    fastest = max([r.metrics.get("of_ceiling") or 0 for r in rows + operators + blocks])
    if fastest > 1:
        notes.append("note: something ran at %.2fx the measured ceiling (%.4g GFLOP/s): the ceiling was measured with "
                     "small sizes (--ceiling quick) or while other work slowed this machine; run again on a quieter "
                     "machine" % (fastest, peak_flops / 1e9))
    if model.get("note"):
        notes.append("note: " + model["note"])
    if model.get("flops_note"):
        notes.append("note: " + model["flops_note"])
    if per_step.noisy:
        notes.append("note: the measured steps are noisy (IQR %.0f%% of the median): other work competes for the "
                     "cores, or the script's steps differ (an epoch's end); raise --steps or run on a quieter machine"
                     % (100 * per_step.iqr / per_step.median))
    waits = wait_rows(run, step_s, common)
    hybrid = hybridize_rows(run, threshold, common)
    if hybrid and hybrid[0].metrics.get("error"):
        notes.append("note: the model alone could not be timed hybridized against as it is: %s"
                     % hybrid[0].metrics["error"])
    from .script_memory import growth_rows
    return {"steps": rows, "input": [verdict], "operators": operators, "blocks": blocks, "memory": memory,
            "waits": waits, "hybridize": hybrid, "notes": notes, "growth": growth_rows(run, os.getcwd(), common)}


WAITS = "script-waits"
WAIT_SHARE = 0.05  # a wait is advice when Python is blocked there this share of the fenced step, or once a step
FENCED = ("profile's measured steps are fenced (mx.nd.waitall() at each Trainer.step), so a wait placed after "
          "trainer.step blocks little here, while in the unfenced script it blocks for the whole step's queued work")


def wait_rows(run, step_s, common):
    """The script's own waits for the engine in the measured steps (asnumpy, which asscalar, float()
    and a metric's update call; wait_to_read; waitall), one record a line of the script: calls per
    step and the time Python was blocked there per step, under profile's fences (FENCED)."""
    line = run.get("waits") or {}
    out = []
    for w in line.get("waits") or []:
        out.append(result(WAITS, "%s:%d %s" % (w["file"], w["line"], w["what"]), what=w["what"], file=w["file"],
                          line=w["line"], calls=w["calls"], calls_per_step=w["calls_per_step"],
                          blocked_s_per_step=w["seconds_per_step"],
                          blocked_share=w["seconds_per_step"] / step_s if step_s else None,
                          waits_steps=line.get("steps"), caveat=FENCED, **common))
    return out


def hybridize_rows(run, threshold, common):
    """The model alone (`hybridize_alone`), as the script runs it against hybridized static: the
    per-round speed ratio (as it is / static, > 1: static is faster) with its interval and verdict;
    or why it was not timed."""
    h = run.get("hybridize")
    if not h:
        return []
    fields = {k: h.get(k) for k in ("mode", "skipped", "error", "steps_per_round", "ctx") if h.get(k) is not None}
    fields["model_batch"] = h.get("batch_size")
    fields["kind"] = h.get("model_kind")
    fields.setdefault("model_class", h.get("model"))
    if h.get("as_is_s") and h.get("static_s"):
        iv = stats.ratio_interval(stats.paired_ratios(h["as_is_s"], h["static_s"]))
        judged = stats.verdict(iv, threshold)
        fields.update(iv.fields("ratio"), **judged.fields(), as_is_s=h["as_is_s"], static_s=h["static_s"],
                      as_is_step_s=_median(h["as_is_s"]), static_step_s=_median(h["static_s"]))
    return [result(BENCH, "hybridize alone", part="the model alone, as it is against hybridized static",
                   **fields, **common)]


def _median(values):
    values = sorted(values)
    return (values[(len(values) - 1) // 2] + values[len(values) // 2]) / 2


# --- what to change ---------------------------------------------------------------------------

ADVICE = "advice"  # the records' bench, as tune --'s recipe


def tune_command(command, lever=None):
    """The `tune --` command line that tries `lever` on the whole script (`command` as shown)."""
    return "python -m gluonperf.tune %s-- %s" % ("--levers %s " % lever if lever else "", command or "COMMAND")


# what to do about a wait for the engine every step (profile's and tune --'s advice)
READ_LESS = ("read the value every N steps, or add it up on the device (total = total + loss.sum()) and read it "
             "once an epoch, so that Python queues the next steps while the engine runs")


def hybridize_code(kind, static=True):
    """The hybridize change in code, for a model of `kind` (training.hybrid_blocks.hybrid_kind: a
    'sequential' is built as a HybridSequential first)."""
    call = "hybridize(static_alloc=True, static_shape=True)" if static else "hybridize()"
    if kind == "sequential":
        return "build the model as gluon.nn.HybridSequential() instead of nn.Sequential(), then call net.%s" % call
    return "call net.%s once the model is built" % call


def times(n):
    """'once' or '2 times' (a step)."""
    return "once" if abs(n - 1) < 1e-9 else "%.3g times" % n


def _where(file, line, cwd):
    """'train.py:42' (relative to `cwd` when it is below it)."""
    if not file:
        return None
    rel = os.path.relpath(file, cwd)
    return "%s:%d" % (file if rel.startswith("..") else rel, line)


def _code(file, line):
    import linecache
    return linecache.getline(file, line).strip() if file else ""


def advice(summary, command, cwd):
    """What to change, from what profile measured in its own run: records of kind `advice` (bench
    'advice', as tune --'s recipe: lever, change, where, measured, the ratio fields when measured,
    tune: the `tune --` command that tries it on the whole script).

    - hybridize: the model alone, as the script runs it against hybridized static
      (`hybridize_alone`): measured=True, with its ratio, interval and verdict; a measurement of the
      model alone, not of the script, so the change says to try it on the whole script;
    - each costly wait for the engine (called at least once a step, or blocking Python WAIT_SHARE of
      the step or more): its calls and the time blocked under profile's fences; measured=False: what
      removing it gains is not measured (in the unfenced script it blocks for the step's queued
      work: `tune --` times the waits as the script runs);
    - the input verdict, when input-bound: measured=False ("to try"): more DataLoader workers can make
      a script slower where the cores are busy; `tune --levers data` settles it.
    A change is never stated as a gain it has not measured."""
    out = []
    for h in summary.get("hybridize") or []:
        m = h.metrics
        if m.get("ratio") is None:
            continue
        code = hybridize_code(m.get("kind"))
        iv = "%.2fx (%d%% CI %.2f-%.2f, %d rounds)" % (m["ratio"], round(100 * m["ratio_level"]), m["ratio_ci_low"],
                                                      m["ratio_ci_high"], m["ratio_n"])
        found = {"faster": "was %s faster hybridized static" % iv,
                 "slower": "was slower hybridized static: %s" % iv,
                 "same": "was no faster hybridized static: %s, within +-%g%%" % (iv, 100 * m["threshold"]),
                 "inconclusive": "was not measurably faster hybridized static: %s" % iv}[m["verdict"]]
        as_is = "not hybridized" if m.get("mode") == "none" else "hybridized without static_alloc"
        change = ("%s: the model alone (%s, %s), one step's forward and backward on the script's batch, %s; a "
                  "measurement of the model alone, not of the script%s" % (
                      code, m.get("model_class"), as_is, found,
                      ": try it on the whole script" if m["verdict"] == "faster"
                      else "; the whole script may still differ"))
        out.append(result(ADVICE, "hybridize", lever="hybridize", change=change, where=None, measured=True,
                          measured_on="the model alone", kind=m.get("kind"), mode=m.get("mode"),
                          **{k: m.get(k) for k in ("ratio", "ratio_ci_low", "ratio_ci_high", "ratio_n", "ratio_level",
                                                   "verdict", "verdict_text")},
                          tune=tune_command(command, "hybridize")))
    for w in summary.get("waits") or []:
        m = w.metrics
        share = m.get("blocked_share") or 0.0
        if m["calls_per_step"] < 0.99 and share < WAIT_SHARE:
            continue
        change = ("to try: Python waits for the engine here (%s) %s a step, blocked %.3g ms a step (%s of the step) "
                  "under profile's fenced steps, where a wait after trainer.step blocks little; unfenced, as the "
                  "script runs, it blocks for the whole step's queued work: %s"
                  % (m["what"], times(m["calls_per_step"]), 1e3 * m["blocked_s_per_step"], _pct(share), READ_LESS))
        out.append(result(ADVICE, "wait", lever="wait", change=change, where=_where(m["file"], m["line"], cwd),
                          code=_code(m["file"], m["line"]), measured=False, what=m["what"],
                          calls_per_step=m["calls_per_step"], blocked_s_per_step=m["blocked_s_per_step"],
                          blocked_share=share, tune=tune_command(command)))
    for v in summary.get("input") or []:
        m = v.metrics
        if m.get("verdict") != "input-bound":
            continue
        loader = m.get("loader") or ""
        if loader.endswith("DataLoader"):
            change = ("to try: %s (%s of each step waits for data); not measured here: on a CPU context the workers "
                      "take cores from the step, and where the cores are busy they can make the script slower"
                      % ("give the DataLoader num_workers" if not m.get("loader_workers")
                         else "more DataLoader num_workers than %d" % m["loader_workers"], _pct(m["share"])))
            tune = tune_command(command, "data")
        else:
            change = ("to try: prepare batches ahead (%s); not measured here" % (
                "more preprocess_threads, or a cheaper decode" if loader in ("MXDataIter", "ImageRecordIter")
                else "mx.io.PrefetchingIter, or a DataLoader with num_workers"))
            tune = None
        out.append(result(ADVICE, "data", lever="data", change=change, where=None, measured=False,
                          share=m["share"], share_ci_low=m.get("share_ci_low"), share_ci_high=m.get("share_ci_high"),
                          tune=tune))
    from .script_memory import growth_advice
    return out + growth_advice(summary)


def advice_lines(records):
    """The section `profile --` ends with: the changes measured faster, numbered (only those: a
    person reads a numbered line as an instruction); what was measured and was not faster, and
    what is only to try, each with the `tune --` line that settles it on the whole script; the memory
    findings (script_memory: memory that grows, nothing measured faster) unnumbered after them."""
    from .script_memory import finding_lines
    findings = finding_lines([r for r in records if r.metrics.get("lever") == "memory"])
    records = [r for r in records if r.metrics.get("lever") != "memory"]
    faster = [r for r in records if r.metrics["measured"] and r.metrics.get("verdict") == "faster"]
    tried = [r for r in records if r.metrics["measured"] and r.metrics.get("verdict") != "faster"]
    to_try = [r for r in records if not r.metrics["measured"]]
    if faster:
        lines = ["what to change (measured faster in this run):"]
    else:
        lines = ["what to change: nothing this run measured was faster"]
    for i, r in enumerate(faster, 1):
        m = r.metrics
        mark = "measured on %s" % m["measured_on"] if m.get("measured_on") else "measured"
        lines.append("%d. [%s] %s" % (i, mark, _said(m)))
        if m.get("tune"):
            lines.append("   tries it on the whole script: %s" % m["tune"])
    if tried:
        lines.append("measured, not faster (not a change to make; the tune -- line settles it on the whole script):")
        for r in tried:
            lines.append("- %s" % _said(r.metrics))
            if r.metrics.get("tune"):
                lines.append("  %s" % r.metrics["tune"])
    if to_try:
        lines.append("to try (not measured here):")
        for r in to_try:
            m = r.metrics
            lines.append("- %s" % _said(m))
            if m.get("tune"):
                lines.append("  %s: %s" % ("times this wait unfenced, as the script runs" if m["lever"] == "wait"
                                           else "measures it on the whole script", m["tune"]))
    if not records:
        lines = ["what to change: nothing this run measured calls for a change (no costly wait for the engine, not "
                 "input-bound, no model that hybridize could speed up)"]
    return lines + findings


def _said(m):
    """An advice record's line: where, the code, the change (without its 'to try: ')."""
    change = m["change"][len("to try: "):] if m["change"].startswith("to try: ") else m["change"]
    return "%s%s%s" % ("%s: " % m["where"] if m.get("where") else "", "`%s`: " % m["code"] if m.get("code") else "",
                       change)


def input_verdict(groups, slowdown, share, low, high, threshold, run, batch, common):
    """Is the step waiting for its data? `stats.verdict` on the slowdown the waits cause
    (t(step) / t(step without the waits), per round): input-bound when its interval excludes 1
    and it is past the threshold, not input-bound when the whole interval lies within it."""
    judged = stats.verdict(slowdown, threshold, words=("input-bound", "not input-bound"), what="rounds",
                           settle="more steps (--steps) would settle it")
    word = {"same": "not input-bound"}.get(judged.word, judged.word)
    step_rate = _rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "step_s") - _sum(g, "wait_s"))
    loader_rate = _rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "wait_s"))
    loaders = (run.get("loaders") or {}).get("loaders") or []
    main = max(loaders, key=lambda l: l["wait_s"]) if loaders else None
    ci = "95%% CI %s-%s, %d rounds of %s" % (_pct(low), _pct(high), slowdown.n,
                                                    _steps_per_round(groups))
    rates = []
    if step_rate:
        rates.append("the step alone consumes %s images/s" % _images(step_rate.estimate))
    if main is None:
        rates.append("no data loader was iterated in the measured steps")
    elif main["prefetches"]:
        rates.append("the loader (%s, prefetching%s) kept the loop at %s images/s" % (
            main["loader"], " with %d workers" % main["workers"] if main.get("workers") else "",
            _images(_rate(groups, lambda g: _sum(g, "batch_size"), lambda g: _sum(g, "step_s")).estimate)))
    elif loader_rate:
        rates.append("the loader (%s in the script's own thread) delivers %s images/s" % (
            main["loader"], _images(loader_rate.estimate)))
    advice = ""
    tune = tune_command(common.get("command"), "data")
    if word == "input-bound" and main is not None:  # to try, never a gain: workers take cores from the step
        if main["loader"].endswith("DataLoader") and not main.get("workers"):
            advice = ("; to try: give the DataLoader num_workers, so that batches are prepared while the step runs "
                      "(not measured here: where the cores are busy it can make the script slower; %s measures it)"
                      % tune)
        elif main["loader"].endswith("DataLoader"):
            advice = ("; to try: more num_workers (on CPU contexts only while cores are free; %s measures it), or a "
                      "dataset that costs less per sample (decoded once, RecordIO)" % tune)
        elif main["loader"] in ("MXDataIter", "ImageRecordIter"):
            advice = "; to try: more preprocess_threads, or a cheaper decode (smaller images stored)"
        else:
            advice = "; to try: prepare batches ahead (mx.io.PrefetchingIter, or a DataLoader with num_workers)"
    if word == "input-bound":
        finding = "input-bound: %s of each step waits for data (%s); %s%s" % (_pct(share), ci, "; ".join(rates), advice)
    elif word == "not input-bound":
        finding = "not input-bound: %s of each step waits for data (%s), within +-%g%%; %s" % (
            _pct(share), ci, 100 * threshold, "; ".join(rates))
    else:
        finding = "inconclusive: %s of each step may wait for data (%s); %s; %s" % (
            _pct(share), ci, judged.text.split("; ", 1)[-1], "; ".join(rates))
    fields = dict(share=share, share_ci_low=low, share_ci_high=high, share_n=slowdown.n, share_level=slowdown.level,
                  **slowdown.fields("slowdown"), **judged.fields(), input_bound=word == "input-bound",
                  finding=finding, loader=main["loader"] if main else None,
                  loader_workers=main.get("workers") if main else None,
                  loader_prefetches=main["prefetches"] if main else None)
    fields["verdict"] = word
    if step_rate:
        fields.update(step_rate.fields("step_images_per_s"))
    if loader_rate and main is not None and not main["prefetches"]:
        fields.update(loader_rate.fields("loader_images_per_s"))
    return result(BENCH, "input verdict", part="input verdict", **fields, **common)


def _steps_per_round(groups):
    sizes = sorted({len(g) for g in groups})
    return ("1 step" if sizes == [1] else "%d steps" % sizes[0] if len(sizes) == 1
            else "%d-%d steps" % (sizes[0], sizes[-1]))


def _images(rate):
    """'6432' or '93,630' images/s: whole numbers from 10,000 up, not 9.363e+04."""
    return "{:,.0f}".format(rate) if rate >= 1e4 else "%.4g" % rate


def operator_rows(run, batch, peak_flops, common):
    """The top operators of the profiled steps per step (time, share of the profiled step,
    calls, GFLOP/s and fraction of the ceiling where the model's FLOPs count them), and the
    time no operator ran; and notes."""
    from .step_time import GAPS, WAITING, phase, with_ceiling
    ops = run.get("operators")
    notes = []
    if not ops or not ops.get("ops"):
        if ops and ops.get("note"):
            notes.append("note: no operator table: %s" % ops["note"])
        return [], notes
    n, step = ops["steps"], ops["step_s"]
    flops = run.get("model", {}).get("flops")
    count = flop_count(flops) if flops else None
    extra = dict(common, profiled_steps=n, profiled_step_s=step)
    rows = []
    bulk = any("," in name for name in ops["ops"])
    for name, (calls, total) in ops["ops"].items():
        per_image = count.op_flops(name) if count and not bulk else None
        rows.append(result(OPERATORS, name, op=name, phase=phase(name), calls_per_step=calls / n, time_s=total / n,
                           share=total / n / step, flops=per_image * batch if per_image and batch else None, **extra))
    for ctx, seconds in (ops.get("context_waits") or {}).items():
        rows.append(result(OPERATORS, WAITING % ctx, op=WAITING % ctx, phase="wait", time_s=seconds / n,
                           share=seconds / n / step, **extra))
    rows.sort(key=lambda r: -r.metrics["time_s"])
    rows = rows[:TOP_OPERATORS]
    busy = ops.get("busy_s")
    if busy is not None:
        idle = max(0.0, step - busy / n)
        rows.append(result(OPERATORS, GAPS, op=GAPS, phase="-", time_s=idle, share=idle / step, **extra))
    if peak_flops:  # an operator's time is summed over the contexts: device-seconds, against one device's peak
        rows = with_ceiling(rows, peak_flops)
    if any(r.metrics["share"] > 1 for r in rows):
        notes.append("note: an operator above 100% of the step ran on threads of its own, overlapping the others and "
                     "the steps around it (a dist kvstore's push and pull wait for the servers)")
    if bulk:
        notes.append("note: a hybridized graph runs in bulk segments, which MXNet's profiler names by the operators "
                     "they join, so no operator row gets FLOPs (a layer's work may sit in a segment); "
                     "profile --split-bulk runs the script with bulk execution off, which splits them (and changes "
                     "how the script runs)")
    return rows, notes


def block_rows(run, peak_flops, notes):
    """The Blocks' records (experiments.block_profile), against one context's ceiling."""
    from ..records import Result
    from .block_profile import with_ceiling
    blocks = run.get("blocks")
    if not blocks:
        return []
    if blocks.get("error"):
        notes.append("note: no Blocks table: %s" % blocks["error"])
        return []
    rows = [Result(r.pop("bench"), r.pop("name"), r) for r in (dict(r) for r in blocks["records"])]
    return with_ceiling(rows, peak_flops) if peak_flops else rows


def needs_ceiling(run):
    """Whether any figure of the run is held against the ceiling (the model's FLOPs are known)."""
    return bool((run.get("model") or {}).get("flops"))


def one_line(run):
    """What was measured so far, in one line (for a script that failed)."""
    steps = [s for s in run["steps"] if s["phase"] in ("active", "profiled")]
    times = sorted(s["step_s"] for s in steps)
    total = sum(s["step_s"] for s in steps)
    waits = sum(s["wait_s"] for s in steps)
    return "measured so far: %d step%s, median %.4g ms a step, %s of it waiting for data" % (
        len(steps), "s" if len(steps) != 1 else "", 1e3 * times[len(times) // 2], _pct(waits / total))


# --- the tables ---------------------------------------------------------------------------

STEP_COLUMNS = ["part", "time_s", "share", "share_ci", "images_per_s", "images_per_s_ci", "n"]
OPERATOR_COLUMNS = ["op", "phase", "calls_per_step", "time_s", "share", "gflop_per_s", "of_ceiling"]
BLOCK_COLUMNS = ["tree", "parameters", "forward_gflop", "training_gflop", "forward_s", "backward_s", "step_share",
                 "gflop_per_s", "of_ceiling", "note"]
MEMORY_COLUMNS = ["part", "rss_peak_bytes", "rss_growth_bytes", "child_processes", "children_peak_bytes"]


def _ci(m, key, pct):
    low, high = m.get(key + "_ci_low"), m.get(key + "_ci_high")
    if low is None or high is None:
        return None
    if not math.isfinite(high):
        return "unknown"
    return "%s-%s" % (_pct(low), _pct(high)) if pct else "%s-%s" % (_images(low), _images(high))


def _shown(records):
    """The step rows with their intervals as one cell each."""
    out = []
    for r in records:
        m = dict(r.metrics)
        m["share_ci"] = _ci(m, "share", True)
        m["images_per_s_ci"] = _ci(m, "images_per_s", False)
        m["n"] = m.get("share_n") or m.get("images_per_s_n")
        out.append(result(r.bench, r.name, **m))
    return out


def sections(summary, warmup=None, what="the script"):
    """(title, results, columns) of each table of a summary, in the order they are printed."""
    step = summary["steps"][0].metrics
    out = [("%s: %d steps measured%s, batch %s on %s; each fenced by mx.nd.waitall() (the step: from the end of "
            "one Trainer.step to the end of the next; waiting for data: inside the data loader's next(); update: "
            "Trainer.step); 95%% intervals over %d rounds of consecutive steps%s"
            % (what, step["steps"], " after %d warm-up" % warmup if warmup is not None else "", step["batch_size"],
               step["contexts"] or "?", step["rounds"], "; the script ended before all were measured (partial)"
               if step["partial"] else ""), _shown(summary["steps"]), STEP_COLUMNS)]
    ops = summary["operators"]
    if ops:
        m = ops[0].metrics
        out.append(("operators [MXNet's profiler, %d more steps]: per step; share of the profiled step (%.4g ms); "
                    "top %d" % (m["profiled_steps"], 1e3 * m["profiled_step_s"], TOP_OPERATORS), ops,
                    OPERATOR_COLUMNS))
    blocks = summary["blocks"]
    if blocks:
        m = blocks[0].metrics
        check = blocks[-1].metrics
        out.append(("Blocks of the model the Trainer updates, each timed alone on the inputs it got in the script's "
                    "last measured batch (%d on %s), %d interleaved rounds; forward under autograd.record, backward "
                    "from a gradient of ones (the script's loss is not known); %s"
                    % (m.get("batch_size") or 0, m.get("ctx"), m.get("rounds") or 0, check.get("finding", "")),
                    blocks, BLOCK_COLUMNS))
    if summary["memory"]:
        out.append(("memory: peak resident memory of %s's process over the measured steps; child_processes: its "
                    "child processes (a DataLoader's workers), the most at once; children_peak_bytes: their memory "
                    "at its peak, as proportional set size (the pages they share with %s counted by their share)"
                    % ("the script" if what != "the loop" else "this", "the script" if what != "the loop" else "it"),
                    summary["memory"], MEMORY_COLUMNS))
    return out


def report(prof, threshold=stats.THRESHOLD):
    """The tables `profile -- python train.py` prints, for a StepProfiler of one's own loop
    (no ceiling: GFLOP/s are not held against one), and the input verdict's sentence."""
    summary = summarise(run_of(prof), threshold=threshold)
    text = "\n\n".join(format_table(results, columns, title) for title, results, columns in sections(
        summary, what="the loop"))
    return "\n".join([text, "", summary["input"][0].metrics["finding"]] + summary["notes"])

"""profile --'s driver: what runs inside the user's script (`python -m gluonperf.profile --
python train.py`); it never spawns a process.

`install`, called by gluonperf/workers/script_site/sitecustomize.py once the script has
imported MXNet (wire.PROFILE), hooks a `measure.steps.StepProfiler` to `runtime.script_hooks`
with the settings the command put in the environment: --warmup steps, --steps fenced steps,
--operator-steps under MXNet's profiler, then once the model (script/probe.py) and the
script's own waits for the engine, by line; the script then runs on (or stops, with `stop`),
its memory followed to its end (script/memory.py). Everything goes through the wire
(`wire.Writer`: `$GLUONPERF_SCRIPT_OUT/<pid>.jsonl`). `run_of(prof)`: the same records for a
StepProfiler of one's own loop, in this process. How it measures: docs/your_script.md.
"""
import atexit
import os
import sys

from . import probe, wire
from .probe import part


def install():
    """Hook the script this process runs (MXNet is imported): called once by the
    sitecustomize of `profile --`, with the settings the command put in the environment."""
    return Driver(wire.Writer(), wire.settings())


class Driver:
    """The StepProfiler of a script, and what is written for the command."""

    def __init__(self, writer, settings):
        from ..measure.steps import Listener, StepProfiler
        from ..runtime import script_hooks
        self.settings = settings
        self.write = writer.write
        self.calls = {}       # id(block) -> [block, args of its last call on the first context, images]
        self.first_ctx = None
        self.described = False
        self.prof = StepProfiler(warmup=settings.get("warmup", 3), active=settings.get("steps", 20),
                                 profiled=settings.get("operator_steps", 5), trace_path=settings.get("trace"),
                                 hooks=False, listener=Listener(self.step, self.block, self.ready, trainer_steps=True))
        from .memory import Follower
        self.follower = Follower(self.prof, self.write)  # memory at every step, to the script's end
        script_hooks.install(self.follower, waits=True)  # the script's own waits for the engine too
        self.prof.start()
        self.write(kind="start", argv=sys.argv)
        atexit.register(self.at_exit)

    def step(self, record):
        if not self.described:
            self.described = True
            self.write(kind="process", **probe.process_of(self.prof))
            # What `ready` needs, imported now (between two steps, outside their times): a module first
            # imported in an atexit handler after Ctrl-C turns the script's exit status from 130 into 1.
            from ..training import hybrid_blocks  # noqa: F401
            from ..measure import blocks, flops, operators  # noqa: F401
        self.write(kind="step", **record)

    def block(self, block, args):
        arrays = probe.arrays_of(args)
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
        model = part(lambda: self.model(prof, len(done) + sum(s["phase"] == "profiled" for s in prof.steps)))
        operators = part(lambda: probe.operators_of(prof))
        if operators is not None:
            self.write(kind="operators", **(operators if isinstance(operators, dict) else {"note": operators}))
        if isinstance(model, dict) and model.get("block") is not None and not partial and self.settings.get("depth"):
            blocks = part(lambda: self.blocks(model))
            self.write(kind="blocks", **(blocks if isinstance(blocks, dict) else {"error": blocks}))
        if isinstance(model, dict) and model.get("block") is not None:
            why = ("the script ended before its measured steps were done" if partial
                   else "--depth 0" if not self.settings.get("depth") else None)
            if why:
                self.write(kind="hybridize", skipped=why)
            else:
                timed = part(lambda: probe.hybridize_alone(model["block"], model["args"]))
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
        found, args, images, note = probe.find_model(prof.trainer, self.calls.values(), steps)
        line = {"note": note}
        if found is not None:
            line.update(probe.describe_model(found, args, images))
            flops = part(lambda: probe.flops_of(found, args))
            if isinstance(flops, dict):
                line["flops"] = flops
            elif flops:
                line["flops_note"] = flops
        self.write(kind="model", **line)
        line["block"], line["args"] = found, args
        return line

    def blocks(self, model):
        from ..measure.blocks import block_profile
        from ..measure.timing import Timing
        block, args = model["block"], model["args"]
        arrays = probe.arrays_of(args)
        saved = probe.snapshot(block)
        try:
            rows = block_profile(block, list(args), arrays[0].context, depth=self.settings["depth"],
                                 timing=Timing(repeat=max(2, min(10, self.settings.get("steps", 10))), warmup=1))
        finally:
            probe.restore(saved)
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


def run_of(prof):
    """A run (as `wire.read_runs` gives them) of a StepProfiler in this process."""
    from ..runtime.contexts import describe
    run = {"pid": os.getpid(), "steps": list(prof.steps), "errors": [],
           "process": {"contexts": describe(prof.contexts), "rank": None},
           "loaders": {"loaders": list(prof.loaders.values())},
           "end": {"partial": prof.phase != "done"}}
    if prof.memory is not None:
        run["memory"] = dict(prof.memory.summary(), rss_before_bytes=prof.memory.rss_before)
    operators = probe.operators_of(prof)
    if operators:
        run["operators"] = operators
    return run


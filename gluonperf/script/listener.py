"""tune --'s listener: what runs inside each run of the user's script (`python -m gluonperf.tune
-- python train.py`); it never spawns a process.

`install`, called by the hooks' sitecustomize once the script has imported MXNet (wire.TUNE),
makes the candidate's changes that can be made from outside (hybridize, a DataLoader's workers,
bfloat16 AMP), lets --warmup `Trainer.step` calls run untouched, times the next --steps as the
script runs them (no fence between them: `mx.nd.waitall()` before the first and after the last
only), counts the script's own waits for the engine by line, and stops the process (exit
status 0). A probe run also describes the script (script/probe.py) and runs PROFILED_STEPS more
steps under MXNet's profiler. Everything goes through the wire (`wire.Writer`): a `rate` record
(images/s, the data wait by runs of steps, the waits by line), `probe`, `operators`, `applied`,
`exit`. What a run changes and how it is timed: docs/faster_script.md.
"""
import os
import sys
import time

from . import wire
from .probe import arrays_of, find_model, part
from ..training.hybrid_blocks import hybrid_kind, hybrid_mode, hybridize

PROFILED_STEPS = 5   # the probe's steps under MXNet's profiler, after its timed ones


def install():
    """Apply the candidate's changes to the script this process runs and time its steps (MXNet
    is imported): called once by the sitecustomize of `tune --`."""
    return Listener(wire.Writer(), wire.settings())


class Listener:
    """The listener of `runtime.script_hooks` in one run of the script (see the module's docstring)."""

    def __init__(self, writer, settings):
        from ..runtime import script_hooks
        self.pid, self.writer = os.getpid(), writer
        self.write = writer.write
        self.warmup, self.steps = int(settings.get("warmup", 5)), int(settings.get("steps", 20))
        self.min_seconds = float(settings.get("min_seconds", 0))  # the probe's: time at least this long
        self.window = settings.get("window")  # the probe's: "startup" to time at least as long as start-up took
        self.done = False
        self.probe, self.levers = bool(settings.get("probe")), settings.get("levers") or {}
        self.trainer, self.index, self.start, self.images = None, 0, None, 0
        self.data_s = 0.0      # seconds inside the data loaders' next() in the timed steps
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
                found = part(self.stop_profiler)
                self.write(kind="operators", **(found if isinstance(found, dict) else {"error": found}))
                raise SystemExit(0)
            return
        if self.start is not None and not self.done:
            self.images += batch_size
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
                self.profiled = (part(self.start_profiler), self.index + PROFILED_STEPS)
                return
            raise SystemExit(0)  # measured: the run ends here (its DataLoader workers with it)

    def data_wait(self, seconds, loader):
        if self.start is not None and not self.done:
            self.data_s += seconds

    def start_profiler(self):
        from ..measure.trace import Trace
        trace = Trace(os.path.join(self.writer.folder, "%d-trace.json" % self.pid), aggregate_stats=True,
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
            arrays = arrays_of(args)
            seen = self.calls.setdefault(id(block), [block, None, 0])
            seen[1] = args
            seen[2] += arrays[0].shape[0] if arrays and arrays[0].shape else 0
        if self.levers.get("hybridize") and self.applied is None:
            wanted = {id(p) for p in self.trainer._params}
            have = {id(p) for p in block.collect_params().values()}
            if wanted and len(wanted & have) * 2 > len(wanted):
                self.applied = part(lambda: hybridize(block, self.levers["hybridize"]))
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
                   data_s=self.data_s,
                   waits=[{"what": w, "file": f, "line": l, "calls_per_step": c / steps, "seconds_per_step": s / steps}
                          for (w, f, l), (c, s) in sorted(self.waits.items(), key=lambda kv: -kv[1][1])])
        if self.probe:
            found = part(self.describe)
            self.write(kind="probe", **(found if isinstance(found, dict) else {"error": found}))
        self.writer.flush()

    def describe(self):
        """What the probe found: the Trainer, the model and its kind, the DataLoaders."""
        from ..runtime.contexts import describe
        from ..measure.steps import trainer_contexts
        trainer = self.trainer
        kv = getattr(trainer, "_kvstore", None) or getattr(trainer, "_kvstore_params", {}).get("kvstore")
        model, _, _, note = find_model(trainer, self.calls.values(), max(1, self.index - 1))
        out = {"contexts": describe(trainer_contexts(trainer)), "kvstore": getattr(kv, "type", kv if isinstance(kv, str)
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
            found = part(self.stop_profiler)
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


"""The steps of a training loop, measured from inside it: torch.profiler's shape, for Gluon.

`StepProfiler`: `prof.step(batch_size)` ends each step; `report(prof)` (gluonperf.script.tables)
prints the tables `profile -- python train.py` prints. Steps go through phases, counted from the
first: `wait` steps run untouched, `warmup` steps run fenced and are not kept, `active` steps are
timed (the DataLoader's next() as waiting for data, the update alone), then `profiled` steps run
under MXNet's profiler (which slows every operator call, so the timed steps run without it).
The one thing to know: every kept step is fenced (`mx.nd.waitall()`), so its time is what the
step took, not how fast Python queued it. `profile -- python train.py` drives this class from
its hooks (gluonperf.runtime.script_hooks, `trainer_steps=True`). Why, and an example:
docs/your_script.md.
"""
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

import mxnet as mx

from ..runtime import script_hooks
from .memory import MemorySampler
from .trace import Trace, aggregate_stats

PHASES = ("wait", "warmup", "active", "profiled", "done")
MEASURED = ("active", "profiled")


def _count(name, value):
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("%s must be a whole number of steps, 0 or more; got %r" % (name, value))
    return value


@dataclass(frozen=True)
class Listener:
    """Who follows a StepProfiler from outside the loop (`profile --`'s driver): `on_step(record)`
    after each kept step, `on_block(block, args)` for each outermost Block call in the kept steps,
    `on_ready(profiler)` once the profiled steps are done (or at `close()` if they never were);
    `trainer_steps`: a `Trainer.step` (of the first Trainer that steps) ends a step, instead of
    `step()`."""
    on_step: Optional[Callable] = None
    on_block: Optional[Callable] = None
    on_ready: Optional[Callable] = None
    trainer_steps: bool = False


class StepProfiler:
    """Measure the steps of a loop (see the module's docstring).

    `wait`, `warmup`, `active`, `profiled`: steps in each phase. `trace_path`: keep the
    profiled steps' Chrome trace there. `listener`: a `Listener`, its callbacks and whether
    `Trainer.step` ends a step. `hooks`: put the hooks in at `start()` (False: the caller has;
    `profile --` does).

    After the run: `steps` (a dict per kept step: index, phase, step_s, wait_s, update_s,
    batch_size, batches), `operators` (MXNet's aggregate statistics of the profiled steps),
    `trace` (their Chrome trace, loaded), `memory` (a MemoryUsage of the kept steps),
    `contexts` (of the Trainer's parameters), `loaders` (what the waits were spent in), `waits`
    ((what, file, line) -> [calls, seconds] of the loop's own waits for the engine in the active
    steps, when the hooks report them)."""

    def __init__(self, wait=0, warmup=3, active=20, profiled=5, trace_path=None, memory=True, hooks=True,
                 listener=Listener()):
        self.bounds = []
        total = 0
        for name, value in (("wait", wait), ("warmup", warmup), ("active", active), ("profiled", profiled)):
            total += _count(name, value)
            self.bounds.append(total)
        if active < 1:
            raise ValueError("active must be at least 1 step; got %r" % active)
        self.trace_path, self.trainer_steps, self.hooks = trace_path, listener.trainer_steps, hooks
        self.on_step, self.on_block, self.on_ready = listener.on_step, listener.on_block, listener.on_ready
        self.sample_memory = memory
        self.index = 0                 # the step running now, counted from 0
        self.steps, self.operators, self.trace, self.memory = [], None, None, None
        self.contexts, self.trainer, self.loaders = [], None, {}
        self.waits = {}                # (what, file, line) -> [calls, seconds]: the loop's waits for the engine
        self.operator_note = None      # why there is no operator table, when there is none
        self.finished = False
        self._last_end = None
        self._wait = self._update = 0.0
        self._batches = 0
        self._update_start = None
        self._sampler = self._profile = self._tmp = None
        self._thread = None

    # --- phases ---------------------------------------------------------------------

    def phase_of(self, index):
        return PHASES[next((i for i, bound in enumerate(self.bounds) if index < bound), len(self.bounds))]

    @property
    def phase(self):
        """The phase of the step running now."""
        return self.phase_of(self.index)

    def _fenced(self):
        return self.phase in ("warmup",) + MEASURED

    # --- what the loop (or the hooks) call -------------------------------------------

    def start(self):
        if self.hooks:
            script_hooks.install(self)
        self._last_end = time.perf_counter()
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()
        return False

    def step(self, batch_size=None):
        """The end of a step of `batch_size` images (for images/s; None if not known)."""
        phase = self.phase
        if phase == "done":
            return
        if phase in ("warmup",) + MEASURED:
            mx.nd.waitall()
        now = time.perf_counter()
        if phase in MEASURED and self._last_end is not None:
            record = {"index": self.index, "phase": phase, "step_s": now - self._last_end, "wait_s": self._wait,
                      "update_s": self._update if self._update_start is not None else None,
                      "batch_size": batch_size, "batches": self._batches}
            self.steps.append(record)
            if self.on_step:
                self.on_step(record)
        self.index += 1
        self._wait = self._update = 0.0
        self._batches = 0
        self._update_start = None
        self._enter(self.phase, phase)
        self._last_end = time.perf_counter()  # what was done between the phases stays out of the next step

    def _enter(self, phase, before):
        """Start and stop what a phase needs, between two steps."""
        if phase == before:
            return
        if phase in MEASURED and before not in MEASURED:
            if self.sample_memory:
                self._sampler = MemorySampler(self.contexts, children=True).start()  # with DataLoader workers
            if self.on_block is not None:
                script_hooks.watch_blocks(True)
        if before == "profiled":
            self._stop_profiler()
        if phase == "profiled":
            self._start_profiler()
        if phase == "done":
            self._finish()

    def _start_profiler(self):
        try:
            self._tmp = tempfile.mkdtemp(prefix="gluonperf-steps-")
            self._profile = Trace(self.trace_path or os.path.join(self._tmp, "trace.json"), aggregate_stats=True,
                                  profile_symbolic=True, profile_imperative=True)
            self._profile.__enter__()
        except Exception as e:  # noqa: BLE001 (a profiler the script configured and dumped itself)
            self._profile = None
            self.operator_note = "MXNet's profiler could not be started: %s" % e

    def _stop_profiler(self):
        if self._profile is None:
            return
        profile, self._profile = self._profile, None
        try:
            profile.__exit__(None, None, None)
            self.operators = aggregate_stats()
            self.trace = profile.dump()
        except Exception as e:  # noqa: BLE001
            self.operator_note = "MXNet's profiler failed: %s" % e
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def _finish(self):
        if self.finished:
            return
        self.finished = True
        if self._sampler is not None:
            self.memory = self._sampler.stop()
            self._sampler = None
        if self.hooks:
            script_hooks.remove()
        else:
            script_hooks.watch_blocks(False)
        if self.on_ready:
            self.on_ready(self)

    def close(self):
        """End early (the loop ended, or stopped): what was measured so far is kept, and the
        profiler's statistics of the profiled steps done so far."""
        if self.finished:
            return
        if self._profile is not None:
            self._stop_profiler()
        self._finish()

    # --- the hooks' listener (gluonperf.runtime.script_hooks) --------------------------

    def before_update(self, trainer, batch_size):
        if self._thread is None:
            self._thread = threading.get_ident()
        if self.trainer is None:
            self.trainer = trainer
            self.contexts = trainer_contexts(trainer)
        if self._fenced():
            mx.nd.waitall()  # forward and backward end here: the update is timed alone
            self._update_start = time.perf_counter()

    def after_update(self, trainer, batch_size):
        if self._update_start is not None and self._fenced():
            mx.nd.waitall()
            self._update += time.perf_counter() - self._update_start
        if self.trainer_steps and trainer is self.trainer:
            self.step(batch_size)

    def data_wait(self, seconds, loader):
        if self._thread not in (None, threading.get_ident()) or self.phase not in MEASURED:
            return
        self._wait += seconds
        self._batches += 1
        key = id(loader)
        if key not in self.loaders:
            self.loaders[key] = describe_loader(loader)
        self.loaders[key]["batches"] += 1
        self.loaders[key]["wait_s"] += seconds

    def engine_wait(self, seconds, what, file, line):
        """A wait of the loop's own code for MXNet's engine (`script_hooks.install(..., waits=True)`),
        counted in the active steps only (the profiled ones run under MXNet's profiler)."""
        if self._thread not in (None, threading.get_ident()) or self.phase != "active":
            return
        seen = self.waits.setdefault((what, file, line), [0, 0.0])
        seen[0] += 1
        seen[1] += seconds

    def block_called(self, block, args):
        if self.on_block is not None and self.phase in MEASURED:
            self.on_block(block, args)


def trainer_contexts(trainer):
    """The contexts of a Trainer's parameters (those of its first parameter)."""
    for p in getattr(trainer, "_params", []):
        try:
            return list(p.list_ctx())
        except Exception:  # noqa: BLE001 (not initialised yet)
            continue
    return []


def describe_loader(loader):
    """What a data loader is, as plain data: its class, and its worker processes (or threads)
    when it prefetches (a DataLoader's num_workers, an ImageRecordIter's threads)."""
    workers = getattr(loader, "_num_workers", None)
    kind = type(loader).__name__
    prefetch = bool(workers) or kind in ("ImageRecordIter", "MXDataIter", "PrefetchingIter") or \
        getattr(loader, "_thread_pool", False)
    return {"loader": kind, "workers": workers, "prefetches": bool(prefetch), "batches": 0, "wait_s": 0.0}

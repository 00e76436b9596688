"""Memory over the whole run of a script `profile --` runs: is it leaking, and from where?

Inside the script (`Follower`, the listener of runtime.script_hooks that profile's driver
installs): every `Trainer.step` of the script's first Trainer, to the script's end, samples
its resident memory (and each GPU context's: measure.memory.StepMemory). While profile
measures, the other hooks go to its StepProfiler; once it is done (`follow`), only the
Trainer's hooks stay in. Then, once: the script runs UNFENCED_STEPS steps as it was written,
the time `mx.nd.waitall()` takes is how much work Python had queued ahead of the engine; then
for WINDOW_STEPS steps tracemalloc traces Python's allocations and the model's input shapes
are noted (measure.held); at the window's end, the NDArrays made in it that are still alive,
by the script's line that made them. At exit, the samples go to the command (one line of
`$GLUONPERF_SCRIPT_OUT/<pid>.jsonl`); the steps up to the window's end are warm-up.

In the command (`growth_rows`): measure.growth's verdict on the samples, as records (bench
'growth'), with where the memory comes from when the window could tell; `growth_advice`: when
memory grows, a finding for profile's "what to change" (an advice record, lever 'memory',
measured False: nothing was measured faster), with the line to look at.
"""
import os

ADVICE = "advice"      # the bench of advice records (script_profile's and tune --'s recipe)
UNFENCED_STEPS = 10    # steps the script runs as written before the work queued ahead is timed
WINDOW_STEPS = 20      # steps traced for where held arrays are made
AHEAD_STEPS = 2        # Python ahead of the engine by this many steps' work, or more, is worth naming


# --- inside the script ------------------------------------------------------------------

def _ignore(*args, **kwargs):
    return None


class Follower:
    """The hooks' listener over the whole run (see the module's docstring). `inner`: profile's
    StepProfiler, given every hook until `follow` is called; `write(**line)`: the driver's."""

    def __init__(self, inner, write):
        from ..measure.memory import StepMemory
        self.inner, self.write = inner, write
        self.trainer, self.step = None, 0
        self.memory = StepMemory()
        self.model = self.step_s = None
        self.window_at = None   # the step at which the window (after UNFENCED_STEPS) starts
        self.window = self.shapes = None
        self.window_start = self.window_end = None
        self.drain_s = None

    def __getattr__(self, name):  # data waits, engine waits, loaders, Blocks: profile's while it measures
        inner = self.__dict__.get("inner")
        return getattr(inner, name) if inner is not None else _ignore

    def before_update(self, trainer, batch_size):
        if self.trainer is None:
            from ..measure.steps import _contexts
            self.trainer = trainer
            self.memory.add_contexts(_contexts(trainer))
        if self.inner is not None:
            self.inner.before_update(trainer, batch_size)

    def after_update(self, trainer, batch_size):
        if self.inner is not None:
            self.inner.after_update(trainer, batch_size)  # its last measured step calls the driver's ready
        if trainer is not self.trainer:
            return
        self.step += 1
        self.memory.sample(self.step)
        if self.window_at is not None and self.step >= self.window_at:
            self._window()

    def block_called(self, block, args):
        if self.inner is not None:
            self.inner.block_called(block, args)
        elif self.shapes is not None and block is self.model:
            self.shapes.seen(args)

    def follow(self, model=None, step_s=None):
        """profile's steps are done: from now on the Trainer's hooks alone, for the memory samples."""
        from ..runtime import script_hooks
        self.inner, self.model, self.step_s = None, model, step_s
        self.window_at = self.step + UNFENCED_STEPS
        script_hooks.remove()
        script_hooks.install(self, data=False)

    def _window(self):
        from ..measure import held
        from ..runtime import script_hooks
        if self.window is None:
            self.drain_s = held.drain_seconds()
            self.window, self.shapes = held.HeldArrays(), held.InputShapes()
            self.window_start = self.step
            if not self.window.start():
                self.window_at, self.window_end = None, self.step
                self.write(kind="held", start=self.step, steps=0, drain_s=self.drain_s, step_s=self.step_s,
                           note="the script traces memory itself (tracemalloc): the window was left out")
                return
            if self.model is not None:
                script_hooks.watch_blocks(True)
        elif self.step - self.window_start >= WINDOW_STEPS:
            self.close_window()

    def close_window(self):
        """End the window (at its last step, or at exit): what it found, as a line."""
        if self.window is None or self.window_end is not None:
            return
        from ..runtime import script_hooks
        steps = self.step - self.window_start
        lines = self.window.stop(steps)
        script_hooks.watch_blocks(False)
        self.window_at, self.window_end = None, self.step
        self.write(kind="held", start=self.window_start, steps=steps, lines=lines, shapes=self.shapes.summary(),
                   drain_s=self.drain_s, step_s=self.step_s)

    def at_exit(self):
        """The samples, for the command (the steps up to the window's end are warm-up); then the
        hooks go and nothing of the script's is held: a Trainer kept alive past MXNet's own exit
        (by this listener, in script_hooks' module) aborted a dist_sync worker ("terminate called
        without an active exception": its kvstore was freed after MXNet had shut down)."""
        from ..runtime import script_hooks
        try:
            self.close_window()
            self.write(kind="memory_steps", steps_run=self.step, warmup=self.window_end or self.step,
                       memory=self.memory.plain())
        finally:
            script_hooks.remove()
            self.inner = self.trainer = self.model = None
            self.memory.contexts = []


# --- in the command ---------------------------------------------------------------------------

def growth_rows(run, cwd=None, common=None):
    """The records of the growth of a run's memory (measure.growth.records_of), with where it
    comes from when the window could tell: `held` (the lines that hold arrays), `where` and
    `code` (the first), `input_shapes`, `ahead_steps` (the work Python had queued, in fenced
    steps); `finding` names them when memory grows."""
    from ..measure.growth import records_of
    line = run.get("memory_steps")
    if not line:
        return []
    rows = records_of(line["memory"], warmup=line.get("warmup") or 0, **(common or {}))
    causes, fields = _causes(run.get("held") or {}, cwd)
    for r in rows:
        r.metrics.update(fields, causes=causes)
        if r.metrics["growth_verdict"] == "grows" and causes:
            r.metrics["finding"] += "; " + "; ".join(causes)
    return rows


def _causes(window, cwd):
    """(sentences, record fields) of what the window saw: the lines that hold arrays, a new input
    shape at most steps, and (when neither explains the growth) Python far ahead of the engine."""
    causes, fields = [], {}
    if not window:
        return causes, fields
    steps = window.get("steps") or 0
    fields.update(window_start_step=window.get("start"), window_steps=steps)
    if window.get("note"):
        fields["held_note"] = window["note"]
    lines = window.get("lines") or []
    if lines:
        top = lines[0]
        fields.update(where=where_of(top["file"], top["line"], cwd), code=code_at(top["file"], top["line"]),
                      held_arrays=top["arrays"], held_bytes=top["bytes"],
                      held=[dict(h, where=where_of(h["file"], h["line"], cwd)) for h in lines])
        causes.append("%d arrays (%s) made at %s `%s` in the %d steps traced from step %d were still held after "
                      "them" % (top["arrays"], _size(top["bytes"]), fields["where"], fields["code"], steps,
                                window["start"]))
    shapes = window.get("shapes") or {}
    if shapes.get("calls"):
        fields.update(input_shapes=shapes["distinct"], input_calls=shapes["calls"])
        if shapes["distinct"] >= max(2, 0.5 * shapes["calls"]):
            causes.append("the model got a new input shape at most steps (%d shapes in %d calls, e.g. %s): a "
                          "hybridized model builds and keeps a graph for each shape, oneDNN a kernel; pad or bucket "
                          "the inputs to a few shapes" % (shapes["distinct"], shapes["calls"], shapes["examples"][0]))
    drain, step = window.get("drain_s"), window.get("step_s")
    if drain is not None and step:
        fields.update(drain_s=drain, ahead_steps=drain / step)
        if drain / step >= AHEAD_STEPS and not causes:
            causes.append("Python ran about %.3g steps ahead of the engine at step %d (the queued work took %.4g ms "
                          "to finish, a fenced step %.4g ms): queued steps hold their arrays until they run; read a "
                          "value (asscalar) every N steps to bound it" % (drain / step, window["start"], 1e3 * drain,
                                                                            1e3 * step))
    return causes, fields


def where_of(file, line, cwd=None):
    """'train.py:42' (relative to `cwd` when it is below it), as profile's advice names lines."""
    rel = os.path.relpath(file, cwd or os.getcwd())
    return "%s:%d" % (file if rel.startswith("..") else rel, line)


def code_at(file, line):
    import linecache
    return linecache.getline(file, line).strip()


def _size(n):
    return "%.3g MiB" % (n / 2 ** 20) if n >= 2 ** 20 else "%.3g KiB" % (n / 2 ** 10)


def growth_advice(summary):
    """profile's finding when memory grows: an advice record (lever 'memory', measured False:
    nothing was measured faster) with the line to look at (`where`), or none."""
    from ..records import result
    out = []
    for r in summary.get("growth") or []:
        m = r.metrics
        if m["growth_verdict"] != "grows":
            continue
        what = "%s grows %s MB per 1,000 steps (%g%% CI %s-%s)" % (
            m["memory"], _figure(m["growth_mb_per_1000_steps"]), 100 * m["growth_mb_per_1000_steps_level"],
            _figure(m["growth_mb_per_1000_steps_ci_low"]), _figure(m["growth_mb_per_1000_steps_ci_high"]))
        if m.get("steps_to_exhaust"):
            what += ", about {:,.0f} more steps before this machine's available memory runs out".format(
                m["steps_to_exhaust"])
        if m.get("where"):
            look = ("arrays made here are still held steps later (%d of the %d steps traced, %s): look where the "
                    "script keeps them (a list, a dict, an attribute) and keep a number instead, e.g. the correct "
                    "count added up on the device" % (m["held_arrays"], m["window_steps"], _size(m["held_bytes"])))
        elif m.get("causes"):
            look = "; ".join(m["causes"])
        else:
            look = ("no NDArray made in the steps traced was still held after them: look for what else the script "
                    "keeps from step to step (Python objects, a library's buffers)")
        out.append(result(ADVICE, "memory", lever="memory", measured=False, where=m.get("where"), code=m.get("code"),
                          change="%s: %s" % (what, look), growth_verdict="grows",
                          growth_mb_per_1000_steps=m["growth_mb_per_1000_steps"],
                          steps_to_exhaust=m.get("steps_to_exhaust")))
    return out


def _figure(x):
    return "%.3g" % x


def finding_lines(records):
    """The lines of profile's "what to change" for the memory findings (never numbered: nothing
    was measured faster)."""
    lines = []
    for r in records:
        m = r.metrics
        lines.append("finding (nothing to measure faster): %s%s%s" % (
            "%s: " % m["where"] if m.get("where") else "", "`%s`: " % m["code"] if m.get("code") else "",
            m["change"]))
    return lines

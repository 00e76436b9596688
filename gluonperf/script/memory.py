"""Memory over the whole run of a script `profile --` runs: is it leaking, and from where? This
is what runs inside the script; it never spawns a process.

`Follower`, the listener of runtime.script_hooks that profile's driver installs
(script/driver.py): from the first `Trainer.step` of the script's first Trainer to its end, it
samples memory against the steps the engine has finished, not those Python queued
(measure.progress), waiting for the engine every FENCE_EVERY steps; once, after UNFENCED_STEPS
steps, it traces WINDOW_STEPS steps for the lines that make the NDArrays still held
(measure.held). At exit the samples go to the command (one line of
`$GLUONPERF_SCRIPT_OUT/<pid>.jsonl`), where `parts.growth_rows` judges them and
`advice.growth_advice` makes the finding. How and why: docs/your_script.md and
docs/measuring.md, "Memory over time".
"""
UNFENCED_STEPS = 10    # steps after profile's before the window
WINDOW_STEPS = 20      # steps traced for where held arrays are made
FENCE_EVERY = 10       # gluonperf waits for the engine every this many steps (the queue's bound)


def _ignore(*args, **kwargs):
    return None


class Follower:
    """The hooks' listener over the whole run (see the module's docstring). `inner`: profile's
    StepProfiler, given every hook until `follow` is called; `write(**line)`: the driver's."""

    def __init__(self, inner, write):
        from ..measure.memory import StepMemory
        self.inner, self.write = inner, write
        self.trainer, self.step = None, 0
        self.memory = StepMemory(children=True)
        self.marker = self.finished = None   # measure.progress's, from the first step on
        self.marked = True                   # whether every step so far was marked
        self.last_param = None               # the Trainer's last updated Parameter (False: none), `_mark`'s
        self.model = self.step_s = None
        self.window_at = None   # the step at which the window (after UNFENCED_STEPS) starts
        self.window = self.shapes = None
        self.window_start = self.window_end = None

    def __getattr__(self, name):  # data waits, engine waits, loaders, Blocks: profile's while it measures
        inner = self.__dict__.get("inner")
        return getattr(inner, name) if inner is not None else _ignore

    def before_update(self, trainer, batch_size):
        if self.trainer is None:
            from ..measure.progress import EngineMarker, FinishedMemory
            from ..measure.steps import trainer_contexts
            self.trainer = trainer
            self.memory.add_contexts(trainer_contexts(trainer))
            self.marker = EngineMarker()
            self.finished = FinishedMemory(self.memory, self.marker).start()
        if self.inner is not None:
            self.inner.before_update(trainer, batch_size)

    def after_update(self, trainer, batch_size):
        if self.inner is not None:
            self.inner.after_update(trainer, batch_size)  # its last measured step calls the driver's ready
        if trainer is not self.trainer:
            return
        self.step += 1
        self._mark(trainer)
        if self.step % FENCE_EVERY == 0:
            self.finished.fence(self.step)
        if self.window_at is not None and self.step >= self.window_at:
            self._window()

    def _mark(self, trainer):
        """The step's marker, behind the update of the Trainer's last parameter (on its first context)."""
        if self.last_param is None:  # the Trainer's parameters are fixed: looked up at its first step only
            self.last_param = next((p for p in reversed(trainer._params) if p.grad_req != "null"), False)
        if self.marked and self.last_param and self.marker.mark(self.step, self.last_param.list_data()[0]):
            return
        if self.marked:  # from now on, the steps Python queued stand for the finished ones
            self.marked = False
            self.finished.stop()
        self.memory.sample(self.step)

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
            self.window, self.shapes = held.HeldArrays(), held.InputShapes()
            self.window_start = self.step
            if not self.window.start():
                self.window_at, self.window_end = None, self.step
                self.write(kind="held", start=self.step, steps=0, step_s=self.step_s,
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
                   step_s=self.step_s)

    def at_exit(self):
        """The samples, for the command (the steps up to the window's end are warm-up); then the
        hooks go and nothing of the script's is held: a Trainer kept alive past MXNet's own exit
        (by this listener, in script_hooks' module) aborted a dist_sync worker ("terminate called
        without an active exception": its kvstore was freed after MXNet had shut down)."""
        from ..runtime import script_hooks
        try:
            self.close_window()
            queue = None
            if self.finished is not None and self.marked:
                import mxnet as mx
                mx.nd.waitall()  # the script has ended: the steps still queued finish, and are sampled
                self.finished.stop()
                queue = dict(self.finished.plain(), fence_every=FENCE_EVERY)
            self.write(kind="memory_steps", steps_run=self.step, warmup=self.window_end or self.step,
                       memory=self.memory.plain(), queue=queue,
                       counted="finished" if self.marked else "queued")
        finally:
            script_hooks.remove()
            self.inner = self.trainer = self.model = None
            self.memory.contexts = []

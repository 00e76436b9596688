"""How `tune --model` runs a candidate: gluonperf's training loop and the steprate worker, each a
runner (the protocol: gluonperf/tuning/runner.py).

- `CommandRunner`: `python -m <module>` (or `python <script>.py`) with the candidate's flags,
  its figure images_per_s in the answer it prints (runtime/wire.py), run fresh or, with
  `serves`, warm. STEPRATE is gluonperf.workers.steprate (plain SGD on a model, no data).
- `TrainRunner`: gluonperf.train --dataset synthetic --epochs 2, its figure the last epoch's
  train_images_per_s in its --json records. TRAIN is the default one.

Every run is a fresh process (or a warm worker), started from the package root with this
gluonperf first on its path and MXNet's and OpenMP's variables of this shell left out: the
candidate says them all (`candidate_env`).
"""
import importlib.util
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field, replace
from typing import Optional, Tuple

from ..records.files import read_jsonl
from ..runtime import guard, transport, wire
from ..runtime.threads import TAKEN_VARIABLE, recommended_threads
from . import levers as _levers
from .model_spec import spec_flags

# the variables a candidate sets itself: this shell's are left out of its process
CANDIDATE_SETS = ("MXNET_", "OMP_", "KMP_", "GOMP_", "DNNL_", "ONEDNN_")


def candidate_env(candidate):
    """This environment without MXNet/OpenMP settings (the candidate says them all), plus the candidate's,
    with this gluonperf first on PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(CANDIDATE_SETS) and k != TAKEN_VARIABLE}
    env.update(dict(candidate.env))
    env = guard.package_env(env)
    env.setdefault("MXNET_STORAGE_FALLBACK_LOG_VERBOSE", "0")
    return env


@dataclass(frozen=True)
class CommandRunner:
    """A command run for a candidate, `--steps N` to end it: `measure` runs it in a fresh process;
    with `serves` (gluonperf.workers.steprate, the benchmarks' book and PyTorch loops) `start` runs
    it warm: started once with `--serve`, it answers each request for N steps (`wire.serve`).
    Either way a `Worker` asks it through the wire's interface (`transport.Fresh` or `.Warm`)."""
    module: str
    fixed: Tuple[str, ...] = ()
    steps_flag: Optional[str] = "--steps"
    serves: bool = False  # after `--serve`, answers the wire's requests on stdin (`wire.serve`)
    python: Optional[str] = None  # the interpreter (default: this one), e.g. another venv's
    description: Optional[str] = None  # how errors name it (None: its module)
    spec: Optional[object] = field(default=None, compare=False)  # the model's ModelSpec (`for_model`)

    baseline = "book defaults"

    @property
    def name(self):
        return self.description or self.module

    @property
    def warm(self):
        return self.serves

    def for_model(self, spec):
        """This runner for the candidates of `spec` (a ModelSpec), which it passes on as the object."""
        return replace(self, spec=spec)

    def model_flags(self, text):
        return ["--model", text]

    def bound(self, candidate, steps, json_path, serve):
        """The flags that end a run after `steps` steps (or make it a warm worker)."""
        if serve:
            return ["--serve"]
        return [self.steps_flag, str(steps)] if self.steps_flag else []

    def argv(self, candidate, steps, json_path=None, serve=False):
        head = [self.module] if self.module.endswith(".py") else ["-m", self.module]
        args = [self.python or sys.executable, *head, *self.fixed]
        for k, v in candidate.flags:  # an empty value is a switch (store_true flag)
            if k == "model":
                args += self.model_flags(v)
                continue
            args += ["--" + k.replace("_", "-")] + ([v] if v != "" else [])
        return args + self.bound(candidate, steps, json_path, serve)

    def answer(self, stdout, json_path):
        """A fresh run's answer: the wire's, its last line of stdout (`wire.answer`)."""
        return wire.answer(stdout, self.name)

    def measure(self, candidate, steps, timeout=900):
        """Run one candidate in a fresh process (the wire's fresh transport, `transport.Fresh`):
        (images_per_s, None) or (None, one-line error)."""
        with guard.temp_dir(prefix="gluonperf-tune-") as tmp:
            json_path = os.path.join(tmp, "out.json")
            fresh = transport.Fresh(lambda s: self.argv(candidate, s["steps"], json_path), self.name, timeout,
                                    candidate_env(candidate), guard.PACKAGE_ROOT,
                                    lambda out: self.answer(out, json_path))
            return Worker(fresh, self.name, timeout).run(steps)

    def start(self, candidate, timeout):
        """A warm worker of `candidate` (the wire's warm transport, `transport.Warm`): started once with
        --serve, then asked for each run."""
        if not self.serves:
            raise ValueError("%s does not run warm (serves=False)" % self.module)
        warm = transport.Warm(self.argv(candidate, 0, serve=True), self.name, timeout, candidate_env(candidate),
                              guard.PACKAGE_ROOT)
        return Worker(warm, self.name, timeout)

    def command_line(self, candidate, steps):
        env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in candidate.env)
        argv = self.argv(candidate, steps, "RESULTS.json")
        argv[0] = "python"
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in argv)

    def levers(self, contexts, batch_sizes, kvstores, cores=None):
        return _levers.model_levers(contexts, kvstores, cores)

    def threads(self, contexts):
        return None  # it runs with the environment it is given

    def takes(self, setting):
        return False


@dataclass(frozen=True)
class TrainRunner(CommandRunner):
    """gluonperf.train on a candidate: a run bounded by --limit (batch x steps images), its figure
    the last epoch's train_images_per_s (the first epoch pays for graph building and first
    allocations); a model of one's own passed as the flags a user types, those of the ModelSpec
    the command gave it (`for_model`) rather than its text parsed again for every run."""
    module: str = "gluonperf.train"
    fixed: Tuple[str, ...] = ("--dataset", "synthetic", "--epochs", "2")
    steps_flag: Optional[str] = None

    baseline = "imperative, train's thread default"

    def model_flags(self, text):
        """A model of one's own as its flags, as a user would type them: the flags of the spec it
        was given (`for_model`) when `text` is that spec's, else of `text` parsed."""
        if self.spec is not None and self.spec.text == text:
            return self.spec.flags
        return spec_flags(text)

    def bound(self, candidate, steps, json_path, serve):
        batch = int(candidate.flag("batch_size", 64))
        return ["--limit", str(batch * steps), "--json", json_path]

    def answer(self, stdout, json_path):
        """gluonperf.train answers with its --json records, read as every records file is
        (`records.files.read_jsonl`: its schema checked): the last epoch's train_images_per_s.
        wire.WorkerFailed when they hold none."""
        try:
            rows = [r.metrics for r, _ in read_jsonl(json_path) if r.metrics.get("train_images_per_s")]
            return {"images_per_s": rows[-1]["train_images_per_s"]}
        except (OSError, ValueError, IndexError):
            raise wire.WorkerFailed("no throughput figure in the records of %s" % self.name)

    def on_dataset(self, dataset):
        """This runner training on `dataset` (tune --dataset: a named set, an image folder or a .rec)."""
        return replace(self, fixed=("--dataset", dataset) + self.fixed[2:])

    def levers(self, contexts, batch_sizes, kvstores, cores=None):
        # a .rec (tune --dataset) can also be read by MXNet's ImageRecordIter, its threads set by --workers
        rec = any(str(a).endswith(".rec") for a in self.fixed)
        return _levers.model_levers(contexts, kvstores, cores, data_lever=True, rec=rec, dtype_lever=True)

    def threads(self, contexts):
        """gluonperf.train picks its own thread count when OMP_NUM_THREADS is unset."""
        return recommended_threads(sum(1 for c in contexts if c.startswith("cpu")))

    def takes(self, setting):
        return setting in ("optimizer", "dataset")


STEPRATE = CommandRunner("gluonperf.workers.steprate", ("--warmup", "2"), serves=True,
                         description="the steprate worker")
TRAIN = TrainRunner()


def train_available():
    """True when this gluonperf has the gluonperf.train command (found as a module, wherever
    the package is installed, whatever the current directory)."""
    return importlib.util.find_spec(TRAIN.module) is not None


def default_runner():
    """gluonperf.train once it exists in this package, else the steprate worker."""
    return TRAIN if train_available() else STEPRATE


class Worker:
    """A candidate's process behind the wire's interface (runtime/wire.py: a fresh or a warm
    transport, chosen by `measure` and `start`): `run(steps)` -> (images_per_s, None) or (None,
    one-line error); `close()`."""

    def __init__(self, transport, name, timeout):
        self.transport, self.name, self.timeout = transport, name, timeout

    def run(self, steps):
        try:
            found = self.transport.call({"steps": steps})
        except subprocess.TimeoutExpired:
            return None, "timed out after %ds" % self.timeout
        except wire.WorkerFailed as e:
            return None, str(e)
        try:
            return float(found["images_per_s"]), None
        except (KeyError, TypeError, ValueError):
            return None, "no throughput figure in the answer of %s" % self.name

    def close(self):
        self.transport.close()

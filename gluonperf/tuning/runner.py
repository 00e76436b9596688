"""The runner protocol: what tuning asks of whatever runs a candidate (`Runner` below).

tuning/ knows no runner. Each area gives its own and the command hands it to the search:
gluonperf's training loop and the steprate worker (gluonperf/training/runners.py: `TrainRunner`,
`CommandRunner`), a user's script under profile's hooks (gluonperf/script/runner.py:
`ScriptRunner`), and any added later.

The one thing to know: a runner answers for itself everything that differs from one runner to
another, so that nothing outside a runner asks which runner it is (tests/test_runners.py greps
the package for a comparison with a module's name, and for `hasattr(` on a runner). Runners do
not inherit from `Runner`, which states the protocol for a reader and a type checker: they sit
below tuning/ and import nothing of it.
"""
from typing import Protocol


class Runner(Protocol):
    name: str       # what it runs, as notes and errors say it
    baseline: str   # its baseline candidate's name ("book defaults", "imperative, train's thread default", "as it is")
    warm: bool      # warm workers (one process per candidate, started once, asked for N steps a round:
    #                 `paired_sweep`) or a fresh process per run (`sweep`)

    def measure(self, candidate, steps, timeout):
        """(figure, None) or (None, one-line error) of one run of `candidate` in a fresh process: how
        it passes the model, bounds the run and reads its figure are the runner's own."""

    def start(self, candidate, timeout):
        """A warm worker of `candidate` (`warm` runners only): `run(steps)` -> (figure, None) or
        (None, error); `close()`."""

    def command_line(self, candidate, steps):
        """The command line that reproduces one run of `candidate`, for the records."""

    def levers(self, *setting, **more):
        """[(lever, best candidate -> [candidates, the best first])] that apply here, from the area's
        own setting (a model runner's contexts, batch sizes and kvstores; a script's probe)."""

    def threads(self, contexts):
        """The OpenMP thread count it sets itself when OMP_NUM_THREADS is unset, or None (the
        environment's: MXNet's default)."""

    def takes(self, setting):
        """Whether it takes tune's `setting` (optimizer, dataset)."""


# what a runner has, for tests/test_runners.py
PROTOCOL = ("name", "baseline", "warm", "measure", "start", "command_line", "levers", "threads", "takes")

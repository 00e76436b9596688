"""The runner protocol: what tuning asks of whatever runs a candidate.

tuning/ knows no runner. Each area gives its own, and the command hands it to the search:
gluonperf's training loop and the steprate worker (gluonperf/training/runners.py:
`TrainRunner`, `CommandRunner`), a user's script under profile's hooks
(gluonperf/script/runner.py: `ScriptRunner`), and any added later. A runner answers for
itself everything that differs from one to the other, so that nothing outside a runner asks
which runner it is (tests/test_runners.py greps the package for a comparison with a module's
name, and for `hasattr(` on a runner):

- `name`: what it runs, as notes and errors say it;
- `baseline`: its baseline candidate's name ("book defaults", "imperative, train's thread
  default", "as it is");
- `warm`: whether it runs warm workers (one process per candidate, started once and asked for
  N steps a round: `paired_sweep`) or a fresh process per run (`sweep`);
- `measure(candidate, steps, timeout)`: one run of a candidate in a fresh process, (figure,
  None) or (None, a one-line error): how it passes the model, bounds the run and reads its
  figure are its own;
- `start(candidate, timeout)`: a warm worker (`warm` runners only), with `run(steps)` ->
  (figure, None) or (None, error), and `close()`;
- `command_line(candidate, steps)`: the line that reproduces a run, for the records;
- `levers(...)`: the levers that apply to what it runs, [(lever, best -> [candidates])] (the
  area's own setting: a model runner's contexts, batch sizes and kvstores; a script's probe);
- `threads(contexts)`: the OpenMP thread count it sets itself when OMP_NUM_THREADS is unset
  (None: the environment's, MXNet's default);
- `takes(setting)`: whether it takes one of tune's settings (`optimizer`, `dataset`).

`Runner` below states the protocol for a reader and a type checker; runners do not inherit
from it (they sit below tuning/ and import nothing of it).
"""
from typing import Protocol


class Runner(Protocol):
    name: str
    baseline: str
    warm: bool

    def measure(self, candidate, steps, timeout):
        """(figure, None) or (None, one-line error) of one run of `candidate` in a fresh process."""

    def start(self, candidate, timeout):
        """A warm worker of `candidate`: `run(steps)` -> (figure, None) or (None, error); `close()`."""

    def command_line(self, candidate, steps):
        """The command line that reproduces one run of `candidate`."""

    def levers(self, *setting, **more):
        """[(lever, best candidate -> [candidates, the best first])] that apply here."""

    def threads(self, contexts):
        """The thread count it sets itself when OMP_NUM_THREADS is unset, or None."""

    def takes(self, setting):
        """Whether it takes tune's `setting` (optimizer, dataset)."""


# what a runner has, for tests/test_runners.py
PROTOCOL = ("name", "baseline", "warm", "measure", "start", "command_line", "levers", "threads", "takes")

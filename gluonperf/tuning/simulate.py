"""Tune's search checked by simulation: the real coordinate search (`search.coordinate`: its
sweeps, sequential plan, verdicts, budget and confirmation) on the stages it is given (those
`tune --` builds for a newcomer's script: script/levers.py's `newcomer_stages`) and a simulated
runner (`SimulatedRunner`) on a quiet machine: thousands of tunes in seconds, no process.

`simulate` gives the share of tunes whose recipe names a change (with no gain, the false-recipe
rate; with one, the power) with its binomial interval. benchmarks/verdicts.py writes it to its
results file and tests/test_tune_simulation.py holds it to issue 70's lines; what it found:
docs/verdicts.md, "Is the recipe right? Checked by simulation".
"""
import collections
import math
import random

from ..records import result
from . import search
from .candidates import Candidate
from .rounds import Budget, Rounds

RATE = 100.0


class Clock:
    """A simulated clock: `now` seconds, moved by the runner's runs."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class QuietMachine:
    """A machine nobody else uses: no load before or during the rounds (measure/machine.py's shape)."""

    class Watch:
        def round(self):
            return {"others_busy_cores": 0.0, "steal_share": 0.0, "seconds": 10.0}

    @staticmethod
    def before(interval=0.5):
        return {"others_busy_cores": 0.0, "steal_share": 0.0, "seconds": interval}


class SimulatedRunner:
    """The runner protocol (tuning/runner.py) for a simulated script: a fresh 'process' a run.
    A run's figure is RATE (100/s) times the true gain of the candidate's settings (`gains`:
    {"KEY=VALUE": factor}; a factor applies to every candidate with that setting, so a kept change
    carries into the levers after it) times the run's noise, exp(sd * z): z standard normal, or
    Student's t with 3 degrees of freedom scaled to the same sd (`tails="t3"`, heavy tails). Each
    run moves `clock` by `run_seconds`, so the budget is kept as at that run time."""
    name = "a simulated script"
    baseline = "as it is"
    warm = False

    def __init__(self, gains, sd, tails="normal", run_seconds=5.0, seed=0):
        if sd < 0 or run_seconds <= 0:
            raise ValueError("sd must be >= 0 and run_seconds > 0, got %r and %r" % (sd, run_seconds))
        if tails not in ("normal", "t3"):
            raise ValueError("tails must be normal or t3, got %r" % tails)
        self.gains, self.sd, self.tails, self.run_seconds = dict(gains), sd, tails, run_seconds
        self.random = random.Random(seed)
        self.clock = Clock()
        self.runs = 0

    def truth(self, candidate):
        """The candidate's true speed over the script as it is."""
        return math.prod(self.gains.get("%s=%s" % kv, 1.0) for kv in candidate.env + candidate.flags)

    def _noise(self):
        z = self.random.gauss(0.0, 1.0)
        if self.tails == "t3":  # t with 3 degrees of freedom has variance 3: scaled to sd
            chi = sum(self.random.gauss(0.0, 1.0) ** 2 for _ in range(3))
            z = z / math.sqrt(chi / 3) / math.sqrt(3)
        return math.exp(self.sd * z)

    def measure(self, candidate, steps, timeout):
        self.runs += 1
        self.clock.now += self.run_seconds
        return RATE * self.truth(candidate) * self._noise(), None

    def start(self, candidate, timeout):
        raise ValueError("a simulated runner runs a fresh process a run")

    def command_line(self, candidate, steps):
        return " ".join("%s=%s" % kv for kv in candidate.env + candidate.flags) or "as it is"

    def levers(self, *setting, **more):
        return []  # the stages are the simulation's own

    def threads(self, contexts):
        return None

    def takes(self, setting):
        return False


def tune(stages, runner, budget=300.0):
    """One simulated `tune --` at the default plan: its Search."""
    rounds = Rounds(budget=Budget(budget, runner.run_seconds, clock=runner.clock))
    rounds.machine = QuietMachine
    return search.coordinate(runner, Candidate(runner.baseline), stages, search.Settings(rounds, 20))


def simulate(stages, gains, sd, tails="normal", tunes=1000, budget=300.0, run_seconds=5.0, seed=0):
    """`tunes` simulated tunes over `stages` of a script whose true gains are `gains` (see
    `SimulatedRunner`): a record (bench 'simulation') of how often the recipe named a change (`named`: with no
    gain, any change; with gains, the first gain's setting), its 95% binomial interval, how often the
    gain was missed but its lever was left unsettled, so that tune said how many more rounds would
    settle it (`told`), the runs and the simulated seconds a tune took (mean and max), and the levers
    kept, left unsettled and not reached."""
    target = next(iter(gains), None)
    named = told = 0
    runs, seconds, kept, open_, unreached = [], [], collections.Counter(), collections.Counter(), collections.Counter()
    for i in range(tunes):
        runner = SimulatedRunner(gains, sd, tails, run_seconds, seed=seed * 1_000_003 + i)
        found = tune(stages, runner, budget)
        if target is None:
            named += bool(found.kept)
        elif target in {"%s=%s" % kv for kv in found.best.env + found.best.flags}:
            named += 1
        elif _lever_of(found.results, target) in found.unsettled:
            told += 1
        kept.update(found.kept)
        open_.update(list(found.unsettled))
        unreached.update(list(found.unreached))
        runs.append(runner.runs)
        seconds.append(runner.clock.now)
    low, high = binomial_interval(named, tunes)
    name = "%s, sd %g %s" % (",".join("%s x%g" % kv for kv in gains.items()) or "no gain", sd, tails)
    return result("simulation", name, gains=dict(gains), sd=sd, tails=tails, tunes=tunes, budget_s=budget,
                  run_s=run_seconds, named=named / tunes, named_ci_low=low, named_ci_high=high, named_level=0.95,
                  told=told / tunes, runs_mean=sum(runs) / tunes, runs_max=max(runs),
                  seconds_mean=sum(seconds) / tunes, seconds_max=max(seconds),
                  kept=dict(kept), unsettled=dict(open_), unreached=dict(unreached))


def _lever_of(results, setting):
    """The lever whose candidates carry `setting` (KEY=VALUE), or None."""
    for r in results:
        m = r.metrics
        if setting in {"%s=%s" % kv for kv in list(m.get("env_vars", {}).items()) + list(m.get("flags", {}).items())}:
            return m.get("lever")
    return None


def binomial_interval(k, n, level=0.95):
    """The Clopper-Pearson interval of a share k/n (SciPy's beta quantiles)."""
    from scipy.special import betaincinv
    a = 1 - level
    low = 0.0 if k == 0 else float(betaincinv(k, n - k + 1, a / 2))
    high = 1.0 if k == n else float(betaincinv(k + 1, n - k, 1 - a / 2))
    return low, high

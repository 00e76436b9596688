"""One runner protocol (issue 62): each runner answers for itself how it runs a candidate, its
figure, its levers, its baseline's name, its thread default and whether it runs warm workers;
nothing outside a runner asks which runner it is. Reads the source and the runner objects; no
process is started."""
import ast
import pathlib
import re

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "gluonperf"
# the runners: the only modules that may know a runner's module by its name
RUNNERS = {"training/runners.py", "script/runner.py"}
COMPARISON = re.compile(r"""(==|!=)\s*["']gluonperf\.train["']|["']gluonperf\.train["']\s*(==|!=)"""
                        r"""|\.module\s*(==|!=|\bin\b)|(==|!=)\s*\w+\.module\b""")


def sources():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text()


def test_no_runner_name_is_compared_outside_the_runners():
    found = ["%s:%d: %s" % (name, i, line.strip()) for name, text in sources() if name not in RUNNERS
             for i, line in enumerate(text.splitlines(), 1) if COMPARISON.search(line)]
    assert found == [], "a comparison with a runner's module: ask the runner instead (tuning/runner.py)"


def runnerish(node):
    """True for an expression that names a runner: `runner`, `r`, `self.runner`, `c.runner`, `x_runner`."""
    text = ast.unparse(node)
    return bool(re.search(r"(^|\.|_)runner(_obj)?$|^r$", text))


def test_no_hasattr_on_a_runner():
    found = []
    for name, text in sources():
        for node in ast.walk(ast.parse(text)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("hasattr", "getattr")
                    and node.args and runnerish(node.args[0])):
                found.append("%s:%d: %s" % (name, node.lineno, ast.unparse(node)))
    assert found == [], "a runner asked what it is: every runner has the whole protocol (tuning/runner.py)"


@pytest.mark.parametrize("line, caught", [
    ('if runner.module == "gluonperf.train":', True),
    ('name = "x" if "gluonperf.train" != m else "y"', True),
    ("if r.module in (TRAIN.module,):", True),
    ('train = [sys.executable, "-m", "gluonperf.train"]', False),
])
def test_the_check_sees_a_comparison(line, caught):
    assert bool(COMPARISON.search(line)) == caught


def test_every_runner_answers_the_whole_protocol():
    from gluonperf.script.runner import ScriptRunner
    from gluonperf.training.runners import STEPRATE, TRAIN
    from gluonperf.tuning.runner import PROTOCOL
    script = ScriptRunner(["python", "train.py"], 5, 20)
    for runner in (TRAIN, STEPRATE, script):
        assert [a for a in PROTOCOL if not hasattr(runner, a)] == [], runner
    assert (TRAIN.warm, STEPRATE.warm, script.warm) == (False, True, False)
    assert (TRAIN.baseline, STEPRATE.baseline, script.baseline) == (
        "imperative, train's thread default", "book defaults", "as it is")
    assert TRAIN.threads(["cpu"]) is not None and STEPRATE.threads(["cpu"]) is None and script.threads(["cpu"]) is None
    assert TRAIN.takes("optimizer") and not STEPRATE.takes("optimizer") and not script.takes("dataset")
    assert [s[0] for s in TRAIN.levers(["cpu0"], [8], ["device"], cores=2)][:3] == ["threads", "hybridize", "data"]
    assert "data" not in [s[0] for s in STEPRATE.levers(["cpu0"], [8], ["device"], cores=2)]


class Transport:
    """A transport of the wire's interface (call, close) that gives `outcome`: an answer, or an error raised."""

    def __init__(self, outcome):
        self.outcome, self.asked, self.closed = outcome, [], False

    def call(self, settings):
        self.asked.append(settings)
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome

    def close(self):
        self.closed = True


@pytest.mark.parametrize("outcome, ran", [
    ({"images_per_s": 12.5, "seconds": 0.1}, (12.5, None)),
    ("timeout", (None, "timed out after 2s")),
    ("failed", (None, "the fake failed: boom")),
    ({"seconds": 0.1}, (None, "no throughput figure in the answer of the fake")),
])
def test_a_runs_figure_or_error_is_the_same_whichever_transport_carries_it(outcome, ran):
    """runners.Worker asks a fresh and a warm transport alike: {"steps": N} in, images_per_s or one line out."""
    import subprocess
    from gluonperf.runtime import wire
    from gluonperf.training.runners import Worker
    errors = {"timeout": subprocess.TimeoutExpired(["fake"], 2), "failed": wire.WorkerFailed("the fake failed: boom")}
    outcome = errors[outcome] if isinstance(outcome, str) else outcome
    transport = Transport(outcome)
    worker = Worker(transport, "the fake", 2)
    assert worker.run(8) == ran and transport.asked == [{"steps": 8}]
    worker.close()
    assert transport.closed


def test_the_train_runner_answers_with_its_records_or_says_it_has_none(tmp_path):
    from gluonperf.runtime import wire
    from gluonperf.training.runners import TRAIN
    with pytest.raises(wire.WorkerFailed, match="^no throughput figure in the records of gluonperf.train$"):
        TRAIN.answer("", str(tmp_path / "missing.json"))

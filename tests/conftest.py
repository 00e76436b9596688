"""pytest's fixtures and hooks for the suite (what tests import lives in tests/helpers.py).

How the suite runs (the README's test command, which .ci/run runs):

    python -m pytest -q -m "not alone" && python -m pytest -q -m alone -n 0

The first run takes two tests at a time (`-n 2 --dist loadfile`, pyproject.toml): most tests
start a command, which spends most of its time loading MXNet on one core. Each test file goes
to one worker, so a module-scoped fixture runs once. The second runs the tests marked `alone`
one after the other, with nothing else from the suite running: it starts only after the first
has ended.

Adding a test: write it in a tests/test_*.py file (helpers.run_leaving_nothing or the `run`
fixture start a command as a user does; helpers.shared_run makes a run that tests in two files
check once in the session, on either worker). Mark it `@pytest.mark.alone` when another test
running beside it could change its result: it times work and compares the times, reads the
machine's load or its free cores, or makes load itself. Run it alone with
`python -m pytest -n 0 tests/test_x.py` (`-n 0`: one test at a time; with workers, an `alone`
test skips, saying how to run it).
"""
import os
import pathlib
import shutil
import sys
import tempfile

import pytest

from helpers import run_module

# The commands the tests start keep Python's compiled modules, as a user's default environment does:
# with PYTHONDONTWRITEBYTECODE set (this workplace sets it), each of the suite's hundreds of processes
# compiled gluonperf's modules again, 0.3-0.4 s of CPU a process (2.2 against 1.8 s to import train,
# profile --'s driver and infer, on a 2-core AMD EPYC Zen 3). The first process writes them.
# The suite's own processes too: pytest keeps the test modules it rewrites for their asserts only
# where Python may write bytecode, and rewrote all 52 in each run's collection (10 s against 4 s
# to collect, the alone run's and each xdist worker's).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


@pytest.fixture
def run():
    return run_module


@pytest.fixture
def private_tmp():
    """A temporary directory of the test's own, to give a command as its TMPDIR, with a short path:
    a Unix socket's path in it (a DataLoader worker's pymp-*/listener-*) must stay under 108 bytes,
    which one under tmp_path (/tmp/pytest-of-USER/pytest-N/popen-gwN/TEST/) passed once pytest's
    count of runs, N, reached 100. It is made in the run's temporary directory and removed after
    the test, whatever is in it (the tests that use it check that nothing is)."""
    path = tempfile.mkdtemp(prefix="t-")
    yield pathlib.Path(path)
    shutil.rmtree(path, ignore_errors=True)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "alone: the test times work or reads the machine's load (or makes load), so no other "
                   "test may run beside it: it runs in `python -m pytest -m alone -n 0`")
    _private_temp(config)


def _private_temp(config):
    """The commands the tests start get a temporary directory of the run's own (TMPDIR, inherited
    by the xdist workers and every command they start), a folder per worker, so that what they and
    their children leave there can be told from what anything else on the machine leaves in the
    shared one, and pinned on the test that left it (`_nothing_left_in_temp`). pytest's own base
    folder (tmp_path) stays where it was (PYTEST_DEBUG_TEMPROOT): a Unix socket's path in it must
    stay under 108 bytes. `pytest_sessionfinish` fails the run if anything is left."""
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None:  # the run's own process, before its workers start
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
        config._gluonperf_tmp = tempfile.mkdtemp(prefix="gluonperf-suite-")
        os.environ["TMPDIR"] = config._gluonperf_tmp
    elif os.path.basename(os.environ.get("TMPDIR", "")).startswith("gluonperf-suite-"):
        own = os.path.join(os.environ["TMPDIR"], worker)
        os.makedirs(own, exist_ok=True)
        os.environ["TMPDIR"] = own
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


@pytest.fixture(autouse=True)
def _nothing_left_in_temp():
    """What a test's commands leave in the run's temporary directory (a pymp-* folder of a
    DataLoader worker, a tune's folder, ...) is a warning on that test, and fails the run."""
    where = os.environ.get("TMPDIR", "")
    if "gluonperf-suite-" not in where:
        yield
        return
    before = set(os.listdir(where))
    yield
    left = sorted(set(os.listdir(where)) - before)
    if left:
        import warnings
        warnings.warn("left in the temporary directory by this test's commands: %s" % ", ".join(left))


def _left_in(root):
    """Everything under `root` but the workers' own (empty) folders."""
    left = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if name.startswith("gw") and os.path.isdir(path):
            left += [os.path.join(name, inner) for inner in sorted(os.listdir(path))]
        else:
            left.append(name)
    return left


def pytest_sessionfinish(session, exitstatus):
    """Nothing of gluonperf's or its children's is left in the run's temporary directory."""
    tmp = getattr(session.config, "_gluonperf_tmp", None)
    if tmp is None:
        return
    left = _left_in(tmp)
    session.config._gluonperf_passed = not left and exitstatus in (0, pytest.ExitCode.NO_TESTS_COLLECTED)
    if left:
        session.config._gluonperf_left = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left = getattr(config, "_gluonperf_left", None)
    if left:
        terminalreporter.write_line("FAILED: left in the run's temporary directory (%s) by the commands the tests "
                                    "started (the warnings above name the tests): %s"
                                    % (config._gluonperf_tmp, ", ".join(left)), red=True)


def pytest_unconfigure(config):
    """A run that passed removes its temporary directory; one that failed keeps it to look at when
    the commands left something in it (an empty one, a failed assertion's run, goes too)."""
    tmp = getattr(config, "_gluonperf_tmp", None)
    if tmp is not None and (getattr(config, "_gluonperf_passed", False) or not _left_in(tmp)):
        shutil.rmtree(tmp, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """With more than one xdist worker an `alone` test would run beside another test: it skips."""
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
        skip = pytest.mark.skip(reason="marked `alone`, and other tests run beside it here: "
                                       "it runs in `python -m pytest -m alone -n 0`")
        for item in items:
            if item.get_closest_marker("alone"):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _sigint_as_a_user_has_it():
    """Every test runs with SIGINT handled in this process, as in a user's shell, so that the
    commands it starts do not inherit an ignored SIGINT. A pytest started as a background job
    (`pytest &` without job control) has it ignored, its xdist workers too, and the commands
    keep it ignored, as a background job must: then the Ctrl-C tests cannot stop them."""
    import signal
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield

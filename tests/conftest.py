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
import shutil
import tempfile

import pytest

from helpers import run_module


@pytest.fixture
def run():
    return run_module


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "alone: the test times work or reads the machine's load (or makes load), so no other "
                   "test may run beside it: it runs in `python -m pytest -m alone -n 0`")
    if not hasattr(config, "workerinput"):  # the run's own process: before its workers start
        _private_temp(config)


def _private_temp(config):
    """The run's temporary directory is a folder of its own (TMPDIR, inherited by the workers and by
    every command a test starts), so that what the commands and their children leave in it can be
    told from what anything else on the machine leaves in the shared one; `pytest_sessionfinish`
    fails the run if anything but pytest's own base folder is left there; a run that passed removes
    it (one that failed keeps it, as pytest keeps its base folder, to look at)."""
    config._gluonperf_tmp = tempfile.mkdtemp(prefix="gluonperf-suite-")
    os.environ["TMPDIR"] = config._gluonperf_tmp
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again


def pytest_sessionfinish(session, exitstatus):
    """Nothing of gluonperf's or its children's (pymp-* folders of DataLoader workers, a tune's or
    a script's folder, LoadGen's logs) is left in the run's temporary directory."""
    tmp = getattr(session.config, "_gluonperf_tmp", None)
    if tmp is None:
        return
    ours = "pytest-of-"
    left = sorted(name for name in os.listdir(tmp) if not name.startswith(ours))
    session.config._gluonperf_passed = not left and exitstatus in (0, pytest.ExitCode.NO_TESTS_COLLECTED)
    if left:
        session.config._gluonperf_left = left
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    left = getattr(config, "_gluonperf_left", None)
    if left:
        terminalreporter.write_line("FAILED: left in the run's temporary directory (%s) by the commands the tests "
                                    "started: %s" % (config._gluonperf_tmp, ", ".join(left)), red=True)


def pytest_unconfigure(config):
    tmp = getattr(config, "_gluonperf_tmp", None)
    if tmp is not None and getattr(config, "_gluonperf_passed", False):
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

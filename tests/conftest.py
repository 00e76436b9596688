import contextlib
import fcntl
import os
import time

import pytest

from helpers import run_module


@pytest.fixture
def run():
    return run_module


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "alone: the test measures time or the machine's load (or makes load), so under "
                   "pytest-xdist no other test runs beside it")
    # xdist 3.8's --dist loadgroup marks a grouped test by appending '@group' to its id, which
    # pytest 9.2 no longer takes: the groups are silently ignored (pytest-dev/pytest-xdist#1386),
    # and the `alone` tests would run one at a time among the others, each waiting for the cores
    if (config.getoption("dist", None) == "loadgroup" and config.getoption("numprocesses", None)
            and tuple(pytest.version_tuple[:2]) >= (9, 2)):
        raise pytest.UsageError("pytest %s: pytest-xdist's --dist loadgroup ignores the test groups with it "
                                "(pytest-dev/pytest-xdist#1386); install the test extra, which pins pytest<9.2: "
                                "pip install -e '.[test]'" % pytest.__version__)


# The longest units of work first, so that the short ones even out the end of the run (the
# longest-processing-time rule): seconds of each unit in a full run (`--durations=0`, 2-core
# AMD EPYC Zen 3, 2026-11-25). Only the order depends on these; a unit not named counts as short.
UNIT_SECONDS = {"tests/test_commands.py": 140, "tests/test_suites.py": 124, "alone": 107,
                "tests/test_image_data.py": 69, "tests/test_report.py": 62, "tests/test_launch.py": 61,
                "tests/test_optimizers.py": 60, "tests/test_flags.py": 49, "tests/test_train.py": 31,
                "tests/test_flat.py": 29, "tests/test_bench_cli.py": 24, "tests/test_profile.py": 17,
                "tests/test_footprint.py": 15, "tests/test_asynchronous.py": 14}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The units of work pytest-xdist hands to its workers (`--dist loadgroup`, pyproject):
    each test file is one unit, as with `--dist loadfile` (a module fixture runs once), and all
    the `alone` tests make one unit of their own. They then run one after the other on one
    worker, which keeps the cores through the whole block (`_share_the_cores`), instead of each
    waiting for the test in progress on the other worker to end, once per `alone` test. The units go
    out longest first (`UNIT_SECONDS`; pyproject turns off xdist's own order, by test count);
    the `alone` block counts twice, as it holds both workers."""
    def unit(item):
        return "alone" if item.get_closest_marker("alone") else item.nodeid.split("::")[0]

    for item in items:
        item.add_marker(pytest.mark.xdist_group(unit(item)))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # with -n 0 (no workers) the files keep their own order
        weight = {"alone": 2}
        items.sort(key=lambda item: -UNIT_SECONDS.get(unit(item), 0) * weight.get(unit(item), 1))  # stable


_NEXT = pytest.StashKey()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_NEXT] = nextitem  # for `_share_the_cores`: is the next test on this worker `alone` too?
    yield


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


@pytest.fixture(autouse=True)
def _share_the_cores(request, tmp_path_factory):
    """Under pytest-xdist (`-n 2`, pyproject's default) two tests run at once; most start
    commands, which mostly wait for MXNet to load, and run side by side unharmed. A test
    marked `alone` takes the cores to itself: a lock file shared by the workers, held
    shared by every test and exclusively by an `alone` one, and kept from one `alone` test
    to the next when they follow each other on this worker (they do: see
    `pytest_collection_modifyitems`)."""
    alone = bool(request.node.get_closest_marker("alone"))
    following = request.node.stash.get(_NEXT, None)
    keep = alone and following is not None and bool(following.get_closest_marker("alone"))
    with cores(tmp_path_factory, alone=alone, keep=keep):
        yield


_held = []  # the cores lock, held exclusively since an `alone` test that another one follows


@contextlib.contextmanager
def cores(tmp_path_factory, alone=False, keep=False):
    """The cores lock (see `_share_the_cores`), shared or, for `alone`, exclusive (and with
    `keep`, still held when the block ends, for the next `alone` test). A fixture
    wider than a test that runs commands (test_report's module fixtures) is set up before
    the test's own lock is taken, so it takes the shared lock itself: otherwise it runs
    beside an `alone` test on the other worker, which then finds the machine busy.
    An `alone` test then waits for an idle machine (`require_quiet`), also without xdist."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        if alone:
            require_quiet()
        yield
        return
    kept = bool(_held and alone)
    if kept:
        lock = _held.pop()
    else:
        while _held:  # not expected: `keep` is only set when an `alone` test follows
            _held.pop().close()
        lock = open(tmp_path_factory.getbasetemp().parent / "cores.lock", "a")
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    try:
        if alone:  # after an `alone` test that kept the lock, only its own processes can be exiting
            require_quiet(interval=0.2 if kept else 0.5)
        yield
    finally:
        if keep:
            _held.append(lock)
        else:
            lock.close()


BUSY = 0.25           # share of the machine's CPU time, over one poll (0.2-0.5 s), that counts as busy
QUIET_TIMEOUT = 30.0  # how long an `alone` test waits for an idle machine
AFTER_BUSY = 5.0      # ... once one has waited in vain in this process (the machine is loaded)
BUSY_VARIABLE = "GLUONPERF_TEST_BUSY"  # 'run': run anyway on a busy machine, with a warning
_gave_up = []


def require_quiet(interval=0.5):
    """Wait until the machine is idle (below BUSY): the processes of the tests that ran before
    (commands still exiting, a browser closing) outlive their tests' locks. A machine still
    busy after QUIET_TIMEOUT (AFTER_BUSY once a wait failed) skips the test with what was
    found: a test that times work or reads the load would judge the other processes, and a
    pass there would say nothing. With GLUONPERF_TEST_BUSY=run the test runs anyway and a
    warning names the load."""
    load = _wait_for_quiet(AFTER_BUSY if _gave_up else QUIET_TIMEOUT, interval=interval)
    if load is None:
        return
    _gave_up.append(load)
    why = ("the machine stayed busy: %.0f%% of its CPU time in use after %.0f s of waiting (other "
           "processes; %s)" % (100 * load, AFTER_BUSY if len(_gave_up) > 1 else QUIET_TIMEOUT, _top_process()))
    if os.environ.get(BUSY_VARIABLE) == "run":
        import warnings
        warnings.warn("ran on a busy machine (%s=run): %s" % (BUSY_VARIABLE, why))
        return
    pytest.skip("needs an idle machine: %s; set %s=run to run it anyway" % (why, BUSY_VARIABLE))


def _top_process():
    """The process using the most CPU over 0.2 s, for the skip's reason."""
    import psutil
    procs = list(psutil.process_iter(["pid", "name"]))
    for p in procs:
        try:
            p.cpu_percent(None)  # the first call starts the process's count
        except psutil.Error:
            pass
    time.sleep(0.2)
    best = None
    for p in procs:
        try:
            used = p.cpu_percent(None)
        except psutil.Error:
            continue
        if best is None or used > best[0]:
            best = (used, p.info["name"], p.info["pid"])
    return "the busiest: %s (pid %d) at %.0f%% of a core" % (best[1], best[2], best[0]) if best else "none found"


def _wait_for_quiet(timeout, busy=BUSY, interval=0.5):
    """Poll the machine's CPU use (`interval` seconds at a time) until it is below `busy`;
    None when it was, else the last use seen when `timeout` ran out."""
    import psutil
    deadline = time.monotonic() + timeout
    while True:
        load = psutil.cpu_percent(interval=interval) / 100.0
        if load < busy:
            return None
        if time.monotonic() >= deadline:
            return load


import contextlib
import fcntl
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def clean_env(**extra):
    """This environment without OMP_*/MXNET_*/GOMP_*/KMP_*/DNNL_*/ONEDNN_* settings, as a user's shell
    has it, so that a command's own thread defaults apply; plus PYTHONPATH and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "MXNET_", "GOMP_", "KMP_", "DNNL_", "ONEDNN_", "MALLOC_", "GLUONPERF_"))}
    env["PYTHONPATH"] = ROOT
    env.update(extra)
    return env


def run_module(*args, timeout=300, env=None):
    """Run `python -m <args>` from the project root in a clean environment (see
    `clean_env`); returns CompletedProcess (text). A timeout fails the test."""
    full_env = clean_env()
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


@pytest.fixture
def run():
    return run_module


def _why_no_bfloat16():
    from gluonperf.precision import why_no_bf16
    return why_no_bf16(clean_env())


# Tests that train or measure in bfloat16: oneDNN 2.4 has no bfloat16 kernels below AVX-512, where
# the commands refuse it (tested in test_precision and test_commands, on every machine, with
# DNNL_MAX_CPU_ISA=AVX2); pytest reports these as skipped there, with the reason.
needs_bfloat16 = pytest.mark.skipif(_why_no_bfloat16() is not None,
                                    reason="no bfloat16 here: %s" % _why_no_bfloat16())


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "alone: the test measures time or the machine's load (or makes load), so under "
                   "pytest-xdist no other test runs beside it")


@pytest.fixture(autouse=True)
def _share_the_cores(request, tmp_path_factory):
    """Under pytest-xdist (`-n 2`, pyproject's default) two tests run at once; most start
    commands, which mostly wait for MXNet to load, and run side by side unharmed. A test
    marked `alone` takes the cores to itself: a lock file shared by the workers, held
    shared by every test and exclusively by an `alone` one."""
    with cores(tmp_path_factory, alone=bool(request.node.get_closest_marker("alone"))):
        yield


@contextlib.contextmanager
def cores(tmp_path_factory, alone=False):
    """The cores lock (see `_share_the_cores`), shared or, for `alone`, exclusive. A fixture
    wider than a test that runs commands (test_report's module fixtures) is set up before
    the test's own lock is taken, so it takes the shared lock itself: otherwise it runs
    beside an `alone` test on the other worker, which then finds the machine busy."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "cores.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        if alone:
            _wait_for_quiet()
        yield


def _wait_for_quiet(timeout=30.0, busy=0.25):
    """With the lock held alone, wait until the machine is idle (below `busy` of its CPU time
    over half a second): the processes of the tests that ran before (commands still exiting,
    a browser closing) outlive their tests' locks. After `timeout` the test runs anyway, and
    one that needs an idle machine says what it found."""
    import psutil
    deadline = time.monotonic() + timeout
    while psutil.cpu_percent(interval=0.5) / 100.0 >= busy and time.monotonic() < deadline:
        pass

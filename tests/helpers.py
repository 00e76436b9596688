"""What the tests share: the project root, the environments and runners for the commands a
test starts as a user does, and the bfloat16 skip. Test files import these (`from helpers
import ...`); tests/conftest.py holds only pytest's fixtures and hooks."""
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The environment (for run_leaving_nothing) in which MXNet never finishes: tests/hang/sitecustomize.py
HANGING_MXNET = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests", "hang"), ROOT])}


def clean_env(**extra):
    """This environment without OMP_*/MXNET_*/GOMP_*/KMP_*/DNNL_*/ONEDNN_* settings, as a user's shell
    has it, so that a command's own thread defaults apply; plus PYTHONPATH, COLUMNS=100 and `extra`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "MXNET_", "GOMP_", "KMP_", "DNNL_", "ONEDNN_", "MALLOC_", "GLUONPERF_"))}
    env["PYTHONPATH"] = ROOT
    # the tables' width as under a pipe (100 columns, records.format_table): pytest's workers hand their
    # children a COLUMNS of 80 from the terminal they started in, which left columns out
    env["COLUMNS"] = "100"
    env.update(extra)
    return env


def marked_env(**extra):
    """A clean environment with a unique marker, to find every process of one run (forked
    workers inherit it): (env, mark)."""
    import uuid
    mark = uuid.uuid4().hex
    return clean_env(GLUONPERF_TEST_RUN=mark, **extra), mark


def processes_of(mark):
    """The live processes whose environment carries `mark` (zombies are already gone)."""
    import psutil
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if p.environ().get("GLUONPERF_TEST_RUN") == mark and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def run_leaving_nothing(argv, timeout=240, **env):
    """`python <argv>` from the project root in a clean environment (plus `env`), as a user
    runs it; fails the test if any process of the run is still there 10 s after it returned.
    Returns the CompletedProcess (text)."""
    full_env, mark = marked_env(**env)
    done = subprocess.run([sys.executable, *argv], cwd=ROOT, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    left = processes_of(mark)
    assert not left, "left running: %s" % [p.cmdline() for p in left]
    return done


def shared_run(tmp_path_factory, argv, timeout=240):
    """`python -m <argv> --json OUT` through run_leaving_nothing, run once per test session for
    every test that asks with the same argv, on any xdist worker: test_commands checks a quick
    run's table and records, test_report draws the same records, and each run's CPU time (up to
    18 s) is spent once. Returns (CompletedProcess, OUT)."""
    import fcntl
    import hashlib
    import json
    base = tmp_path_factory.getbasetemp()
    # xdist gives each worker a folder in the session's: the runs go beside them, where both look
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared-runs"
    root.mkdir(exist_ok=True)
    key = hashlib.sha1("\0".join(argv).encode()).hexdigest()[:16]
    out, saved = root / key / "out.json", root / (key + ".done.json")
    with open(root / (key + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a run under way on the other worker: wait for it, then read it
        if not saved.exists():  # a run that failed here (a timeout, a process left) left nothing saved
            out.parent.mkdir(exist_ok=True)
            if out.exists():  # a failed run's partial output, not to be read as this run's
                out.unlink()
            done = run_leaving_nothing(["-m", *argv, "--json", str(out)], timeout)
            saved.write_text(json.dumps([done.args, done.returncode, done.stdout, done.stderr]))
        return subprocess.CompletedProcess(*json.loads(saved.read_text())), out


def run_module(*args, timeout=300, env=None):
    """Run `python -m <args>` from the project root in a clean environment (see
    `clean_env`); returns CompletedProcess (text). A timeout fails the test."""
    full_env = clean_env()
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def _why_no_bfloat16():
    from gluonperf.runtime.precision import why_no_bf16
    return why_no_bf16(clean_env())


# Tests that train or measure in bfloat16: oneDNN 2.4 has no bfloat16 kernels below AVX-512, where
# the commands refuse it (tested in test_precision and test_commands, on every machine, with
# DNNL_MAX_CPU_ISA=AVX2); pytest reports these as skipped there, with the reason.
needs_bfloat16 = pytest.mark.skipif(_why_no_bfloat16() is not None,
                                    reason="no bfloat16 here: %s" % _why_no_bfloat16())

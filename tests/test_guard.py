"""gluonperf.runtime.guard.run_all: children started at once run side by side, each in its own
process group; their stderr is kept, and a timeout leaves none of them behind."""
import subprocess
import sys
import time

import pytest

from gluonperf.runtime import guard
from helpers import marked_env, processes_of

# each child announces itself with a file, then waits (up to 60 s) for the other's: both can
# end only if they ran at the same time
MEET = ("import os, sys, time\n"
        "open(sys.argv[1], 'w').close()\n"
        "end = time.monotonic() + 60\n"
        "while not os.path.exists(sys.argv[2]) and time.monotonic() < end:\n"
        "    time.sleep(0.01)\n"
        "sys.stderr.write('met\\n' if os.path.exists(sys.argv[2]) else 'alone\\n')\n"
        "sys.exit(int(sys.argv[3]))\n")


def test_children_run_side_by_side_and_keep_their_stderr(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    done = guard.run_all([[sys.executable, "-c", MEET, a, b, "0"], [sys.executable, "-c", MEET, b, a, "3"]],
                         timeout=120)
    assert [d.returncode for d in done] == [0, 3]
    assert [d.stderr for d in done] == ["met\n", "met\n"]
    assert not guard._children


def test_a_timeout_kills_every_child_and_its_group(tmp_path):
    """Every process of the children's groups is gone (killed, not only signalled) within the
    10 s the suite gives any run (helpers.run_leaving_nothing): a kill lands asynchronously."""
    sleeper = [sys.executable, "-c", "import subprocess, sys, time; "
               "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); time.sleep(600)"]
    env, mark = marked_env()
    before = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        guard.run_all([sleeper, sleeper], timeout=2, env=env)
    assert time.monotonic() - before < 60
    deadline = time.monotonic() + 10
    while processes_of(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = processes_of(mark)
    assert not left, "left running: %s" % [p.cmdline() for p in left]
    assert not guard._children

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_module(*args, timeout=300, env=None):
    """Run `python -m <args>` from the project root; returns CompletedProcess (text)."""
    full_env = dict(os.environ, PYTHONPATH=ROOT)
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env=full_env)


@pytest.fixture
def run():
    return run_module

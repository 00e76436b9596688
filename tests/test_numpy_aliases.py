"""numpy's removed aliases that MXNet 1.9.1 needs (gluonperf/runtime/numpy_aliases.py): put back on
numpy 1.24 and later only, when MXNet is imported, and in a user's own script through the
sitecustomize files, which import no numpy at start-up."""
import os
import subprocess
import sys
import warnings

import numpy
import pytest

from gluonperf.runtime import numpy_aliases
from helpers import ROOT, clean_env

SITES = {"profile's script": os.path.join(ROOT, "gluonperf", "workers", "script_site"),
         "launch's workers": os.path.join(ROOT, "gluonperf", "workers", "launch_site")}


def test_restore_sets_only_what_this_numpy_lacks():
    before = {name: vars(numpy).get(name) for name in numpy_aliases.REMOVED_IN_1_24}
    set_now = numpy_aliases.restore()
    if numpy.lib.NumpyVersion(numpy.__version__) < "1.24.0":
        assert set_now == [] and {n: vars(numpy).get(n) for n in before} == before
    with warnings.catch_warnings():  # numpy 1.20-1.23 warns on each use of them
        warnings.simplefilter("ignore", DeprecationWarning)
        for name, builtin in numpy_aliases.REMOVED_IN_1_24.items():
            assert getattr(numpy, name) is builtin
    assert numpy_aliases.restore() == []  # once


@pytest.mark.parametrize("site", sorted(SITES))
def test_a_script_that_imports_mxnet_without_gluonperf(site):
    # what a user's train.py does under `profile --` or `launch`: no gluonperf, mxnet directly
    code = ("import sys; print('numpy at start-up:', 'numpy' in sys.modules); import mxnet, numpy; "
            "print('mxnet', mxnet.__version__, 'gluonperf:', 'gluonperf' in sys.modules, 'np.bool:', numpy.bool)")
    env = clean_env(PYTHONPATH=SITES[site])
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "numpy at start-up: False" in done.stdout
    assert "mxnet 1.9.1 gluonperf: False np.bool: <class 'bool'>" in done.stdout

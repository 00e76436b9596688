"""gluonperf: measure and improve the computational performance of MXNet Gluon training.

Experiments live in one module per concern and return records; the CLIs
(`python -m gluonperf.bench`, `python -m gluonperf.train`) parse arguments,
call them, and hand the records to `gluonperf.cli.common.emit` (writers in `gluonperf.records`).
"""

import sys

__version__ = "0.1.0"


# What MXNet 1.9.1 imports when it loads that gluonperf never uses: {importing module: module}.
# mxnet.model imports scikit-learn (with SciPy's statistics and pandas) only so that its legacy
# FeedForward can subclass BaseEstimator; mxnet.contrib.quantization imports scipy.stats only
# for int8 calibration by KL divergence, mxnet.test_utils only for its random-distribution
# checks. All three fall back when the import fails (`object`; a clear error if someone does
# calibrate or run those checks).
_KEPT_OUT_OF_MXNET = {"mxnet.model": "sklearn", "mxnet.contrib.quantization": "scipy.stats",
                      "mxnet.test_utils": "scipy.stats"}
# MXNet 1.9.1 imports distutils at start-up for LooseVersion and StrictVersion alone. In a venv,
# setuptools' distutils shim answers that import by loading setuptools itself (with
# pkg_resources): 0.25 s of a 1.8 s `import mxnet` on the 2-core Zen 3 (docs/libraries.md). Where
# the standard library still has distutils (Python up to 3.11), MXNet gets that one: the same
# two classes.
_STDLIB_DISTUTILS_FOR = ("mxnet.numpy_op_fallback", "mxnet.numpy_dispatch_protocol")


def _imported_by(importers):
    """The first of `importers` on the stack of the import under way, or None."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_globals.get("__name__") in importers:
            return frame.f_globals["__name__"]
        frame = frame.f_back
    return None


class _KeepOutOfMXNet:
    """An import hook that keeps `_KEPT_OUT_OF_MXNET` out of MXNet's start-up, and gives MXNet the
    standard library's distutils.

    Those imports were more than half of every command's start (`python -X importtime -c
    "import gluonperf, mxnet"`; the figures are in docs/libraries.md).
    The hook makes those imports fail, from those modules only, as if the package were not
    installed; every other import of them, gluonperf's digits data set's included, goes on as
    usual. It acts only when gluonperf is imported before MXNet."""

    def find_spec(self, name, path=None, target=None):
        blocked = {importer for importer, module in _KEPT_OUT_OF_MXNET.items()
                   if name == module or name.startswith(module + ".")}
        importer = _imported_by(blocked) if blocked else None
        if importer:
            raise ImportError("gluonperf keeps %s out of %s (see gluonperf/__init__.py)" % (name, importer))
        if name == "distutils" and sys.version_info < (3, 12) and _imported_by(_STDLIB_DISTUTILS_FOR):
            import importlib.machinery
            import os
            return importlib.machinery.PathFinder.find_spec(name, [os.path.dirname(os.__file__)])
        return None


if "mxnet" not in sys.modules:
    sys.meta_path.insert(0, _KeepOutOfMXNet())


def _runtime_file(name):
    """gluonperf/runtime/NAME.py, loaded by its path: the package root imports nothing of gluonperf's
    (tests/test_layers.py), and these files, which need only the standard library, are loaded the
    same way by the sitecustomize files of profile's scripts and launch's workers."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runtime", name + ".py")
    spec = importlib.util.spec_from_file_location("_gluonperf_" + name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# On numpy 1.24 and later (Python 3.12), numpy's aliases that MXNet 1.9.1 still uses (np.bool...)
# are put back the moment MXNet is first imported (gluonperf/runtime/numpy_aliases.py says why).
_runtime_file("numpy_aliases").restore_before_mxnet()
# MXNet's operator functions are compiled once per machine, not in every process
# (gluonperf/runtime/operator_code.py says how). After numpy_aliases' hook, which must see `mxnet` first.
_runtime_file("operator_code").install()


class UserError(ValueError):
    """Bad input: the CLIs print it as one line and exit non-zero.

    A `ValueError`, as Gluon's own bad-argument errors are, so library callers that
    catch `ValueError` (e.g. around `split_and_load`) catch gluonperf's too."""


def error_line(error):
    """One line that says what went wrong. MXNet's errors begin with a C++ "Traceback"
    whose first line says nothing ("Traceback (most recent call last):"); their message is
    on the line that starts with "MXNetError:", or the last one."""
    lines = [l.strip() for l in str(error).strip().splitlines() if l.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].startswith("Traceback"):
        mx_line = next((l for l in lines if l.startswith("MXNetError:")), lines[-1])
        return mx_line[len("MXNetError:"):].strip() if mx_line.startswith("MXNetError:") else mx_line
    return lines[0]

"""gluonperf: measure and improve the computational performance of MXNet Gluon training.

Experiments live in one module per concern and return records; the CLIs
(`python -m gluonperf.bench`, `python -m gluonperf.train`) parse arguments,
call them, and hand the records to `gluonperf.cli.common.emit` (writers in `gluonperf.records`).
"""

__version__ = "0.1.0"


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


# What MXNet imports at start-up and gluonperf never uses (or uses later) is kept out of it
# (gluonperf/runtime/mxnet_imports.py says what and why).
_runtime_file("mxnet_imports").install()
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

"""gluonperf: measure and improve the computational performance of MXNet Gluon training.

Experiments live in one module per concern and return records; the CLIs
(`python -m gluonperf.bench`, `python -m gluonperf.train`) parse arguments,
call them, and hand the records to `gluonperf.cli.emit` (writers in `gluonperf.records`).
"""

import sys

__version__ = "0.1.0"


class _NoScikitLearnForMXNet:
    """An import hook that keeps scikit-learn out of MXNet's start-up.

    MXNet 1.9.1 imports scikit-learn (and with it SciPy's statistics and pandas) when it
    loads, only so that its legacy `mxnet.model.FeedForward` can subclass
    `BaseEstimator`. gluonperf never uses FeedForward, and that import is a fifth to a third of
    every command's start (0.5-0.8 of 2.4-2.9 s on a 2-core AMD EPYC, 2026-11-23). This hook makes
    that one import fail, as if scikit-learn were not installed (MXNet then uses `object`);
    every other import of scikit-learn, gluonperf's digits data set's included, goes on as
    usual. It acts only when gluonperf is imported before MXNet."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".", 1)[0] == "sklearn":
            frame = sys._getframe(1)
            while frame is not None:
                if frame.f_globals.get("__name__") == "mxnet.model":
                    raise ImportError("gluonperf keeps scikit-learn out of mxnet.model (see gluonperf/__init__.py)")
                frame = frame.f_back
        return None


if "mxnet" not in sys.modules:
    sys.meta_path.insert(0, _NoScikitLearnForMXNet())


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

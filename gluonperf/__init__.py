"""gluonperf: measure and improve the computational performance of MXNet Gluon training.

Experiments live in one module per concern and return records; the CLIs
(`python -m gluonperf.bench`, `python -m gluonperf.train`) parse arguments,
call them, and hand the records to `gluonperf.cli.emit` (writers in `gluonperf.records`).
"""

__version__ = "0.1.0"


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

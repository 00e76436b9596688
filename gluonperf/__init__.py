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

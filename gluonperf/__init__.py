"""gluonperf: measure and improve the computational performance of MXNet Gluon training.

Experiments live in one module per concern and return records; the CLIs
(`python -m gluonperf.bench`, `python -m gluonperf.train`) parse arguments,
call them, and hand the records to `gluonperf.report`.
"""

__version__ = "0.1.0"


class UserError(Exception):
    """Bad input from the user: the CLIs print it as one line and exit non-zero."""

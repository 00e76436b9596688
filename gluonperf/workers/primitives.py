"""python -m gluonperf.workers.primitives '<json>': infer's reader of oneDNN's verbose output
(`inference.primitives.read` starts it with DNNL_VERBOSE=1): per graph rung, a warm call, then one
call with fd 1 in a file; its answer {rung: {'lines': [...]} or {'error': ...}} as one JSON line.
"""
import ctypes
import os
import sys
import tempfile

from ..runtime.wire import worker_main


def read_verbose(params):
    """Load each rung, call it once warm, then once with oneDNN's lines (C's stdio, fd 1) captured."""
    import mxnet as mx
    import numpy as np
    from .. import error_line
    from ..inference.ladder import Rung, load
    ctx = mx.Context(params["device_type"], params["device_id"])
    libc = ctypes.CDLL(None)
    real = os.dup(1)
    answers = {}
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 1)  # oneDNN prints with C's stdio on fd 1
        for text in params["rungs"]:
            rung = Rung.from_text(text)
            try:
                forward = load(rung, ctx)
                x = mx.nd.array(np.random.RandomState(0).uniform(size=(params["batch_size"],) + rung.input_shape),
                                ctx=ctx, dtype="float32")
                forward(x).wait_to_read()
                mx.nd.waitall()
                sys.stdout.flush()
                libc.fflush(None)
                start = os.lseek(1, 0, os.SEEK_CUR)
                forward(x).wait_to_read()
                mx.nd.waitall()
                libc.fflush(None)
                end = os.lseek(1, 0, os.SEEK_CUR)
                answers[rung.name] = {"lines": os.pread(1, end - start, start).decode(errors="replace").splitlines()}
            except Exception as e:  # noqa: BLE001 (one rung's failure is its own answer)
                answers[rung.name] = {"error": "%s: %s" % (type(e).__name__, error_line(e))}
        sys.stdout.flush()
        libc.fflush(None)
        os.dup2(real, 1)
    return answers


if __name__ == "__main__":
    worker_main(read_verbose, __spec__.name, "python -m gluonperf.infer")

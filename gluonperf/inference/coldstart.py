"""Cold start: from a process's start to its first answer, in parts, as a scale-out event or a
new batch size pays it.

`measure` starts a fresh Python process (`python -m gluonperf.workers.coldstart`, through
`runtime.transport.run_worker`: its own process group, killed whole on a timeout or when the
command stops) that loads one precision rung and answers. Each of its `PARTS` (`import_s`,
`load_s`, `first_call_s`, `new_shape_call_s`, `steady_call_s`, `total_s`) is timed to a sync
point (`wait_to_read`), the inputs made before each timed call, outside it.
docs/precision_ladder.md ("Cold start") says what each part holds.
"""
import time

STEADY_CALLS = 10
PARTS = ("import_s", "load_s", "first_call_s", "new_shape_call_s", "steady_call_s", "total_s")
MODULE = "gluonperf.workers.coldstart"


def measure(rung, ctx, batch_sizes=(1, 64), timeout=300, steady_calls=STEADY_CALLS):
    """A fresh process, start to first answer, in parts: 'import_s', 'load_s', 'first_call_s'
    (graph and oneDNN primitives built), 'new_shape_call_s' (first call at the second batch size),
    'steady_call_s' (median of `steady_calls` later calls at that size), 'total_s'.

    Also 'batch_sizes' and 'steady_calls'. ValueError for a rung that could not be built, batch
    sizes that are not two positive ones or fewer than one steady call; RuntimeError when the
    process fails or gives no answer within `timeout` seconds (it is killed, with anything it
    started)."""
    import subprocess
    from ..runtime import transport
    if rung.error:
        raise ValueError("%s: %s" % (rung.name, rung.error))
    sizes = [int(n) for n in batch_sizes]
    if len(sizes) != 2 or min(sizes) < 1:
        raise ValueError("batch_sizes %s: give two positive batch sizes, the first call's and the new shape's"
                         % (tuple(batch_sizes),))
    if int(steady_calls) < 1:
        raise ValueError("steady_calls %r: give at least 1" % (steady_calls,))
    settings = {"rung": rung.to_text(), "device_type": ctx.device_type, "device_id": ctx.device_id,
                "batch_sizes": sizes, "launched": time.time(), "steady_calls": int(steady_calls)}
    try:
        return transport.run_worker(MODULE, settings, "cold start of the %s rung" % rung.name, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError("cold start of the %s rung gave no answer in %g s; it was stopped" % (rung.name, timeout))

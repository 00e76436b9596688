"""The operators of a profiled step, read from what MXNet's profiler gives: each one's phase
(from its name), the time at least one operator ran and each context's wait for the others
(from the Chrome trace), and their rate against the machine's ceiling. profile --model
(experiments/step_time.py) and profile -- (script/) read their operator tables with it.
"""
from ..records import result
from ..runtime.contexts import describe

GAPS = "(no operator running)"
WAITING = "%s waiting (other contexts working)"  # a context idle while another one runs operators

SYNC_OPS = ("WaitForVar", "WaitForAll")  # engine operations that wait: no work of their own


def phase(name):
    """forward / backward / update / comm / sync, read from an operator's name."""
    if name in SYNC_OPS:
        return "sync"
    if name.startswith("_backward"):
        return "backward"
    if "update" in name:
        return "update"
    # the kvstore's work; _grad_add: kvstore flat's sums (gluonperf.training.flat; grad_req 'add' is not used here)
    if "copy" in name.lower() or name in ("ElementwiseSum", "_grad_add") or name.startswith("KVStore"):
        return "comm"
    return "forward"


def trace_devices(trace):
    """{pid: device} of a loaded Chrome trace: MXNet names the process of each device's
    operators 'cpu/0', 'gpu/1', ...; returned as gluonperf writes contexts ('cpu0', 'gpu1')."""
    out = {}
    for e in trace["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name":
            kind, _, index = str(e.get("args", {}).get("name", "")).partition("/")
            if kind in ("cpu", "gpu") and index.isdigit():
                out[e.get("pid")] = "%s%s" % (kind, index)
    return out


def busy_seconds(trace, pids=None):
    """Seconds during which at least one operator (other than the engine's waits) ran,
    from a loaded Chrome trace; only those of the processes `pids` (devices) if given."""
    intervals, open_ = [], {}
    for e in trace["traceEvents"]:
        if not isinstance(e, dict) or e.get("cat") != "operator" or e.get("name") in SYNC_OPS:
            continue
        if pids is not None and e.get("pid") not in pids:
            continue
        if e.get("ph") == "X":
            intervals.append((e["ts"], e["ts"] + e.get("dur", 0)))
        elif e.get("ph") == "B":
            open_.setdefault((e.get("pid"), e.get("tid")), []).append(e["ts"])
        elif e.get("ph") == "E":
            stack = open_.get((e.get("pid"), e.get("tid")))
            if stack:
                intervals.append((stack.pop(), e["ts"]))
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total / 1e6  # the trace's clock is in microseconds


def context_waits(trace, contexts):
    """{context: seconds} each of several contexts ran none of its operators while another
    context ran some: the time it waited (for the other contexts' gradients, or for work the
    engine queued behind theirs), over the whole trace. Empty for one context."""
    names = [describe([c]) for c in contexts]
    if len(names) < 2:
        return {}
    devices = trace_devices(trace)
    pids = {name: {pid for pid, d in devices.items() if d == name} for name in names}
    anyone = busy_seconds(trace, set().union(*pids.values()))
    return {name: max(0.0, anyone - busy_seconds(trace, pids[name])) for name in names}


def with_ceiling(operator_results, peak):
    """Operator Results with achieved GFLOP/s (FLOPs per step over time per step) and its
    fraction of the ceiling `peak` (FLOP/s), where the operator has a FLOP count."""
    out = []
    for r in operator_results:
        m = dict(r.metrics)
        if m.get("flops") and m.get("time_s"):
            rate = m["flops"] / m["time_s"]
            m.update(gflop_per_s=rate / 1e9, of_ceiling=rate / peak)
        out.append(result(r.bench, r.name, **m))
    return out

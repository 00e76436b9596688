"""The probe of the user's model, inside the script (profile --'s driver and tune --'s listener
use it; it never spawns a process): which Block is the model the Trainer updates, what it is,
its FLOPs, the model alone timed as the script runs it against hybridized static (its
parameters, gradients and hybridization put back afterwards), and the operators of the steps
run under MXNet's profiler, as plain data for the wire.
"""
import math


def part(fn):
    """fn()'s value, or the one line of what it raised (a part of the report that failed)."""
    from .. import error_line
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 (the script must run on)
        return "%s: %s" % (type(e).__name__, error_line(e))


def arrays_of(args):
    import mxnet as mx
    return [a for a in (args or ()) if isinstance(a, mx.nd.NDArray)]


def process_of(prof):
    """Where the script runs: its contexts and, in a dist_sync job, its rank."""
    from ..runtime.contexts import describe
    trainer = prof.trainer
    kv = getattr(trainer, "_kvstore", None)
    dist = kv is not None and "dist" in getattr(kv, "type", "")
    return {"contexts": describe(prof.contexts), "rank": kv.rank if dist else None,
            "num_workers": kv.num_workers if dist else None, "kvstore": getattr(kv, "type", None),
            "parameters": len(getattr(trainer, "_params", []))}


def find_model(trainer, calls, steps):
    """The Block the Trainer updates, among the outermost Blocks called in the measured steps
    (`calls`: [block, args, images]): the one holding most of the Trainer's parameters (the
    smallest, among equals). Returns (block, its args, images it saw per step, a note)."""
    if trainer is None:
        return None, None, None, "no Trainer stepped"
    wanted = {id(p) for p in getattr(trainer, "_params", [])}
    best = None
    for block, args, images in calls:
        try:
            have = {id(p) for p in block.collect_params().values()}
        except Exception:  # noqa: BLE001
            continue
        covered = len(wanted & have)
        if covered and args is not None and (best is None or (covered, -len(have)) > best[0]):
            best = ((covered, -len(have)), block, args, images)
    if best is None:
        return None, None, None, ("no Block called with arrays in the measured steps holds the Trainer's parameters "
                                  "(a model called inside another framework's code, or not through Block.__call__)")
    (covered, _), block, args, images = best
    note = None if covered == len(wanted) else "the model found holds %d of the %d parameters the Trainer updates" % (
        covered, len(wanted))
    return block, args, images / max(1, steps), note


def describe_model(block, args, images):
    from ..measure.blocks import parameter_count
    arrays = arrays_of(args)
    return {"model": type(block).__name__, "prefix": getattr(block, "prefix", None),
            "input_shape": list(arrays[0].shape), "inputs": len(arrays), "images_per_step": images,
            "parameter_values": parameter_count(block),
            "hybridized": bool(getattr(block, "_active", False))}


def flops_of(block, args):
    """The model's FLOPs per image (measure.flops.count_flops), or why there are none."""
    import mxnet as mx
    from ..measure.flops import count_flops
    arrays = arrays_of(args)
    if not isinstance(block, mx.gluon.HybridBlock):
        return "no FLOPs: %s is not a HybridBlock (FLOPs are counted on its symbol graph)" % type(block).__name__
    if len(arrays) != 1 or len(args) != 1:
        return "no FLOPs: the model takes %d inputs (counted for one input only)" % len(args)
    count = count_flops(block, arrays[0].shape[1:])
    return {"forward_by_op": count.forward_by_op, "backward_by_op": count.backward_by_op,
            "layers_by_op": count.layers_by_op, "input_shape": list(count.input_shape),
            "matmul_forward": count.matmul_forward, "uncounted": list(count.uncounted),
            "forward": count.forward, "training": count.training}


def snapshot(block):
    """Copies of a model's parameters and gradients on every context, and which of its Blocks
    are hybridized: timing its Blocks alone moves BatchNorm's statistics and writes gradients."""
    import mxnet as mx
    saved = []
    for p in block.collect_params().values():
        try:
            data = p.list_data()
        except Exception:  # noqa: BLE001 (not initialised)
            continue
        grads = p.list_grad() if p.grad_req != "null" else []
        saved.append((data, [d.copy() for d in data], grads, [g.copy() for g in grads]))
    from ..measure.blocks import walk
    active = [(b, b._active) for _, _, b in walk(block, math.inf) if isinstance(b, mx.gluon.HybridBlock)]
    flags = {id(b): list(b._flags) for b, _ in active}
    return saved, active, flags


HYBRIDIZE_ROUNDS = 5       # interleaved rounds of the model alone, as the script runs it against hybridized static
HYBRIDIZE_REGION_S = 0.05  # each round times enough steps of each to last about this long (1 to 20 steps)


def hybridize_alone(block, args, rounds=HYBRIDIZE_ROUNDS):
    """The model the Trainer updates, timed alone on the input it got in the script (`args`): one
    training step's forward and backward (under autograd.record, backward from a gradient of ones on
    its floating-point outputs, as the Blocks table times the model), as the script runs it (not
    hybridized, or hybridized without static_alloc) against hybridize(static_alloc=True,
    static_shape=True) (a gluon.nn.Sequential of HybridBlocks turned into a HybridSequential first,
    as `tune --` does), in `rounds` interleaved rounds (which goes first alternates), each mode
    re-applied and run once untimed before its timed steps, every step fenced (mx.nd.waitall).
    Plain data: {'model_kind', 'mode', 'steps_per_round', 'as_is_s', 'static_s' (seconds per step, per
    round), 'batch_size', 'ctx'}, or {'skipped': why}. The model is put back as it was: its class
    (a Sequential), its parameters and gradients, and how each of its Blocks is hybridized."""
    import time
    import mxnet as mx
    from ..measure.blocks import Step, walk
    from ..training.hybrid_blocks import hybrid_kind, hybrid_mode, hybridize
    kind, mode = hybrid_kind(block), hybrid_mode(block)
    base = {"model_kind": kind, "mode": mode, "model": type(block).__name__}
    if kind == "imperative":
        return dict(base, skipped="%s is neither a HybridBlock nor a gluon.nn.Sequential of HybridBlocks: it cannot "
                                  "be hybridized as it is" % type(block).__name__)
    if mode == "static":
        return dict(base, skipped="the model is already hybridized with static_alloc and static_shape")
    arrays = arrays_of(args)
    if len(arrays) != len(args or ()):
        return dict(base, skipped="the model takes arguments that are not arrays")
    saved = snapshot(block)
    sequentials = [(b, set(vars(b))) for _, _, b in walk(block, math.inf) if type(b) is mx.gluon.nn.Sequential]
    try:
        step = Step(block, list(args), None, None)
        step.check()  # as the script runs it: the heads (ones) of its outputs
        hybridize(block, "static")  # a Sequential becomes a HybridSequential here, in place
        found = [(b, was, saved[2][id(b)]) for b, was in saved[1]] + [(b, False, []) for b, _ in sequentials]
        step.forward_backward()
        mx.nd.waitall()

        def as_is():
            for b, was, flags in found:
                b._active, b._flags = was, list(flags)
                b._clear_cached_op()

        def static():
            block.hybridize(static_alloc=True, static_shape=True)

        def timed(setup, n):
            setup()
            step.forward_backward()  # untimed: builds the graph of this mode
            mx.nd.waitall()
            start = time.perf_counter()
            for _ in range(n):
                step.forward_backward()
                mx.nd.waitall()
            return (time.perf_counter() - start) / n

        first = timed(as_is, 1)
        n = max(1, min(20, int(math.ceil(HYBRIDIZE_REGION_S / max(first, 1e-6)))))
        samples = {"as_is": [], "static": []}
        for r in range(rounds):
            order = [("as_is", as_is), ("static", static)]
            for name, setup in (order if r % 2 == 0 else order[::-1]):
                samples[name].append(timed(setup, n))
    finally:
        for b, keys in sequentials:  # back to the script's own class, without a HybridBlock's attributes
            for key in set(vars(b)) - keys:
                del b.__dict__[key]
            b.__class__ = mx.gluon.nn.Sequential
        restore(saved)
    return dict(base, steps_per_round=n, rounds=rounds, as_is_s=samples["as_is"], static_s=samples["static"],
                batch_size=arrays[0].shape[0] if arrays and arrays[0].shape else None, ctx=str(arrays[0].context))


def restore(saved_state):
    import mxnet as mx
    saved, active, flags = saved_state
    for data, copies, grads, grad_copies in saved:
        for target, copy in list(zip(data, copies)) + list(zip(grads, grad_copies)):
            copy.copyto(target)
    for b, was in active:
        if b._active != was or list(b._flags) != flags[id(b)]:
            b._active, b._flags = was, list(flags[id(b)])
            b._clear_cached_op()
    mx.nd.waitall()


def operators_of(prof):
    """The profiled steps' operators as plain data: {name: [calls, seconds]} over `steps`
    steps, their mean step time, the time some operator ran (busy_s) and each context's wait."""
    if not prof.operators:
        return {"note": prof.operator_note} if prof.operator_note else None
    from ..measure.operators import busy_seconds, context_waits
    profiled = [s for s in prof.steps if s["phase"] == "profiled"]
    if not profiled:
        return None
    ops = {name: [stat["Count"], stat["Total"] / 1000.0]
           for name, stat in prof.operators.get("Time", {}).get("operator", {}).items()}
    trace = prof.trace or {"traceEvents": []}
    return {"steps": len(profiled), "step_s": sum(s["step_s"] for s in profiled) / len(profiled), "ops": ops,
            "busy_s": busy_seconds(trace), "context_waits": context_waits(trace, prof.contexts),
            "note": prof.operator_note}



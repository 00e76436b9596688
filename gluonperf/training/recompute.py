"""Gradient checkpointing for Gluon: trade compute for memory by recomputing activations.

`segments(net, n, sample_shape)` cuts a sequential model (a `HybridSequential`, nested ones
opened up, or a GluonCV classifier's `features` then `output`) into n segments of balanced
activation sizes; `checkpointed_forward_backward(segs, loss_fn, xs, ys)` is the step (the
signature and results of `steps.forward_backward`), keeping only each segment's input and
recomputing the segments last first; `checkpointed(net, n, sample_shape, hybridize)` is what
`steps.train_steps` calls in its place.

The one thing to know: memory is saved only if it is given back, so segments are hybridized
without static_alloc and glibc's `malloc_trim(0)` runs after each segment's backward.
How the step runs: docs/commands/bench.md, "python -m gluonperf.bench footprint"; what it
saves: docs/levers.md, "Memory levers".
"""
import ctypes
import json

import mxnet as mx
from mxnet import autograd, gluon
from mxnet import symbol as sym
from mxnet.gluon import nn
from mxnet.gluon.parameter import DeferredInitializationError

from .. import UserError

_SEQUENTIAL = (nn.HybridSequential, nn.Sequential)


# --- cutting a model into units and segments ---------------------------------------

def units(net):
    """The blocks a model can be cut between, in the order its forward calls them:
    the children of a (Hybrid)Sequential with nested sequential containers opened up,
    or, for a GluonCV classifier, the units of `features` followed by `output`."""
    if type(net) in _SEQUENTIAL:  # not subclasses: HybridConcurrent is one, and not a chain
        out = []
        for child in net._children.values():
            out.extend(units(child) if type(child) in _SEQUENTIAL else [child])
        return out
    features, output = getattr(net, "features", None), getattr(net, "output", None)
    if type(features) in _SEQUENTIAL and isinstance(output, gluon.Block):
        return units(features) + [output]
    raise UserError("gradient checkpointing cuts sequential models; %s is neither a HybridSequential nor a "
                    "model made of features then output" % type(net).__name__)


def _graph(blocks):
    """The graph made by calling `blocks` in turn on a symbol 'data': its nodes (operator,
    attributes, inputs; the names of variables, i.e. parameters) and outputs. Operator
    names are left out (a block with an empty prefix names its operators after the
    enclosing block, which differs once the chain is cut), and so are the version
    counters that tracing the same parameters twice advances."""
    x = sym.var("data")
    for block in blocks:
        x = block(x)
    graph = json.loads(x.tojson())
    nodes = [(n["op"], n["name"] if n["op"] == "null" else "", sorted(n.get("attrs", {}).items()), [tuple(i[:2]) for i in n["inputs"]])
             for n in graph["nodes"]]
    return nodes, [tuple(h[:2]) for h in graph["heads"]]


def _check_hybrid(parts, what):
    for part in parts:
        if not isinstance(part, gluon.HybridBlock):
            raise UserError("gradient checkpointing needs HybridBlocks; %s holds a %s"
                            % (what, type(part).__name__))


def check_cut(net, parts):
    """UserError unless running `parts` one after the other builds exactly `net`'s graph
    (a model whose forward does more than call its units in turn cannot be cut)."""
    _check_hybrid([net], "the model")
    if _graph([net]) != _graph(parts):
        raise UserError("%s's forward does more than run its blocks one after the other; it cannot be cut "
                        "into segments for gradient checkpointing" % type(net).__name__)


def activation_sizes(parts, sample_shape):
    """Elements of every intermediate output of each part, for one sample (symbolic
    shape inference: nothing is allocated or initialised). A part's recorded
    activations, and with them its share of a step's memory, scale with this."""
    shape = (1,) + tuple(sample_shape)
    sizes = []
    for part in parts:
        out = part(sym.var("data"))
        internals = out.get_internals()
        inputs = set(internals.list_arguments()) | set(internals.list_auxiliary_states())
        _, out_shapes, _ = internals.infer_shape(data=shape)
        names = internals.list_outputs()
        total = 0
        for name, s in zip(names, out_shapes):
            if name not in inputs and s is not None:
                n = 1
                for d in s:
                    n *= d
                total += n
        sizes.append(total)
        _, (shape,), _ = out.infer_shape(data=shape)
    return sizes


def partition(costs, n):
    """Cut `costs` (in order) into `n` contiguous non-empty groups so that the largest
    group sum is as small as possible; returns the start index of each group."""
    if not 1 <= n <= len(costs):
        raise ValueError("cannot cut %d parts into %d segments" % (len(costs), n))
    m = len(costs)
    prefix = [0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[k][i]: smallest largest-group over the first i costs cut into k groups
    best = [[inf] * (m + 1) for _ in range(n + 1)]
    cut = [[0] * (m + 1) for _ in range(n + 1)]
    best[0][0] = 0
    for k in range(1, n + 1):
        for i in range(k, m + 1):
            for j in range(k - 1, i):
                value = max(best[k - 1][j], prefix[i] - prefix[j])
                if value < best[k][i]:
                    best[k][i], cut[k][i] = value, j
    starts, i = [], m
    for k in range(n, 0, -1):
        i = cut[k][i]
        starts.append(i)
    return starts[::-1]


def check_segments(net, n):
    """UserError unless `net` can be cut into `n` segments; returns its units."""
    if n < 1:
        raise UserError("the number of checkpoint segments must be at least 1 (0 turns checkpointing off)")
    parts = units(net)
    _check_hybrid(parts, "%s's body" % type(net).__name__)
    if n > len(parts):
        raise UserError("the model can be cut into at most %d checkpoint segments (it has %d blocks in "
                        "sequence); got %d" % (len(parts), len(parts), n))
    check_cut(net, parts)
    return parts


def segments(net, n, sample_shape, hybridize=None):
    """Cut `net` into `n` segments, each a HybridSequential holding a contiguous run of
    the model's units (the same blocks, so the same parameters), with the cut points
    balancing activation sizes. `hybridize`: None (imperative) or the keyword arguments
    of `hybridize()` ({} or {'static_alloc': True, ...}); with it each segment becomes
    one cached graph, without static_alloc / static_shape (see the module's docstring)."""
    parts = check_segments(net, n)
    starts = partition(activation_sizes(parts, sample_shape), n)
    ends = starts[1:] + [len(parts)]
    segs = []
    for i, (a, b) in enumerate(zip(starts, ends)):
        # an explicit prefix: a generated one would advance Gluon's global name counter
        seg = nn.HybridSequential(prefix="%ssegment%d_" % (net.prefix, i))
        seg.add(*parts[a:b])
        if i < n - 1:
            _refuse_dropout(seg, i)
        seg.aux_states = _aux_states(seg)
        if hybridize is not None:
            seg.hybridize(**segment_flags(hybridize))
        segs.append(seg)
    _refuse_shared(segs)
    return segs


def segment_flags(hybridize):
    """The hybridize() flags segments get for the model's `hybridize` flags (None:
    imperative): the same without static_alloc and static_shape."""
    if hybridize is None:
        return None
    return {k: v for k, v in hybridize.items() if k not in ("static_alloc", "static_shape")}


def _refuse_dropout(block, index):
    stack = [block]
    while stack:
        b = stack.pop()
        if isinstance(b, nn.Dropout) and b._rate > 0:
            raise UserError("segment %d holds %s, and a recomputed Dropout would draw a different mask; "
                            "use fewer segments so that it falls into the last one" % (index, b.name))
        stack.extend(b._children.values())


def _refuse_shared(segs):
    owner = {}
    for i, seg in enumerate(segs):
        for name, p in seg.collect_params().items():
            if owner.setdefault(id(p), i) != i:
                raise UserError("parameter %s is used by segments %d and %d; checkpointing writes each "
                                "gradient once, so shared parameters must stay in one segment"
                                % (name, owner[id(p)], i))


# --- the step ---------------------------------------------------------------------

def _aux_states(seg):
    """The segment's auxiliary states (BatchNorm's running mean and variance): the
    parameters its graph changes in place rather than through gradients."""
    names = set(seg(sym.var("data")).list_auxiliary_states())
    return tuple(p for name, p in seg.collect_params().items() if name in names)


def _saved_states(seg, x, ctx):
    """Copies of the segment's auxiliary states on `ctx`. If the model's initialisation
    was deferred and this is its first batch, a predict-mode forward (which updates no
    statistics, in any kernel) finishes it first."""
    try:
        return [p.data(ctx).copy() for p in seg.aux_states]
    except DeferredInitializationError:
        with autograd.pause(train_mode=False):
            seg(x)
        return [p.data(ctx).copy() for p in seg.aux_states]


def _trim():
    """Hand memory that glibc's malloc holds free back to the operating system (no-op
    where there is no glibc)."""
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM = None


def _release(contexts, mode):
    """Between segments of the backward: wait until the segment just done has finished
    (so the arrays it dropped are freed) and, on CPU, hand the freed memory back (see
    the module's docstring)."""
    if mode == "none":
        return
    mx.nd.waitall()
    if mode == "trim" and any(c.device_type == "cpu" for c in contexts):
        _trim()


RELEASE = ("trim", "sync", "none")


def checkpointed_forward_backward(segs, loss_fn, xs, ys, release="trim"):
    """Forward and backward of the segmented model on every context's slice, recomputing
    each segment's activations in the backward. Same results as
    `steps.forward_backward`: (outputs, losses), gradients in the parameters.

    The contexts go through each phase together (every context's slice of segment k is
    recomputed and back-propagated before any goes on to segment k-1), so they still
    run in parallel. `release`: after each segment's backward, 'trim' waits for it and
    returns freed CPU memory to the system; 'sync' only waits; 'none' does neither."""
    if release not in RELEASE:
        raise ValueError("release must be one of %s" % ", ".join(RELEASE))
    contexts = [x.context for x in xs]
    inputs = [[x] for x in xs]  # per context: the input of every segment
    with autograd.pause(train_mode=True):  # training-mode forward (batch statistics), nothing recorded
        for seg in segs[:-1]:
            for ctx, kept in zip(contexts, inputs):
                saved = _saved_states(seg, kept[-1], ctx)
                kept.append(seg(kept[-1]))
                for p, value in zip(seg.aux_states, saved):  # the recompute will update them
                    value.copyto(p.data(ctx))
    outputs, losses = [], []
    with autograd.record():
        for kept, y in zip(inputs, ys):
            if len(segs) > 1:
                kept[-1].attach_grad()
            outputs.append(segs[-1](kept[-1]))
            losses.append(loss_fn(outputs[-1], y))
    autograd.backward(losses)
    for k in range(len(segs) - 2, -1, -1):
        _release(contexts, release)
        heads, outs = [], []
        for kept in inputs:
            heads.append(kept[k + 1].grad)
            kept[k + 1] = None  # this boundary is no longer needed: free it
            if k > 0:
                kept[k].attach_grad()
        with autograd.record():
            for kept in inputs:
                outs.append(segs[k](kept[k]))
        autograd.backward(outs, heads)
        del heads, outs
    return outputs, losses


def checkpointed(net, n, sample_shape, hybridize=None, release="trim"):
    """A drop-in for `steps.forward_backward(net, loss_fn, xs, ys)` that runs `net`
    cut into `n` segments with recomputation (`segments`, `checkpointed_forward_backward`).
    `net` itself keeps working as before (for evaluation, saving), hybridized like the
    segments (without static_alloc, whose buffers would stay allocated beside theirs);
    the segments are an attribute of the returned function."""
    segs = segments(net, n, sample_shape, hybridize)
    if hybridize is not None:
        net.hybridize(**segment_flags(hybridize))

    def forward_backward(model, loss_fn, xs, ys):
        if model is not net:
            raise ValueError("this checkpointed step was made for another model")
        return checkpointed_forward_backward(segs, loss_fn, xs, ys, release=release)
    forward_backward.segments = segs
    return forward_backward

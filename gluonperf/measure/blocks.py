"""Which Block of my model is slow here: a per-Block profile of a training step (the view of
DeepSpeed's flops-profiler, for Gluon), hybridized or not. `walk`, `parameter_count` and `Step`
(the model's whole training step) serve profile -- (script/probe.py) too.

    rows = block_profile(net, [x], mx.cpu(), depth=2, loss=Loss(loss_fn, y), peak_flops=peak)

One row per Block down to `depth` (parameters, FLOPs, forward and backward times, share of the
step); the last row checks the depth-1 Blocks' sum against the step. The one thing to know:
MXNet's profiler cannot name a hybridized graph's events by Block, so each Block is timed alone,
without the fusion across its boundaries: the shares are indicative, the check says by how much.
Columns, method and limits: docs/commands/profile.md, "The Blocks table".
"""
import math
import time
from dataclasses import dataclass
from typing import Callable

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

from .. import UserError, error_line
from .flops import count_flops
from .harness import measure_interleaved, ndarrays_in, sync
from .stats import Interval, median_interval, minmax_level, ratio_interval
from ..records import result
from .timing import Timing

BENCH = "blocks"
MARGIN = 0.25  # the depth-1 Blocks' sum may differ from the step by this much and pass the check
MODEL = "(model)"  # the name of the row of the whole model (depth 0), timed as the step: with the loss
STEP = "step"  # the label of the step's timings
SUM = "sum of depth-1 Blocks"
FUSION_NOTE = ("each Block is timed alone: a hybridized one runs its own graph, without the fusion and bulk "
               "execution across Block boundaries of the whole graph, and each call pays its own overheads; "
               "shares are indicative")


def walk(net, depth):
    """[(path, depth, block)] of `net` (path '', depth 0) and its registered children down to
    `depth`, in the order the model registered them. A Block registered twice (shared) appears
    once, under its first path."""
    out, seen = [], set()

    def visit(block, path, level):
        if id(block) in seen:
            return
        seen.add(id(block))
        out.append((path, level, block))
        if level < depth:
            for name, child in block._children.items():
                visit(child, name if not path else path + "." + name, level + 1)
    visit(net, "", 0)
    return out


def parameter_count(block):
    """Number of values in `block`'s parameters (its children's included, shared ones once);
    None while a shape is not known yet (deferred initialisation)."""
    total, seen = 0, set()
    for p in block.collect_params().values():
        if id(p) in seen:
            continue
        seen.add(id(p))
        if p.shape is None or any(int(s) <= 0 for s in p.shape):
            return None
        total += int(np.prod(p.shape))
    return total


def _floating(array):
    """Whether an NDArray holds floating-point values (bfloat16 is a structured dtype in MXNet 1.9)."""
    return np.issubdtype(array.dtype, np.floating) or getattr(array.dtype, "names", None) == ("bfloat16",)


def _copy(value, model_inputs, gradients):
    """A copy of an argument (nested lists kept), detached from any graph; floating-point
    arrays that are not the model's own inputs get a gradient buffer (appended to `gradients`)."""
    if isinstance(value, mx.nd.NDArray):
        copy = value.copy()
        if _floating(value) and not any(value is x for x in model_inputs):
            copy.attach_grad()
            gradients.append(copy)
        return copy
    if isinstance(value, (list, tuple)):
        return type(value)(_copy(v, model_inputs, gradients) for v in value)
    return value


def _hybrid_blocks(net):
    return [b for _, _, b in walk(net, math.inf) if isinstance(b, gluon.HybridBlock)]


def capture(net, inputs, depth):
    """One forward of `net` on `inputs` (train mode, not recorded) with a pre-hook on every
    Block down to `depth`: {id(block): (args of its first call, number of calls)}. Hybridized
    Blocks run imperatively for this call (their cached graphs are kept)."""
    seen = {}

    def hook(block, args):
        key = id(block)
        if key in seen:
            seen[key][1] += 1
        else:
            seen[key] = [args, 1]
    handles = [block.register_forward_pre_hook(hook) for _, _, block in walk(net, depth)]
    active = [(b, b._active) for b in _hybrid_blocks(net)]
    try:
        for b, _ in active:
            b._active = False
        with autograd.train_mode():
            net(*inputs)
        sync()
    finally:
        for b, was in active:
            b._active = was
        for h in handles:
            h.detach()
    return {k: (args, calls) for k, (args, calls) in seen.items()}


def _trainable(block):
    return any(p.grad_req != "null" for p in block.collect_params().values())


class _Timed:
    """A Block called alone on its captured inputs: `forward()` and `forward_backward()`."""

    def __init__(self, block, args, model_inputs):
        self.block = block
        self.gradients = []
        self.args = [_copy(a, model_inputs, self.gradients) for a in args]
        self.heads = None
        self.differentiable = bool(self.gradients) or _trainable(block)
        self.note = None if self.differentiable else \
            "no backward: nothing in it needs a gradient (no trainable parameters; its inputs are the model's)"

    def _outputs(self):
        out = self.block(*self.args)
        return [o for o in ndarrays_in(out) if _floating(o)]

    def forward(self):
        with autograd.record():
            self._outputs()

    def forward_backward(self):
        with autograd.record():
            outs = self._outputs()
        autograd.backward(outs, head_grads=self.heads)

    def check(self):
        """Run forward and backward once (untimed: also the first call, which builds a hybridized
        graph); raises what the forward raises. A backward that fails leaves the Block timed
        forward only, with a note."""
        with autograd.record():
            outs = self._outputs()
        sync()
        if not outs and self.differentiable:
            self.differentiable, self.note = False, "no backward: no floating-point output"
        self.heads = [mx.nd.ones_like(o) for o in outs]
        if self.differentiable:
            try:
                autograd.backward(outs, head_grads=self.heads)
                sync()
            except Exception as e:
                self.differentiable, self.note = False, "no backward: %s" % error_line(e)


class Step:
    """The whole step: the model's forward, the loss (or a head gradient of ones without one),
    and backward."""

    def __init__(self, net, inputs, loss_fn, labels):
        self.net, self.inputs, self.loss_fn, self.labels = net, list(inputs), loss_fn, labels
        self.heads = None

    def _loss(self):
        out = self.net(*self.inputs)
        if self.loss_fn is not None:
            return [self.loss_fn(out, self.labels)], None
        outs = [o for o in ndarrays_in(out) if _floating(o)]
        return outs, self.heads

    def forward(self):
        with autograd.record():
            self._loss()

    def forward_backward(self):
        with autograd.record():
            outs, heads = self._loss()
        autograd.backward(outs, head_grads=heads)

    def check(self):
        with autograd.record():
            out = self.net(*self.inputs)
            outs = [o for o in ndarrays_in(out) if _floating(o)]
            self.heads = [mx.nd.ones_like(o) for o in outs]
        self.forward_backward()
        sync()


def _median_interval(samples):
    """The median of `samples` with its order-statistic interval (stats.median_interval, which
    needs 6 samples for 95%); with fewer, min..max at its level (stats.minmax_level).
    Order statistics do not care for a shift, so values <= 0 (a difference) are shifted first."""
    n = len(samples)
    shift = 1.0 - min(samples) if min(samples) <= 0 else 0.0
    iv = median_interval([s + shift for s in samples])
    if not iv.high < math.inf:
        iv = Interval(iv.estimate, min(samples) + shift, max(samples) + shift, n, minmax_level(n), "min..max")
    return Interval(iv.estimate - shift, iv.low - shift, iv.high - shift, n, iv.level, iv.method)


def _flops(block, args, batch):
    """(forward GFLOP, training GFLOP) per batch of `block` on `args` by count_flops, and a note
    (why there are none, or what is not counted)."""
    if not isinstance(block, gluon.HybridBlock):
        return None, None, "no FLOPs: not a HybridBlock"
    arrays = [a for a in args if a is not None]
    if isinstance(block, gluon.rnn.rnn_layer._RNNLayer):
        arrays = arrays[:1]  # its begin states, which its __call__ passes on, are zeros in the symbol too
    if len(arrays) != 1 or not isinstance(arrays[0], mx.nd.NDArray):
        return None, None, "no FLOPs: %d inputs (counted for one input only)" % len(arrays)
    shape = arrays[0].shape
    if not shape or shape[0] != batch:
        return None, None, "no FLOPs: input %s is not batch-major" % "x".join(map(str, shape))
    try:
        count = count_flops(block, shape[1:])
    except Exception as e:  # a graph that cannot be built alone: the row says so
        return None, None, "no FLOPs: %s" % error_line(e)
    if count.uncounted and not count.training:  # only operators without a rule: unknown, not 0
        return None, None, "no FLOPs: no rule for " + ", ".join(count.uncounted)
    note = "not counted: " + ", ".join(count.uncounted) if count.uncounted else None
    return count.forward * batch / 1e9, count.training * batch / 1e9, note


def _display(path, level, block):
    """The tree column: the path indented by depth, and the class."""
    return "%s%s (%s)" % ("  " * max(level - 1, 0), path or MODEL, type(block).__name__)


@dataclass(frozen=True)
class Loss:
    """A step's loss: `fn(outputs, labels)` on the batch's `labels`."""
    fn: Callable
    labels: object = None


def block_profile(net, inputs, ctx, depth=2, timing=Timing(repeat=10), loss=None, peak_flops=None, margin=MARGIN):
    """Profile the Blocks of `net` (initialised on `ctx`, hybridized or not; a HybridBlock or a
    plain Block) on one batch `inputs` (a list of NDArrays on `ctx`, batch-major), down to
    `depth` levels of children, each region timed in rounds as `timing` says (its progress
    called after each timed region). `loss` (a `Loss`) makes the step's loss (without one, the
    step backpropagates a gradient of ones from the outputs). `peak_flops`: the machine's
    ceiling in FLOP/s, for `of_ceiling`.

    Returns Results (bench 'blocks'): one per Block (name = its path; '(model)' for `net`,
    timed as the step: forward, loss, backward), then the check row (name 'sum of depth-1
    Blocks', whose `finding` says how the Blocks add up to the step)."""
    if depth < 1:
        raise UserError("depth must be at least 1, got %r" % depth)
    inputs = [x.as_in_context(ctx) if isinstance(x, mx.nd.NDArray) else x for x in inputs]
    batch = next((x.shape[0] for x in inputs if isinstance(x, mx.nd.NDArray) and x.shape), None)
    notes = []
    loss_fn, labels = (loss.fn, loss.labels) if loss is not None else (None, None)
    step = Step(net, inputs, loss_fn, labels)
    _check_step(net, step, notes)
    captured = capture(net, inputs, depth)
    tree = walk(net, depth)
    timed, errors, info = _prepare(net, tree, captured, inputs, batch, loss_fn)
    fns = {STEP + "|f": step.forward, STEP + "|fb": step.forward_backward}
    for path, t in timed.items():
        fns[path + "|f"] = t.forward
        if t.differentiable:
            fns[path + "|fb"] = t.forward_backward
    started = time.time()
    m = measure_interleaved(fns, warmup=timing.warmup, repeat=timing.repeat, number=timing.number,
                            progress=timing.progress)
    elapsed = time.time() - started

    def times(key):
        """Forward and forward + backward samples of `key` (forward again when nothing to differentiate)."""
        f = m[key + "|f"].samples
        fb = m[key + "|fb"].samples if key + "|fb" in m else f
        return f, fb

    _, step_fb = times(STEP)
    step_s = float(np.median(step_fb))
    out = []
    for path, level, block in tree:
        row = dict(info[path])
        if path in errors:
            row["error"] = errors[path]
        else:
            f, fb = times(STEP if block is net else path)
            row.update(_time_fields(f, fb, step_s, row, peak_flops))
        row["tree"] = _display(path, level, block)
        row["note"] = "; ".join(v for v in (row.get("error"), row.get("note"), row.get("flops_note")) if v) or None
        out.append(result(BENCH, path or MODEL, **_present(row)))
    out.append(_check(tree, info, timed, errors, times, step_fb, margin))
    for r in out:
        r.metrics.update(batch_size=batch, ctx=str(ctx), max_depth=depth, rounds=timing.repeat, warmup=timing.warmup,
                         elapsed_s=elapsed, caveat=FUSION_NOTE)
        if notes:
            r.metrics["model_note"] = "; ".join(notes)
    return out


def _check_step(net, step, notes):
    """Run the model's step once; a model that cannot run hybridized (Python control flow on
    values) is measured imperatively, and `notes` says so."""
    try:
        step.check()
    except Exception as e:
        if not _hybrid_blocks(net) or not any(b._active for b in _hybrid_blocks(net)):
            raise
        # a model that cannot run hybridized (Python control flow on values): measure it imperatively
        net.hybridize(False)
        notes.append("the model failed hybridized (%s): measured imperatively" % error_line(e))
        step.check()


def _prepare(net, tree, captured, inputs, batch, loss_fn):
    """Each Block of `tree`: its row's fields (class, depth, calls, parameters, hybridized, FLOPs),
    and, for each Block called in the model's forward that runs alone on the inputs `captured`
    for it (imperatively when its graph cannot be built alone), its timed calls. Returns (timed
    {path: _Timed}, errors {path: why it is not timed}, info {path: row})."""
    timed, errors, info = {}, {}, {}
    for path, level, block in tree:
        args, calls = captured.get(id(block), (None, 0))
        row = {"block": type(block).__name__, "depth": level, "calls": calls,
               "parameters": parameter_count(block),
               "hybridized": bool(isinstance(block, gluon.HybridBlock) and block._active)}
        info[path] = row
        if block is net:  # timed as the step
            row["forward_gflop"], row["training_gflop"], row["flops_note"] = _flops(block, inputs, batch)
            row["calls"] = 1
            row["note"] = "timed as the step: forward, %s, backward; no optimizer update" % (
                "loss" if loss_fn is not None else "no loss")
            continue
        if args is None:
            errors[path] = "not called in the model's forward"
            continue
        row["forward_gflop"], row["training_gflop"], row["flops_note"] = _flops(block, args, batch)
        t = _Timed(block, args, inputs)
        try:
            t.check()
        except Exception as e:
            if not row["hybridized"]:
                errors[path] = "called alone: %s" % error_line(e)
                continue
            try:  # its graph cannot be built alone: time it imperatively
                block.hybridize(False)
                t.check()
                row["hybridized"] = False
                row["note"] = "failed hybridized alone (%s): timed imperatively" % error_line(e)
            except Exception as e2:
                errors[path] = "called alone: %s" % error_line(e2)
                continue
        if t.note:
            row["note"] = "; ".join(n for n in (row.get("note"), t.note) if n)
        timed[path] = t
    return timed, errors, info


def _time_fields(f, fb, step_s, row, peak_flops):
    """Time, share and rate fields of one row from its per-round forward and forward + backward samples."""
    calls = row.get("calls", 1) or 1
    backward = [b - a for a, b in zip(f, fb)]
    fw, bw = _median_interval(list(f)), _median_interval(backward)
    total = float(np.median(fb))
    fields = {}
    fields.update(fw.fields("forward_s"))
    fields.update(bw.fields("backward_s"))
    fields.update(forward_backward_s=total, step_share=calls * total / step_s,
                  forward_samples_s=list(f), forward_backward_samples_s=list(fb))
    flops = row.get("training_gflop")
    if flops and total > 0:  # a Block without arithmetic (Flatten) has no rate
        fields["gflop_per_s"] = flops / total
        if peak_flops:
            fields["of_ceiling"] = fields["gflop_per_s"] * 1e9 / peak_flops
    return fields


def _present(row):
    """The fields of `row` that have a value."""
    return {k: v for k, v in row.items() if v is not None}


def _check(tree, info, timed, errors, times, step_fb, margin):
    """The row that says whether the depth-1 Blocks add up to the step, per round, within
    +-`margin`: 'within' when the ratio's whole 95% interval lies inside, 'outside' when it
    lies wholly outside, else 'inconclusive'."""
    children = [(path, block) for path, level, block in tree if level == 1]
    row = {"block": "check", "depth": 1, "tree": SUM, "margin": margin, "blocks": len(children)}
    missing = [p for p, _ in children if p not in timed]
    if not children:
        row.update(verdict="not computed", finding="the model has no child Blocks: nothing to add up")
        return result(BENCH, SUM, **row)
    if len(missing) == len(children):
        row.update(verdict="not computed", finding="no depth-1 Block could be timed alone (%s)"
                   % "; ".join("%s: %s" % (p, errors.get(p)) for p in missing))
        return result(BENCH, SUM, **row)
    rounds = len(step_fb)
    sums_f, sums_fb = [0.0] * rounds, [0.0] * rounds
    for path, block in children:
        if path not in timed:
            continue
        calls = max(1, info[path]["calls"])
        f, fb = times(path)
        for i in range(rounds):
            sums_f[i] += calls * f[i]
            sums_fb[i] += calls * fb[i]
    ratios = [s / t for s, t in zip(sums_fb, step_fb)]
    iv = ratio_interval(ratios)
    if 1 - margin <= iv.low and iv.high <= 1 + margin:
        verdict = "within"
    elif iv.high < 1 - margin or iv.low > 1 + margin:
        verdict = "outside"
    else:
        verdict = "inconclusive"
    ci = ("95%% CI %.0f%%-%.0f%%" % (100 * iv.low, 100 * iv.high) if math.isfinite(iv.high)
          else "95% CI unknown")
    finding = "Blocks sum to %.0f%% of the step (%s, %d rounds); %s" % (100 * iv.estimate, ci, iv.n, {
        "within": "within +-%.0f%%",
        "outside": "outside +-%.0f%%: timed alone, the Blocks are not the step (the table's shares are suspect)",
        "inconclusive": "not settled against +-%.0f%% (the interval reaches past it: more --steps or a quieter "
                        "machine)"}[verdict] % (100 * margin))
    if missing:
        finding += "; left out (not timed): " + ", ".join(missing)
    row.update(iv.fields("step_share"))
    row.update(verdict=verdict, finding=finding, forward_s=float(np.median(sums_f)),
               forward_backward_s=float(np.median(sums_fb)),
               backward_s=float(np.median([b - a for a, b in zip(sums_f, sums_fb)])),
               ratio_samples=ratios, missing=",".join(missing) or None)
    return result(BENCH, SUM, **_present(row))


def with_ceiling(records, peak_flops):
    """The Blocks' records with `of_ceiling` (achieved GFLOP/s over `peak_flops` FLOP/s) filled in."""
    out = []
    for r in records:
        metrics = dict(r.metrics)
        if metrics.get("gflop_per_s") is not None and peak_flops:
            metrics["of_ceiling"] = metrics["gflop_per_s"] * 1e9 / peak_flops
        out.append(type(r)(r.bench, r.name, metrics))
    return out


def regions(net, depth):
    """How many timed regions `block_profile` runs per round at most (for a progress bar):
    forward and forward + backward of the step and of every Block down to `depth`."""
    return 2 * len(walk(net, depth))

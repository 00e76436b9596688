"""`--kvstore flat`: data parallelism over one flat gradient buffer per context.

`FlatTrainer` is a `gluon.Trainer` for the contexts of one machine. Every trainable parameter
gets one owner context; on its first step the trainer moves, on every context, all gradients
into one flat array laid out owner by owner (the Parameters' gradients become views of it). A
step is then a reduce-scatter (`allreduce_grads`: each context adds the others' gradients of
its share), an update of the parameters each context owns (`update`: MXNet's optimizer,
through the Trainer's updater of that context) and an all-gather of their new weights.

The one thing to know: the arithmetic is MXNet's own, so the weights equal the `device`
kvstore's and `save_states` writes the `device` kvstore's format (tests/test_flat.py); only the
gradients are flat, never the weights. After `allreduce_grads()` a context's gradients are
summed in its own share only. Why it is faster on CPU contexts, why the weights stay apart,
and its caveats: docs/commands/train.md, "Two contexts, one flat gradient array".
"""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

ALIGN = 16  # elements: every gradient view starts on a 64-byte boundary, as oneDNN prefers


def owners(sizes, n):
    """Owner (0..n-1) of each size: largest first, each to the least-loaded owner."""
    load, out = [0] * n, [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        k = load.index(min(load))
        out[i], load[k] = k, load[k] + sizes[i]
    return out


def _copy_state(state, ctx):
    """An optimizer state (None, an NDArray, or a tuple of them: Adam's mean and variance) on `ctx`."""
    if isinstance(state, nd.NDArray):
        return state.copyto(ctx)
    if isinstance(state, (tuple, list)):
        return type(state)(_copy_state(s, ctx) for s in state)
    return state


class FlatTrainer(gluon.Trainer):
    """gluon.Trainer over flat per-context gradient buffers: reduce-scatter, one update
    per parameter on its owner, all-gather (see the module). Takes the Block to train
    (not its parameters: its cached graphs must be rebuilt when the gradients move into
    the flat arrays) and Trainer's optimizer arguments; there is no kvstore."""

    def __init__(self, block, optimizer, optimizer_params=None):
        if not isinstance(block, gluon.Block):
            raise ValueError("FlatTrainer trains a gluon Block; got %s" % type(block).__name__)
        self._block = block
        super().__init__(block.collect_params(), optimizer, optimizer_params, kvstore=None,
                         update_on_kvstore=False)
        self._owned = None  # per context: the (index, Parameter) pairs it updates

    def _flatten(self):
        """Give every trainable parameter an owner and move the gradients into the flat
        arrays (done on the first step, when every parameter has its shape)."""
        trainable = [(i, p) for i, p in enumerate(self._params) if p.grad_req != "null"]
        dtypes = set()
        for i, p in trainable:
            if p._stype != "default" or p._grad_stype != "default":
                raise ValueError("kvstore flat needs dense parameters; %s is %s" % (p.name, p._stype))
            if p.grad_req != "write":
                raise ValueError("kvstore flat needs grad_req 'write'; %s has %r" % (p.name, p.grad_req))
            dtypes.add(np.dtype(p.list_grad()[0].dtype))
        if len(dtypes) > 1:
            raise ValueError("kvstore flat needs gradients of one data type; got %s"
                             % ", ".join(sorted(d.name for d in dtypes)))
        contexts, n = self._contexts, len(self._contexts)
        size = {i: int(np.prod(p.shape)) for i, p in trainable}
        owner = owners([size[i] for i, _ in trainable], n)
        self._owned = [[ip for ip, o in zip(trainable, owner) if o == k] for k in range(n)]
        offset, bounds, layout = 0, [0], []
        for mine in self._owned:
            for i, p in mine:
                layout.append((p, offset, size[i]))
                offset += -(-size[i] // ALIGN) * ALIGN
            bounds.append(offset)
        self._shares = list(zip(bounds[:-1], bounds[1:]))  # [a, b) of the flat arrays owned by context k
        dtype = dtypes.pop() if dtypes else np.float32
        self._grads = [nd.zeros((offset,), ctx=c, dtype=dtype) for c in contexts]
        self._incoming = [nd.zeros((b - a,), ctx=c, dtype=dtype) for (a, b), c in zip(self._shares, contexts)]
        for p, start, length in layout:
            views = [g[start:start + length].reshape(p.shape) for g in self._grads]
            for old, new in zip(p.list_grad(), views):
                old.copyto(new)
            p._grad = views  # gluon.Parameter keeps one gradient array per context in this list
            fresh = [d._fresh_grad for d in p.list_data()]
            autograd.mark_variables(p.list_data(), views, p.grad_req)
            for d, was in zip(p.list_data(), fresh):  # marking anew forgets that backward wrote them
                d._fresh_grad = was
        # A hybridized block's cached graph holds on to the arrays it was built with (with
        # static_alloc its backward kept writing the old gradients): build it anew.
        self._block.apply(lambda b: b._clear_cached_op() if isinstance(b, gluon.HybridBlock) else None)

    def _allreduce_grads(self):
        if self._owned is None:
            self._flatten()
        n = len(self._contexts)
        for k, (a, b) in enumerate(self._shares):
            if a == b:
                continue
            mine = self._grads[k][a:b]
            for o in range(n):
                if o != k:  # context o's gradients of share k to context k, added to its own
                    self._grads[o][a:b].copyto(self._incoming[k])
                    # _grad_add is elemwise_add by another name, which the profile can tell
                    # from a model's own additions (gluonperf.measure.operators.phase)
                    nd._internal._grad_add(mine, self._incoming[k], out=mine)

    def _update(self, ignore_stale_grad=False):
        if self._owned is None:
            self._flatten()
        fresh = []  # per context, the owned parameters that backward gave a gradient (as Trainer checks)
        for mine in self._owned:
            fresh.append([])
            for i, p in mine:
                data = p.list_data()
                if all(d._fresh_grad for d in data):
                    fresh[-1].append((i, p))
                elif not ignore_stale_grad:
                    stale = next(d for d in data if not d._fresh_grad)
                    raise UserWarning("Gradient of Parameter `%s` on context %s has not been updated by backward "
                                      "since last `step`; call step with ignore_stale_grad=True to skip it"
                                      % (p.name, stale.context))
        for k, (updater, mine) in enumerate(zip(self._updaters, fresh)):
            if mine:
                updater([i for i, _ in mine], [p.list_grad()[k] for _, p in mine],
                        [p.list_data()[k] for _, p in mine])
        for k, mine in enumerate(fresh):  # all-gather: each owner's new weights to the others
            for _, p in mine:
                data = p.list_data()
                for o, target in enumerate(data):
                    target._fresh_grad = False
                    if o != k:
                        data[k].copyto(target)

    def save_states(self, fname):
        """What gluon.Trainer with update_on_kvstore=False saves: the optimizer and every
        parameter's optimizer state on the first context (gathered from the owners)."""
        if self._owned is None:
            return super().save_states(fname)
        states = {}
        for k, (updater, mine) in enumerate(zip(self._updaters, self._owned)):
            for i, _ in mine:
                if i in updater.states:
                    state = updater.states[i]
                    states[i] = _copy_state(state, self._contexts[0])
        # MXNet's optimizer counts updates per device; under the device kvstore every
        # context counts every parameter. Here only its owner does: count them all
        # everywhere, or a device run resuming from this file would use an older
        # learning rate on some parameters of some contexts than on others.
        counts = self._optimizer._all_index_update_counts
        latest = {}
        for per_device in counts.values():
            for i, n in per_device.items():
                latest[i] = max(latest.get(i, 0), n)
        for ctx in self._contexts:
            counts.setdefault(ctx.device_id, {}).update(latest)
        gathered = mx.optimizer.get_updater(self._optimizer)
        gathered.states = states
        with open(fname, "wb") as f:
            f.write(gathered.get_states(dump_optimizer=True))

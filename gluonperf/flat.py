"""`--kvstore flat`: data parallelism over one flat buffer per context.

`FlatTrainer` is a `gluon.Trainer` for the contexts of one machine. On its first step it
moves, on every context, all trainable weights into one flat array and all gradients
into another (the Parameters keep working: their arrays become views of the flat ones),
and splits the flat arrays into one share per context. A step is then:

- reduce-scatter (`allreduce_grads`): every context copies the other contexts' gradients
  of its share and adds them to its own (N-1 copies and sums of 1/N of the model);
- update (`update`): every context runs the optimizer on its share only, then copies the
  new weights of its share to the other contexts (the all-gather).

MXNet's `device` kvstore with `update_on_kvstore=False` (gluonperf's default before) does
a copy, a sum and a copy back per parameter and context, and then every context updates
all the weights: on CPU contexts, which share the cores, that is the optimizer's work N
times. Here each weight is updated once, with a handful of large operations per step
instead of several per parameter. The arithmetic is MXNet's own SGD/NAG operators, so the
weights equal the `device` kvstore's (tests/test_flat.py checks it).

Caveats, as for any trainer that keeps state outside the Parameters:
- after `allreduce_grads()` a context's gradients are summed only in its own share;
- every trainable parameter is updated every step (no stale-gradient check);
- only SGD and NAG (gluonperf's optimizers) with float32 dense weights.
Trainer states saved with `save_states` are the `device` kvstore's format, so a
checkpoint moves between `--kvstore flat` and `--kvstore device` either way.
"""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

ALIGN = 16  # elements: every parameter's view starts on a 64-byte boundary, as oneDNN prefers


class _Group:
    """Parameters that share one learning-rate and weight-decay multiplier: their flat
    weights, gradients and optimizer state, and the context that owns each share."""

    def __init__(self, indices, params, contexts):
        self.indices, self.params, self.contexts = indices, params, contexts
        offsets, size = [], 0
        for p in params:
            offsets.append(size)
            size += -(-int(np.prod(p.shape)) // ALIGN) * ALIGN
        self.offsets, self.size = offsets, size
        bounds = [size * k // len(contexts) for k in range(len(contexts) + 1)]
        self.shares = list(zip(bounds[:-1], bounds[1:]))  # share k: [a, b) of the flat arrays, owned by contexts[k]
        self.weights = [nd.zeros((size,), ctx=c) for c in contexts]
        self.grads = [nd.zeros((size,), ctx=c) for c in contexts]
        self.incoming = [nd.zeros((b - a,), ctx=c) for (a, b), c in zip(self.shares, contexts)]
        self.states = [None] * len(contexts)  # optimizer state of each context's share

    def views(self, flat, p, offset):
        return flat[offset:offset + int(np.prod(p.shape))].reshape(p.shape)

    def adopt(self):
        """Copy every parameter's weights and gradients into the flat arrays and make the
        Parameters use views of them (re-marked for autograd)."""
        for p, offset in zip(self.params, self.offsets):
            data, grads = p.list_data(), p.list_grad()
            new_data = [self.views(w, p, offset) for w in self.weights]
            new_grads = [self.views(g, p, offset) for g in self.grads]
            for old, new in zip(data + grads, new_data + new_grads):
                old.copyto(new)
            p._data, p._grad = new_data, new_grads  # gluon.Parameter keeps one array per context in these lists
            autograd.mark_variables(new_data, new_grads, p.grad_req)

    def share(self, flat, k):
        a, b = self.shares[k]
        return flat[a:b]


class FlatTrainer(gluon.Trainer):
    """gluon.Trainer over flat per-context buffers: reduce-scatter, one optimizer update
    per share, all-gather (see the module). Takes the Block to train (not its
    parameters: its cached graphs must be rebuilt when the parameters move into the flat
    arrays) and Trainer's optimizer arguments; there is no kvstore."""

    def __init__(self, block, optimizer, optimizer_params=None):
        if not isinstance(block, gluon.Block):
            raise ValueError("FlatTrainer trains a gluon Block; got %s" % type(block).__name__)
        self._block = block
        super().__init__(block.collect_params(), optimizer, optimizer_params, kvstore=None,
                         update_on_kvstore=False)
        opt = self._optimizer
        if not isinstance(opt, (mx.optimizer.SGD, mx.optimizer.NAG)) or getattr(opt, "multi_precision", False):
            raise ValueError("kvstore flat runs SGD and NAG only, without multi_precision; got %s"
                             % type(opt).__name__)
        self._groups = None
        self._loaded = None  # optimizer states read by load_states before the first step

    # --- set-up on the first step, when every parameter has its shape ------------------

    def _flatten(self):
        trainable = [(i, p) for i, p in enumerate(self._params) if p.grad_req != "null"]
        for i, p in trainable:
            if p._stype != "default" or p._grad_stype != "default" or np.dtype(p.dtype) != np.float32:
                raise ValueError("kvstore flat needs dense float32 parameters; %s is %s %s"
                                 % (p.name, p._stype, np.dtype(p.dtype).name))
            if p.grad_req != "write":
                raise ValueError("kvstore flat needs grad_req 'write'; %s has %r" % (p.name, p.grad_req))
        by_mult = {}
        for i, p in trainable:
            by_mult.setdefault((p.lr_mult, p.wd_mult), []).append((i, p))
        contexts = self._contexts
        self._groups = []
        for members in by_mult.values():
            group = _Group([i for i, _ in members], [p for _, p in members], contexts)
            group.adopt()
            for k, c in enumerate(contexts):
                group.states[k] = self._optimizer.create_state(group.indices[0], group.share(group.weights[k], k))
            self._groups.append(group)
        # A hybridized block's cached graph holds on to the arrays it was built with (with
        # static_alloc its backward kept writing the old gradients): build it anew.
        self._block.apply(lambda b: b._clear_cached_op() if isinstance(b, gluon.HybridBlock) else None)
        if self._loaded is not None:
            self._scatter_states(self._loaded)
            self._loaded = None

    # --- the step --------------------------------------------------------------------

    def _allreduce_grads(self):
        if self._groups is None:
            self._flatten()
        n = len(self._contexts)
        for g in self._groups:
            for k in range(n):
                for o in range(n):
                    if o != k:  # bring context o's gradients of share k to context k, add them
                        g.share(g.grads[o], k).copyto(g.incoming[k])
                        mine = g.share(g.grads[k], k)
                        nd.elemwise_add(mine, g.incoming[k], out=mine)

    def _update(self, ignore_stale_grad=False):
        if self._groups is None:
            self._flatten()
        opt = self._optimizer
        kwargs = {"rescale_grad": opt.rescale_grad}
        if opt.momentum > 0:
            kwargs["momentum"] = opt.momentum
        if opt.clip_gradient:
            kwargs["clip_gradient"] = opt.clip_gradient
        mom_update = nd.nag_mom_update if isinstance(opt, mx.optimizer.NAG) else nd.sgd_mom_update
        n = len(self._contexts)
        for g in self._groups:
            opt._update_count(g.indices)  # as Trainer would: the learning-rate schedule advances once
            lr, wd = opt._get_lrs(g.indices[:1])[0], opt._get_wds(g.indices[:1])[0]
            for k in range(n):
                w, grad, state = g.share(g.weights[k], k), g.share(g.grads[k], k), g.states[k]
                if state is not None:
                    mom_update(w, grad, state, out=w, lr=lr, wd=wd, **kwargs)
                else:
                    nd.sgd_update(w, grad, out=w, lr=lr, wd=wd, **kwargs)
            for k in range(n):
                for o in range(n):
                    if o != k:  # all-gather: the new weights of share k to every other context
                        g.share(g.weights[k], k).copyto(g.share(g.weights[o], k))

    # --- states in the device kvstore's format ------------------------------------------

    def save_states(self, fname):
        """What gluon.Trainer with update_on_kvstore=False saves: the optimizer and, per
        parameter index, its state (here gathered from the shares onto the first context)."""
        updater = self._updaters[0]
        if self._groups is not None:
            updater.states = self._gather_states()
            updater.states_synced = dict.fromkeys(updater.states, True)
        elif self._loaded is not None:
            updater.states, updater.states_synced = self._loaded, dict.fromkeys(self._loaded, True)
        with open(fname, "wb") as f:
            f.write(updater.get_states(dump_optimizer=True))

    def load_states(self, fname):
        super().load_states(fname)
        states = dict(self._updaters[0].states)
        if self._groups is None:
            self._loaded = states
        else:
            self._scatter_states(states)

    def _gather_states(self):
        ctx = self._contexts[0]
        out = {}
        for g in self._groups:
            if g.states[0] is None:
                out.update(dict.fromkeys(g.indices))
                continue
            full = nd.zeros((g.size,), ctx=ctx)
            for k, (a, b) in enumerate(g.shares):
                g.states[k].copyto(full[a:b])
            for i, p, offset in zip(g.indices, g.params, g.offsets):
                out[i] = g.views(full, p, offset).copy()
        return out

    def _scatter_states(self, states):
        for g in self._groups:
            if g.states[0] is None:
                continue
            full = nd.zeros((g.size,), ctx=self._contexts[0])
            for i, p, offset in zip(g.indices, g.params, g.offsets):
                if states.get(i) is not None:
                    states[i].copyto(g.views(full, p, offset))
            for k, (a, b) in enumerate(g.shares):
                full[a:b].copyto(g.states[k])

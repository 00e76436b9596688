"""The book's models (MLP, LeNet, ResNet-18 for 28x28 inputs) and GluonCV's model zoo.

Layers are created inside their parent's `name_scope()`, so parameter names (and
with them the order `gluon.Trainer` sorts parameters in, which indexes optimizer
states) depend only on the model's structure, not on how many layers the process
made before: a checkpoint's trainer states then load into any later instance.

`get_model(name, classes)` builds any of them by name, or a model of one's own from its
spec (gluonperf.training.model_spec: `module:factory`, `file.py:factory`, with its input);
`input_shape(name)` is the shape of one sample it expects; `list_models()` lists the names
`--model` accepts; `resolve_spec` checks a spec once, in the command, before any work, and
the ModelSpec it returns is what the rest of the process passes on (each of these functions
takes its text too).
"""
import contextlib
import io
import os
import re

import mxnet as mx
from mxnet.gluon import nn

from .. import UserError, error_line
from .model_spec import (ModelSpec, as_spec, build_factory, flat_size, input_shapes, is_factory, load_factory,
                         load_loss, random_input as _random_input)

BUILTIN = {
    "mlp": "the book's MLP for the hybridize chapter: 512 -> 256 -> 128 -> 2 (ReLU)",
    "lenet": "LeNet as in the multi-GPU chapter: 2 conv + 2 dense layers, 28x28 grey input",
    "resnet18": "the book's ResNet-18 for 28x28 inputs: 3x3 stride-1 stem, no max-pool",
}

# GluonCV zoo entries that are not image classifiers (detection, segmentation, pose,
# video, depth, tracking) or need extra arguments; they cannot stand in for `--model`.
_NOT_CLASSIFIER = re.compile(
    r"ssd|yolo|rcnn|fcn_|psp_|deeplab|icnet|fastscnn|danet|pose|center_net|siamrpn|monodepth"
    r"|kinetics|ucf101|hmdb51|sthsthv2|custom|int8|c3d|p3d|r2plus1d|i3d|slowfast|hrnet_.*_s$")


def mlp(classes=2):
    """The chapter's MLP: Dense(256) -> Dense(128) -> Dense(classes); input 512 features."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(256, activation="relu"),
                nn.Dense(128, activation="relu"),
                nn.Dense(classes))
    return net


def lenet(classes=10):
    """LeNet as in the chapter's from-scratch multi-GPU section, as a HybridBlock."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(20, kernel_size=3, activation="relu"),
                nn.AvgPool2D(pool_size=2, strides=2),
                nn.Conv2D(50, kernel_size=5, activation="relu"),
                nn.AvgPool2D(pool_size=2, strides=2),
                nn.Flatten(),
                nn.Dense(128, activation="relu"),
                nn.Dense(classes))
    return net


def fusable(contexts):
    """Whether BatchNorm and ReLU can run as one operator on these contexts: MXNet has
    BatchNormWithReLU only for oneDNN (CPU contexts, oneDNN built in and not switched off)."""
    return (bool(contexts) and all(c.device_type == "cpu" for c in contexts)
            and mx.runtime.Features().is_enabled("MKLDNN") and os.environ.get("MXNET_MKLDNN_ENABLED", "1") != "0")


class Residual(nn.HybridBlock):
    """The book's residual block: two 3x3 convolutions, optional 1x1 projection.

    book_relu=True writes ReLU as the book does, `F.relu`. MXNet's `relu` operator has no
    oneDNN kernel, so on CPU every call converts oneDNN's blocked layout to NCHW and back:
    it took 14.5% of a ResNet-18 step. By default ReLU is `Activation(act_type="relu")`, the
    same function on oneDNN, and with fuse=True the first BatchNorm and its ReLU are one
    oneDNN operator (BatchNormReLU; CPU only, see `fusable`). docs/levers.md has the
    figures. Parameter names are the same in every variant, so checkpoints move between them."""

    def __init__(self, num_channels, use_1x1conv=False, strides=1, book_relu=False, fuse=False, **kwargs):
        super().__init__(**kwargs)
        self.book_relu, self.fuse = book_relu, fuse and not book_relu
        with self.name_scope():
            self.conv1 = nn.Conv2D(num_channels, kernel_size=3, padding=1, strides=strides)
            self.conv2 = nn.Conv2D(num_channels, kernel_size=3, padding=1)
            self.conv3 = nn.Conv2D(num_channels, kernel_size=1, strides=strides) if use_1x1conv else None
            self.bn1 = (nn.BatchNormReLU if self.fuse else nn.BatchNorm)(prefix="batchnorm0_")
            self.bn2 = nn.BatchNorm(prefix="batchnorm1_")

    def relu(self, F, X):
        return F.relu(X) if self.book_relu else F.Activation(X, act_type="relu")

    def hybrid_forward(self, F, X):
        Y = self.bn1(self.conv1(X))
        if not self.fuse:
            Y = self.relu(F, Y)
        Y = self.bn2(self.conv2(Y))
        if self.conv3 is not None:
            X = self.conv3(X)
        return self.relu(F, Y + X)


def resnet_block(num_channels, num_residuals, first_block=False, **residual):
    blk = nn.HybridSequential()
    with blk.name_scope():
        for i in range(num_residuals):
            if i == 0 and not first_block:
                blk.add(Residual(num_channels, use_1x1conv=True, strides=2, **residual))
            else:
                blk.add(Residual(num_channels, **residual))
    return blk


def resnet18(num_classes=10, book_relu=False, fuse=False):
    """The book's ResNet-18 variant for small (28x28) images.

    book_relu=True keeps the book's `F.relu` in the residual blocks; fuse=True runs every
    BatchNorm that a ReLU follows (the first layer's and each block's first) and its ReLU
    as one operator (CPU contexts only). See `Residual`."""
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(64, kernel_size=3, strides=1, padding=1))
        if fuse and not book_relu:  # the same parameter names as the BatchNorm it replaces, and
            # a pass-through where the ReLU was: save_parameters names children by position
            net.add(nn.BatchNormReLU(prefix="batchnorm0_"), nn.HybridLambda(lambda F, x: x))
        else:
            net.add(nn.BatchNorm(), nn.Activation("relu"))
        relu = {"book_relu": book_relu, "fuse": fuse}
        net.add(resnet_block(64, 2, first_block=True, **relu),
                resnet_block(128, 2, **relu),
                resnet_block(256, 2, **relu),
                resnet_block(512, 2, **relu))
        net.add(nn.GlobalAvgPool2D(), nn.Dense(num_classes))
    return net


def _zoo_names():
    from gluoncv.model_zoo import get_model_list
    return [n for n in get_model_list() if not _NOT_CLASSIFIER.search(n)]


def list_models():
    """{name: description} of every name `get_model` accepts."""
    out = dict(BUILTIN)
    out["MODULE:FACTORY"] = "your own: a function in an importable module that returns a gluon Block"
    out["FILE.py:FACTORY"] = "your own: a function in a Python file that returns a gluon Block (with --input-shape)"
    for name in _zoo_names():
        out[name] = "GluonCV model zoo (random init), input %s" % "x".join(map(str, input_shape(name)))
    return out


def input_shape(name):
    """Shape of one input sample (without the batch axis) of the model `name` (a ModelSpec or its text)."""
    spec = as_spec(name)
    shapes = input_shapes(spec)
    if len(shapes) > 1:  # several inputs travel as one flat sample (SeveralInputs)
        return (sum(flat_size(shape) for shape in shapes),)
    if shapes:
        return tuple(shapes[0])
    name = spec.model
    if is_factory(name):
        raise ValueError("--model %s: give the shape of one sample it takes with --input-shape (e.g. 3,32,32)" % name)
    if name == "mlp":
        return (512,)
    if name in ("lenet", "resnet18"):
        return (1, 28, 28)
    if name.startswith("cifar_"):
        return (3, 32, 32)
    if "inception" in name or "xception" in name:
        return (3, 299, 299)
    return (3, 224, 224)


def random_input(name, batch_size, rng):
    """A batch (numpy) of what model `name` takes: uniform floats in [0, 1), or token ids."""
    spec = as_spec(name)
    return _random_input(spec, input_shape(spec), batch_size, rng)


def loss_of(name):
    """The loss model `name` trains with: its spec's own (given labels as `LabelLike` does), or
    softmax cross-entropy."""
    spec = as_spec(name)
    return LabelLike(load_loss(spec), spec.output_shapes) if spec.loss else load_loss(spec)


class LabelLike(mx.gluon.Block):
    """A loss of one's own, given the label in its prediction's dtype (gluonperf's data sets hold
    integer class labels, which a regression's loss compares with float outputs) and, for a
    model with several outputs (`shapes`), those outputs back from the one `SeveralOutputs` made:
    loss(out1, out2, ..., label)."""

    def __init__(self, loss, shapes=()):
        super().__init__(prefix="")
        self.loss = loss
        self.shapes = [tuple(shape) for shape in shapes]

    def forward(self, pred, label):
        label = label.astype(pred.dtype, copy=False)
        if len(self.shapes) < 2:
            return self.loss(pred, label)
        outputs, start = [], 0
        for shape in self.shapes:
            end = start + flat_size(shape)
            outputs.append(pred[:, start:end].reshape((-1,) + shape))
            start = end
        return self.loss(*outputs, label)


class SeveralOutputs(mx.gluon.HybridBlock):
    """A model that returns several outputs, as one: each sample's outputs flattened one after
    the other (the loss of one's own gets them back apart through `LabelLike`). No parameters."""

    def __init__(self, net):
        super().__init__(prefix="")
        self.net = net

    def hybrid_forward(self, F, x):
        return F.concat(*[F.reshape(out, shape=(0, -1)) for out in self.net(x)], dim=1)


def get_model(name, classes=10, contexts=None):
    """Build a model by name or spec, uninitialised. Raises UserError for an unknown name.

    `contexts`: where it will run; resnet18 then fuses BatchNorm with ReLU when they are
    all CPU contexts with oneDNN (`fusable`)."""
    spec = as_spec(name)
    if is_factory(spec.model):
        model = build_factory(spec, classes)
    else:
        model = _named_model(spec.model, classes, contexts, spec.args)
    net = model
    shapes = input_shapes(spec)
    if len(shapes) > 1:
        net = SeveralInputs(net, shapes)
    if len(spec.output_shapes) > 1:
        net = SeveralOutputs(net)
    if not spec.hybridizable:  # resolve_model found that hybridize() fails on it: it runs imperatively
        for block in (model, net):
            block.hybridize = lambda *a, **k: None
    return net


class SeveralInputs(mx.gluon.HybridBlock):
    """A model that takes several inputs, fed one flat batch: each sample's inputs flattened one
    after the other, sliced and reshaped here into the model's inputs (`shapes`, one per input).
    Its parameters keep the model's own names (it adds none)."""

    def __init__(self, net, shapes):
        super().__init__(prefix="")
        self.net = net
        self.shapes = [tuple(shape) for shape in shapes]

    def hybrid_forward(self, F, x):
        inputs, start = [], 0
        for shape in self.shapes:
            end = start + flat_size(shape)
            inputs.append(F.reshape(F.slice_axis(x, axis=1, begin=start, end=end), shape=(-1,) + shape))
            start = end
        return self.net(*inputs)


def _named_model(name, classes, contexts, args):
    if args and name in BUILTIN:
        raise UserError("--model-args: the built-in %s takes none; they are for a zoo model or your own factory" % name)
    if name == "mlp":
        return mlp(classes)
    if name == "lenet":
        return lenet(classes)
    if name == "resnet18":
        return resnet18(classes, fuse=fusable(contexts))
    if name not in _zoo_names():
        raise UserError("unknown model %r; run with --list-models to see the %d names --model accepts, or give "
                        "your own as module:factory or file.py:factory" % (name, len(BUILTIN) + len(_zoo_names())))
    from gluoncv.model_zoo import get_model as zoo_get_model
    try:
        return zoo_get_model(name, classes=classes, pretrained=False, **args)
    except TypeError as e:
        raise UserError("--model-args for %s: %s" % (name, e))


def resolve_model(model, args=None, shape=None, input_dtype="float32", vocab=None, loss=None, classes=10):
    """(spec text, notes): `resolve_spec`'s spec as the text that stands for it."""
    spec, notes = resolve_spec(model, args, shape, input_dtype, vocab, loss, classes)
    return spec.text, notes


def resolve_spec(model, args=None, shape=None, input_dtype="float32", vocab=None, loss=None, classes=10):
    """(ModelSpec, notes) of the model the flags describe, checked before any work: the factory
    imports and returns a Block, its first forward takes the input (batch of 2, on the CPU),
    the loss takes its output; a model whose hybridize() fails is marked to run imperatively
    (a note says so). ValueError in one line otherwise, naming files as they were given."""
    base = as_spec(model)
    given = {}
    for ref in (base.model, loss or ""):
        where = ref.rpartition(":")[0]
        if where.endswith(".py"):
            given[os.path.abspath(where)] = where
    try:
        return _resolve(base, args, shape, input_dtype, vocab, loss, classes)
    except ValueError as e:
        message = str(e)
        for full, short in sorted(given.items(), key=lambda kv: -len(kv[0])):
            message = message.replace(full, short)
        raise type(e)(message) from None


def _resolve(base, args, shape, input_dtype, vocab, loss, classes):
    if is_factory(base.model):
        from .model_spec import absolute
        base = ModelSpec(absolute(base.model), **{k: v for k, v in base.__dict__.items() if k != "model"})
    if input_dtype == "int32" and not (vocab or base.vocab):
        raise ValueError("--input-dtype int32 (token ids) needs --vocab-size, the number of distinct ids")
    if vocab and input_dtype != "int32" and base.input_dtype != "int32":
        raise ValueError("--vocab-size is for token ids: give --input-dtype int32 too")
    if shape and isinstance(shape[0], (list, tuple)):  # one shape per input
        shape = tuple(tuple(s) for s in shape) if len(shape) > 1 else tuple(shape[0])
    spec = ModelSpec(base.model, dict(base.args, **(args or {})),
                     tuple(shape) if shape else base.input_shape,
                     input_dtype if input_dtype != "float32" else base.input_dtype,
                     vocab or base.vocab, loss or base.loss)
    if not is_factory(spec.model) and spec == ModelSpec(spec.model):
        get_model(spec)  # an unknown name fails here; the shipped models need no probe
        return spec, []
    if is_factory(spec.model):
        load_factory(spec.model)  # a file or module that is not there says so before anything else
        if spec.loss:
            load_factory(spec.loss, "--loss")
    shape = input_shape(spec)
    if spec.input_dtype == "int32" and not all(isinstance(n, int) for n in shape):
        raise ValueError("--input-shape %s: token ids need whole numbers" % (shape,))
    notes = []
    outputs = _first_forward(spec, shape, classes, hybridize=False)
    if len(outputs) > 1:
        spec = ModelSpec(**dict(spec.__dict__, output_shapes=tuple(outputs)))
    why = _first_forward(spec, shape, classes, hybridize=True)
    if why:
        spec = ModelSpec(**dict(spec.__dict__, hybridizable=False, why_not_hybrid=why))
        notes.append("--model %s cannot be hybridized (%s): it is measured imperatively, whatever --hybridize says"
                     % (spec.label, why))
    return spec, notes


def _first_forward(spec, shape, classes, hybridize):
    """Build `spec`, run a forward on a batch of 2 and its loss; with `hybridize`, return why
    hybridize() fails on it ('' when it does not); without, ValueError for what fails."""
    import numpy as np
    what = "--model %s with input %s" % (ModelSpec(spec.model).label, "x".join(map(str, shape)))
    net = get_model(spec, classes)
    if hybridize and not isinstance(net, mx.gluon.HybridBlock):
        has_hybrid = any(isinstance(b, mx.gluon.HybridBlock) for b in _blocks(net))
        return "" if has_hybrid else "a Block, not a HybridBlock, with no HybridBlock inside"
    x = mx.nd.array(_random_input(spec, shape, 2, np.random.RandomState(0)), dtype=spec.input_dtype)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # MXNet prints "infer_shape error" before raising
            net.initialize(mx.init.Xavier())
            if hybridize:
                net.hybridize()
            out = net(x)
            outs = out if isinstance(out, (list, tuple)) else [out]
            mx.nd.waitall()
    except Exception as e:  # the user's model: whatever it raises is the answer
        if hybridize:
            return "%s: %s" % (type(e).__name__, error_line(e))
        several = isinstance(e, TypeError) and "positional argument" in str(e)
        raise ValueError("%s: the first forward fails: %s: %s%s" % (
            what, type(e).__name__, error_line(e),
            "; a model that takes several inputs: give each one's shape, --input-shape once per input"
            if several else ""))
    if hybridize:
        return ""
    if len(outs) != 1 and not spec.loss:
        raise ValueError("%s: it returns %d outputs; give the loss that takes them, --loss module:factory, called "
                         "loss(output1, output2, ..., label)" % (what, len(outs)))
    try:
        loss = load_loss(spec) if spec.loss else loss_of(spec)
        labels = mx.nd.array(np.arange(2) % classes, dtype=outs[0].dtype)
        loss(*outs, labels).wait_to_read()
    except ValueError:
        raise
    except Exception as e:
        shapes = ", ".join("x".join(map(str, o.shape)) for o in outs)
        raise ValueError("%s: its output (%s) does not fit the loss%s: %s: %s; give --loss module:factory for "
                         "a loss that fits, or a model with one output per class"
                         % (what, shapes, "" if spec.loss else " (softmax cross-entropy over %d classes)" % classes,
                            type(e).__name__, error_line(e)))
    return [tuple(o.shape[1:]) for o in outs]  # one sample's shape per output


def _blocks(net):
    yield net
    for child in net._children.values():
        yield from _blocks(child)


def count_model_flops(name, sample_shape, classes=10, contexts=None):
    """FlopCount per image (gluonperf.measure.flops) of the model `name` for `sample_shape`, as
    built for `contexts`."""
    from ..measure.flops import count_flops
    return count_flops(get_model(name, classes, contexts), sample_shape)

"""How much arithmetic a model's training step asks for: FLOPs counted from its layer shapes.

    count = count_flops(net, (1, 28, 28))     # any HybridBlock, one sample's shape
    count.forward, count.training             # FLOPs per image
    count.op_flops("_backward_Convolution")   # per image, by MXNet operator name

The one thing to know: the block is called on a Symbol and MXNet infers the shape of every
node of the graph, so every operator is counted, also those a block calls inside
`hybrid_forward` (`F.relu`, `Y + X`), which forward hooks on child blocks would miss.
The rules (1 multiply-add = 2 FLOPs; ELEMENT_COST per element for elementwise and
normalisation layers; backward 2x forward for layers with weights, 1x otherwise),
`matmul_forward` / `matmul_training` (the book's count: convolutions and dense layers only),
and `uncounted` (operators with no rule not known to be free) are explained, with the book's
ResNet-18 figures, in docs/commands/profile.md, "How to read it" (the work table).
"""
import json
from dataclasses import dataclass, field
from typing import Dict, Tuple

import mxnet as mx

from .. import UserError, error_line

# Operators whose backward costs 2 x their forward (they have weights).
WEIGHTED = ("Convolution", "Deconvolution", "FullyConnected", "BatchNorm", "LayerNorm", "InstanceNorm",
            "GroupNorm", "Embedding")
# Backward / forward for fused operators: BatchNorm (5 forward, 10 backward per element)
# and ReLU (1 and 1) in one, so the model counts the same fused or not.
BACKWARD_FACTOR = {"_contrib_BatchNormWithReLU": 11 / 6}
MATMUL = ("Convolution", "Deconvolution", "FullyConnected")
# Forward FLOPs per output element of elementwise and normalisation operators.
ELEMENT_COST = {
    "BatchNorm": 5, "_contrib_BatchNormWithReLU": 6, "LayerNorm": 5, "InstanceNorm": 5, "GroupNorm": 5,
    "relu": 1, "LeakyReLU": 1, "Dropout": 1, "clip": 1,
    "sigmoid": 4, "tanh": 4, "softrelu": 4, "softsign": 4, "erf": 4, "exp": 4, "log": 4,
    "elemwise_add": 1, "elemwise_sub": 1, "elemwise_mul": 1, "elemwise_div": 1,
    "broadcast_add": 1, "broadcast_sub": 1, "broadcast_mul": 1, "broadcast_div": 1, "broadcast_plus": 1,
    "broadcast_minus": 1, "_Plus": 1, "_plus": 1, "_Minus": 1, "_minus": 1, "_Mul": 1, "_mul": 1,
    "_Div": 1, "_div": 1, "_plus_scalar": 1, "_minus_scalar": 1, "_mul_scalar": 1, "_div_scalar": 1,
    "_rminus_scalar": 1, "_rdiv_scalar": 1, "square": 1, "sqrt": 1, "rsqrt": 1, "negative": 1,
    "softmax": 5, "log_softmax": 5, "SoftmaxActivation": 5, "SoftmaxOutput": 5,
}
ACTIVATION_COST = {"relu": 1, "sigmoid": 4, "tanh": 4, "softrelu": 4, "softsign": 4}
# Operators that move or view data without arithmetic: free, and not "uncounted".
FREE = {"null", "Flatten", "flatten", "Reshape", "reshape", "Concat", "concat", "transpose", "expand_dims",
        "squeeze", "slice", "slice_axis", "slice_like", "SliceChannel", "split", "_copy", "identity",
        "BlockGrad", "stop_gradient", "Cast", "cast", "_zeros", "_ones", "zeros_like", "ones_like",
        "Crop", "Pad", "pad", "tile", "repeat", "_contrib_AdaptiveAvgPooling2D", "UpSampling"}


@dataclass(frozen=True)
class FlopCount:
    """FLOPs per image, by MXNet operator name, forward and backward."""
    forward_by_op: Dict[str, float]
    backward_by_op: Dict[str, float]
    layers_by_op: Dict[str, int]
    input_shape: Tuple[int, ...]
    matmul_forward: float = 0.0
    uncounted: Tuple[str, ...] = field(default=())

    @property
    def forward(self):
        return float(sum(self.forward_by_op.values()))

    @property
    def backward(self):
        return float(sum(self.backward_by_op.values()))

    @property
    def training(self):
        """Forward + backward FLOPs of one training image."""
        return self.forward + self.backward

    @property
    def matmul_training(self):
        """Multiply-add FLOPs of the convolutions and dense layers in a training image
        (forward + 2 x forward); `matmul_forward` is their forward part, bias excluded."""
        return 3 * self.matmul_forward

    def op_flops(self, name):
        """FLOPs per image of the profiler's operator `name` (`Convolution`,
        `_backward_Convolution`, ...), or None when there is no rule for it."""
        if name.startswith("_backward_"):  # _backward_contrib_X is the backward of _contrib_X
            op = name[len("_backward_"):]
            return self.backward_by_op.get(op, self.backward_by_op.get("_" + op))
        return self.forward_by_op.get(name)


def _tuple(text, default=()):
    if text is None:
        return tuple(default)
    return tuple(int(v) for v in str(text).strip("()[] ").split(",") if v.strip() not in ("", "None"))


def _prod(values):
    out = 1
    for v in values:
        out *= int(v)
    return out


def _true(text):
    return str(text).strip().lower() in ("true", "1")


def _channel_axis(attrs, ndim):
    layout = attrs.get("layout")
    return layout.index("C") if layout and "C" in layout and len(layout) == ndim else 1


def node_flops(op, attrs, in_shapes, out_shape):
    """Forward FLOPs of one graph node (whole batch of its shapes) as (flops, bias flops),
    or None without a rule."""
    if op == "Convolution":
        data = in_shapes[0]
        c = _channel_axis(attrs, len(data))
        groups = int(attrs.get("num_group", 1))
        out_elems = _prod(out_shape)
        macs = out_elems * (data[c] // groups) * _prod(_tuple(attrs["kernel"]))
        return 2 * macs, (0 if _true(attrs.get("no_bias", False)) else out_elems)
    if op == "Deconvolution":
        data = in_shapes[0]
        c = _channel_axis(attrs, len(data))
        groups = int(attrs.get("num_group", 1))
        out_c = out_shape[_channel_axis(attrs, len(out_shape))]
        macs = _prod(data) * (out_c // groups) * _prod(_tuple(attrs["kernel"]))
        return 2 * macs, (0 if _true(attrs.get("no_bias", False)) else _prod(out_shape))
    if op == "FullyConnected":
        data = in_shapes[0]
        hidden = int(attrs["num_hidden"])
        if _true(attrs.get("flatten", True)):
            rows, inputs = data[0], _prod(data[1:])
        else:
            rows, inputs = _prod(data[:-1]), data[-1]
        return 2 * rows * inputs * hidden, (0 if _true(attrs.get("no_bias", False)) else rows * hidden)
    if op == "Pooling":
        data = in_shapes[0]
        if _true(attrs.get("global_pool", False)):
            return _prod(data), 0
        return _prod(out_shape) * _prod(_tuple(attrs.get("kernel"))), 0
    if op == "Activation":
        return _prod(out_shape) * ACTIVATION_COST.get(attrs.get("act_type", "relu"), 4), 0
    if op == "add_n" or op == "ElementWiseSum":
        return _prod(out_shape) * max(1, len(in_shapes) - 1), 0
    if op in ELEMENT_COST:
        return _prod(out_shape) * ELEMENT_COST[op], 0
    return None


def count_flops(block, sample_shape):
    """FlopCount per image of `block` (a HybridBlock) for one input of `sample_shape`
    (without the batch axis). Raises UserError when the block cannot be traced."""
    shape = (1,) + tuple(int(v) for v in sample_shape)
    if not isinstance(block, mx.gluon.HybridBlock):
        raise UserError("%s is not a HybridBlock; FLOPs are counted from the symbol graph, which only "
                        "HybridBlocks have" % type(block).__name__)
    out = block(mx.sym.var("data"))
    if isinstance(out, (list, tuple)):
        out = mx.sym.Group(list(out))
    internals = out.get_internals()
    try:
        _, shapes, _ = internals.infer_shape(data=shape)
    except mx.base.MXNetError as e:
        raise UserError("cannot infer the layer shapes of the model for input %s: %s"
                        % ("x".join(map(str, sample_shape)), error_line(e)))
    graph = json.loads(internals.tojson())
    if shapes is None or len(shapes) != len(graph["heads"]):
        raise UserError("cannot infer every layer shape of the model for input %s"
                        % "x".join(map(str, sample_shape)))
    shape_of = {(head[0], head[1]): tuple(s) for head, s in zip(graph["heads"], shapes)}
    forward, backward, layers, uncounted, matmul = {}, {}, {}, set(), 0.0
    for number, node in enumerate(graph["nodes"]):
        op = node["op"]
        if op == "null":
            continue
        attrs = node.get("attrs", node.get("param", {})) or {}
        in_shapes = [shape_of.get((i[0], i[1])) for i in node["inputs"]]
        out_shape = shape_of.get((number, 0))
        if out_shape is None or (in_shapes and in_shapes[0] is None):
            uncounted.add(op)
            continue
        counted = node_flops(op, attrs, in_shapes, out_shape)
        if counted is None:
            if op not in FREE:
                uncounted.add(op)
            continue
        flops, bias = counted
        forward[op] = forward.get(op, 0.0) + float(flops + bias)
        backward[op] = backward.get(op, 0.0) + float(flops * BACKWARD_FACTOR.get(op, 2 if op in WEIGHTED else 1) + bias)
        if op in MATMUL:
            matmul += float(flops)
        layers[op] = layers.get(op, 0) + 1
    return FlopCount(forward, backward, layers, tuple(sample_shape), matmul, tuple(sorted(uncounted)))

"""A model as deployed: the two files `HybridBlock.export` writes, and reading them back.

`PREFIX-symbol.json` holds the graph, `PREFIX-NNNN.params` its weights (`arg:NAME` and
`aux:NAME`), NNNN the epoch export() was given (0000 by default). `gluon.SymbolBlock.imports`
loads them; what it needs besides the files is read here from the files themselves: the
input's name (`input_name`) and one sample's shape (`input_shape_of`: the one the graph
declares, else the first of `CANDIDATE_SHAPES` that gives every parameter its saved shape).
docs/precision_ladder.md ("What to serve") says how. `export_trained` writes a trained Block
so (train --export), the files loaded back and their outputs checked (`export_checked`).
"""
import contextlib
import glob
import io
import json
import os
import re
import shutil
import tempfile
import warnings

import mxnet as mx
import numpy as np

from .. import error_line

SUFFIX = "-symbol.json"
# tried in this order when the graph does not say: gluonperf's 28x28 grey data sets, then
# the zoo's image sizes (ImageNet's, Inception's, CIFAR's)
CANDIDATE_SHAPES = ((1, 28, 28), (3, 224, 224), (3, 299, 299), (3, 32, 32))


def is_symbol_file(path):
    return str(path).endswith(SUFFIX)


def params_beside(symbol):
    """The params file export() wrote beside `symbol` (PREFIX-NNNN.params, the highest epoch
    when there are several); ValueError in one line when there is none."""
    prefix = symbol[:-len(SUFFIX)]
    found = sorted(p for p in glob.glob(glob.escape(prefix) + "-*.params")
                   if re.fullmatch(r"\d{4}", p[len(prefix) + 1:-len(".params")]))
    if not found:
        raise ValueError("--model %s has no parameters beside it (%s-0000.params, as export() names them); "
                         "give them with --params FILE" % (symbol, os.path.basename(prefix)))
    return found[-1]


def saved_shapes(params):
    """{parameter name: shape} of a params file (export's `arg:`/`aux:` prefixes dropped)."""
    try:
        saved = mx.nd.load(params)
    except mx.base.MXNetError as e:
        raise ValueError("--params %s is not a parameter file MXNet can read (%s)" % (params, error_line(e)))
    if not isinstance(saved, dict):
        raise ValueError("--params %s holds unnamed arrays, not a model's parameters" % params)
    return {name.split(":", 1)[-1]: tuple(v.shape) for name, v in saved.items()}


def load_symbol(symbol):
    try:
        return mx.sym.load(symbol)
    except mx.base.MXNetError as e:
        raise ValueError("--model %s is not a graph MXNet can read (%s)" % (symbol, error_line(e)))


def input_name(symbol, params):
    """The name of the graph's one input (the input the params file does not hold)."""
    inputs = [n for n in load_symbol(symbol).list_inputs() if n not in saved_shapes(params)]
    if len(inputs) != 1:
        raise ValueError("--model %s takes %s inputs besides the parameters in %s (%s); gluonperf serves models "
                         "of one input" % (symbol, len(inputs), params, ", ".join(inputs) or "none"))
    return inputs[0]


def _declared_shape(symbol, name):
    with open(symbol) as f:
        nodes = json.load(f).get("nodes", [])
    for node in nodes:
        if node.get("name") == name and "__shape__" in node.get("attrs", {}):
            shape = tuple(int(n) for n in re.findall(r"-?\d+", node["attrs"]["__shape__"]))[1:]
            return shape if shape and all(n > 0 for n in shape) else None
    return None


def _dense_width(symbol, name, saved):
    """(width,) when the input goes straight into a FullyConnected layer, else None."""
    with open(symbol) as f:
        nodes = json.load(f).get("nodes", [])
    index = next((i for i, n in enumerate(nodes) if n.get("name") == name), None)
    for node in nodes:
        inputs = [i[0] for i in node.get("inputs", [])]
        if node.get("op") == "FullyConnected" and inputs[:1] == [index] and len(inputs) > 1:
            weight = saved.get(nodes[inputs[1]]["name"])
            return (weight[1],) if weight and len(weight) == 2 else None
    return None


def fits(sym, name, shape, saved):
    """The output shape when a batch of one `shape` gives every parameter of `sym` the shape
    `saved` holds, else None."""
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # MXNet prints "infer_shape error"
            args, outs, aux = sym.infer_shape(**{name: (1,) + tuple(shape)})
    except mx.base.MXNetError:
        return None
    shapes = dict(zip(sym.list_arguments(), args), **dict(zip(sym.list_auxiliary_states(), aux)))
    if any(tuple(shapes.get(k, ())) != v for k, v in saved.items() if k in shapes):
        return None
    return tuple(outs[0])


def input_shape_of(symbol, params, name=None, given=None):
    """(one sample's shape, classes or None) of an exported model: `given`, or the `__shape__`
    the graph declares for its input, else the first of CANDIDATE_SHAPES and (for an input that
    goes straight into a dense layer) that layer's input width for which MXNet's shape inference
    gives every parameter the shape the params file holds. ValueError in one line when no
    candidate fits."""
    sym, saved = load_symbol(symbol), saved_shapes(params)
    name = name or input_name(symbol, params)
    if given:
        candidates = [tuple(given)]
    else:
        candidates = [s for s in (_declared_shape(symbol, name),) if s] + list(CANDIDATE_SHAPES)
        width = _dense_width(symbol, name, saved)
        if width:
            candidates.append(width)
    for shape in candidates:
        out = fits(sym, name, shape, saved)
        if out is not None:
            return shape, (out[1] if len(out) == 2 else None)
    if given:
        raise ValueError("--input-shape %s does not fit --model %s: its parameters in %s have other shapes"
                         % (",".join(map(str, given)), symbol, params))
    raise ValueError("--model %s: gluonperf cannot tell one sample's shape from the files (none of %s fits its "
                     "parameters); give it with --input-shape C,H,W"
                     % (symbol, ", ".join("x".join(map(str, s)) for s in candidates)))


def import_block(symbol, params, ctx, name=None):
    """`gluon.SymbolBlock.imports` of the files, on `ctx` (MXNet's warning that it cannot
    tell the input's dtype silenced: it is float32)."""
    name = name or input_name(symbol, params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return mx.gluon.SymbolBlock.imports(symbol, [name], params, ctx=ctx)


def graph_ops(symbol):
    """The operator names of an exported graph, in order of first appearance."""
    with open(symbol) as f:
        nodes = json.load(f).get("nodes", [])
    return list(dict.fromkeys(n["op"] for n in nodes if n.get("op") != "null"))


def export(net, prefix, remove_amp_cast=True):
    """`net.export(prefix)` (a hybridized Block that has run once): the two files' paths."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        net.export(prefix, remove_amp_cast=remove_amp_cast)
    return prefix + SUFFIX, prefix + "-0000.params"


def export_checked(net, prefix, sample, ctx, tolerance=1e-4):
    """Write the hybridized Block `net` (it has run `sample` once) as deployed:
    PREFIX-symbol.json and PREFIX-0000.params, as HybridBlock.export names them, each moved
    into place only once both are written and `SymbolBlock.imports` of them gave `net`'s
    outputs on `sample` (within `tolerance` of the outputs' scale; else ValueError and
    nothing written). Returns (symbol file, params file, largest output difference)."""
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
    want = net(sample).astype("float32").asnumpy()  # AMP may answer in bfloat16
    tmp = tempfile.mkdtemp(dir=directory, prefix=".export-")
    try:
        symbol, params = export(net, os.path.join(tmp, "model"))
        got = import_block(symbol, params, ctx, "data")(sample).astype("float32").asnumpy()
        diff = float(np.abs(got - want).max())
        if not diff <= tolerance * max(1.0, float(np.abs(want).max())):
            raise ValueError("the exported model's outputs differ from the trained one's by %.3g; nothing written"
                             % diff)
        final = prefix + SUFFIX, prefix + "-0000.params"
        os.replace(params, final[1])
        os.replace(symbol, final[0])
        return final[0], final[1], diff
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


STATIC = {"static_alloc": True, "static_shape": True}


def export_trained(net, model, classes, sample_shape, ctx, prefix, tolerance=1e-4):
    """train --export: the trained `net` (model spec `model`, `classes` outputs, one sample
    of `sample_shape`) written as deployed to PREFIX-symbol.json and PREFIX-0000.params. A
    copy of the model is built, given `net`'s weights (from its first context) and
    hybridized, so that the export does not depend on how training ran it (imperatively,
    hybridized, in checkpointed segments). Under bfloat16 AMP the copy's graph carries AMP's
    casts, which export() drops: the files are float32 (as AMP's weights are), and the
    check's `tolerance` must allow for bfloat16's rounding. Returns export_checked's tuple."""
    from ..training.model_spec import as_spec, random_input
    from ..training.models import get_model
    spec = as_spec(model)
    x = mx.nd.array(random_input(spec, sample_shape, 2, np.random.RandomState(0)), ctx=ctx, dtype=spec.input_dtype)
    copy = get_model(spec, classes, [ctx])
    copy.initialize(ctx=ctx)
    copy(x)  # finishes deferred initialisation, imperatively
    trained = net._collect_params_with_prefix()
    for name, param in copy._collect_params_with_prefix().items():
        source = trained[name]
        param.set_data(source.data(source.list_ctx()[0]).as_in_context(ctx))
    copy.hybridize(**STATIC)
    copy(x)
    return export_checked(copy, prefix, x, ctx, tolerance)

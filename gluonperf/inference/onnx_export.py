"""The static rung's graph as an ONNX file, written by MXNet's own exporter and then fixed.

`export` runs `mx.onnx.export_model` (MXNet 1.9.1) with the batch axis dynamic, so one file
serves every batch size, and repairs the three faults it leaves (`fix`): the file says opset 13
(`OPSET`, what its translations are) and IR version 8 (`IR_VERSION`), not the installed onnx's
newest, and its weights are taken out of the graph's inputs, so that ONNX Runtime can fold
constants. BatchNorm fused with its ReLU has no translation and is split back first
(`unfused`). The file passes `onnx.checker.check_model` before it is written; an operator the
exporter does not translate is a ValueError naming it. docs/precision_ladder.md ("Runtimes")
says why each fix, pyproject.toml why onnx is pinned.
"""
import json
import os
import re
import tempfile

import numpy as np

OPSET = 13          # the newest opset MXNet 1.9.1's translations are written for
IR_VERSION = 8      # onnx 1.10's: holds opset 13, and every runtime here reads it
FUSED_BATCHNORM = ("_contrib_BatchNormWithReLU", "BatchNormWithReLU")
_UNTRANSLATED = re.compile(r"No conversion function registered for op type (\S+?)\.? yet")


def fix(model):
    """The ModelProto `model` with opset 13 (default domain), IR version 8 and its weights out of
    the graph's inputs; changed in place and returned."""
    from onnx import helper
    others = [o for o in model.opset_import if o.domain not in ("", "ai.onnx")]
    del model.opset_import[:]
    model.opset_import.extend([helper.make_opsetid("", OPSET)] + others)
    model.ir_version = IR_VERSION
    weights = {w.name for w in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(inputs)
    return model


def unfused(graph):
    """The graph (an exported symbol's JSON as a dict) with every BatchNorm fused with its ReLU
    split into BatchNorm and Activation(relu): the nodes renumbered, the heads and the
    arguments' indices with them. A graph without one is returned as it is."""
    nodes = graph["nodes"]
    if not any(n.get("op") in FUSED_BATCHNORM for n in nodes):
        return graph
    index, relu = {}, {}  # old node -> new node; a split node -> its ReLU (which gives its output 0)

    def entry(e):
        return [relu[e[0]], 0] + e[2:] if e[0] in relu and e[1] == 0 else [index[e[0]], e[1]] + e[2:]
    out = []
    for i, node in enumerate(nodes):
        node = dict(node, inputs=[entry(e) for e in node.get("inputs", [])])
        index[i] = len(out)
        out.append(node)
        if node.get("op") in FUSED_BATCHNORM:
            node["op"] = "BatchNorm"
            relu[i] = len(out)
            out.append({"op": "Activation", "name": node["name"] + "_relu", "attrs": {"act_type": "relu"},
                        "inputs": [[index[i], 0, 0]]})
    fixed = dict(graph, nodes=out, arg_nodes=[index[i] for i in graph["arg_nodes"]],
                 heads=[entry(h) for h in graph["heads"]])
    fixed.pop("node_row_ptr", None)  # optional in the format; MXNet recomputes it
    return fixed


def _exported(symbol, params, input_shape, dtype, path):
    """mx.onnx.export_model of the graph (`symbol`, JSON text) and the weights in file `params`,
    handed over as objects (given paths, it would read PREFIX-symbol.json and PREFIX-0000.params
    rebuilt from their names, whatever the files are called), batch axis dynamic; MXNet's errors
    as ValueError lines."""
    import mxnet as mx
    from mxnet.onnx import export_model
    shape = tuple(int(n) for n in input_shape)
    weights = {name.split(":", 1)[-1]: array for name, array in mx.nd.load(params).items()}
    try:
        export_model(mx.sym.load_json(symbol), weights, in_shapes=[(1,) + shape], in_types=[np.dtype(dtype)],
                     onnx_file_path=path, dynamic=True, dynamic_input_shapes=[(None,) + shape])
    except AttributeError as e:
        found = _UNTRANSLATED.search(str(e))
        if not found:
            raise
        raise ValueError("MXNet's ONNX exporter has no translation for operator %s" % found.group(1)) from None
    except ImportError as e:
        import onnx
        raise ValueError("MXNet's ONNX exporter cannot run with onnx %s (%s); it needs onnx below 1.19"
                         % (onnx.__version__, e)) from None


def export(symbol, params, input_shape, path, dtype="float32"):
    """Write the exported graph (`symbol`: PREFIX-symbol.json, `params`: its .params, as
    `HybridBlock.export` wrote them; `input_shape`: one sample's, without the batch axis) to
    `path` as ONNX, fixed (`fix`) and checked. Returns `path`. ValueError, one line: an
    operator MXNet's exporter does not translate (named), onnx missing or too new."""
    shape = tuple(input_shape or ())
    if not shape or not all(isinstance(n, (int, np.integer)) and n > 0 for n in shape):
        raise ValueError("input_shape %r: give one sample's shape, positive sizes without the batch axis" % (shape,))
    for path_given in (symbol, params):
        if not os.path.isfile(path_given):
            raise ValueError("%s: no such file; give the files HybridBlock.export wrote" % path_given)
    try:
        import onnx
    except ImportError:
        raise ValueError("onnx is not installed: pip install 'onnx>=1.16,<1.18' (MXNet's exporter needs it)") from None
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, raw = tempfile.mkstemp(suffix=".onnx", dir=directory, prefix=".export-")
    os.close(handle)
    try:
        with open(symbol) as f:
            graph = json.dumps(unfused(json.load(f)))
        _exported(graph, params, shape, dtype, raw)
        model = fix(onnx.load(raw))
        onnx.checker.check_model(model)
        onnx.save(model, path)
    finally:
        os.remove(raw)
    return path


def export_block(net, input_shape, prefix, dtype="float32"):
    """A hybridized Block that has run once: `net.export(prefix)` (MXNet's files), then `export`
    of them to PREFIX.onnx. Returns the ONNX file's path."""
    from . import exported
    symbol, params = exported.export(net, prefix)
    return export(symbol, params, input_shape, prefix + ".onnx", dtype)

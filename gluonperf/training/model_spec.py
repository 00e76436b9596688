"""A model as a spec: what to build and what it takes, one object inside a process, text outside.

A `ModelSpec` names a model (a built-in name, a GluonCV zoo name, `package.module:factory` or
`path/to/file.py:factory`) and, where the model's own default does not fit, what it takes: the
factory's keyword arguments, one sample's shape (one per input), the input's dtype and a loss.
Commands resolve it once (`models.resolve_spec`) and pass the object on; text stands for it
only where it leaves the process: in records (`spec.text`, the `model` field) and on the
command lines of the processes a command starts (`spec.flags`), read back with `parse_spec`.
The functions that take a model accept its text too (`as_spec`). A model of several inputs is
fed one flat batch that `models.SeveralInputs` slices: docs/your_model.md, "Several inputs".
"""
import importlib
import importlib.util
import inspect
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional

INPUT_DTYPES = ("float32", "int32")


@dataclass(frozen=True)
class ModelSpec:
    model: str
    args: dict = field(default_factory=dict)
    input_shape: tuple = ()             # one sample's shape, or one per input; () = the model's default
    input_dtype: str = "float32"
    vocab: Optional[int] = None         # token ids are drawn from 0..vocab-1
    loss: Optional[str] = None          # module:factory or file.py:factory of a gluon Loss
    output_shapes: tuple = ()           # one sample's shape per output, for a model with several
    hybridizable: bool = True           # False: hybridize() fails on it; it runs imperatively
    why_not_hybrid: str = ""

    @property
    def text(self):
        """The text that stands for it, in records and on a child process's command line."""
        return spec_text(self)

    @property
    def label(self):
        """A short name for tables and titles, e.g. ``mynet.py:build(width=64) 3x32x32``."""
        return _label(self)

    @property
    def flags(self):
        """The command-line flags that give it to a command (``--model X``, ``--input-shape`` ...)."""
        return _flags(self)


def as_spec(model):
    """`model` as a ModelSpec: itself when it is one, else its text parsed (`parse_spec`). The
    entry points that take a model call this once; inside a process the object is passed on."""
    if isinstance(model, ModelSpec):
        return model
    if not isinstance(model, str):
        raise ValueError("model: give a ModelSpec or a spec's text, not %s" % type(model).__name__)
    return parse_spec(model)


def text_of(model):
    """The text that stands for `model` (a ModelSpec, or a spec's text, returned as it is), without
    parsing: what records and checkpoints keep of a model that may be either (`TrainConfig.model`)."""
    return model.text if isinstance(model, ModelSpec) else model


def _shape_tuple(value):
    """A shape from JSON: (3, 32, 32), or a tuple of shapes for several inputs."""
    value = tuple(value)
    return tuple(tuple(v) for v in value) if value and isinstance(value[0], (list, tuple)) else value


def input_shapes(spec):
    """The shape of each input of `spec` (one for most models; none when it keeps its default)."""
    if not spec.input_shape:
        return []
    return list(spec.input_shape) if isinstance(spec.input_shape[0], tuple) else [spec.input_shape]


def flat_size(shape):
    out = 1
    for n in shape:
        out *= n
    return out


def is_factory(name):
    """True for `module:factory` and `file.py:factory`, False for a model's name."""
    return ":" in str(name)


def parse_spec(text):
    """The ModelSpec of `text` (a spec's JSON, or a model's name or factory)."""
    if isinstance(text, ModelSpec):
        return text
    text = str(text)
    if text.startswith("{"):
        fields = json.loads(text)
        fields["input_shape"] = _shape_tuple(fields.get("input_shape", ()))
        fields["output_shapes"] = tuple(tuple(shape) for shape in fields.get("output_shapes", ()))
        return ModelSpec(**fields)
    return ModelSpec(text)


def spec_text(spec):
    """The text that stands for `spec`: its model alone when nothing else is set, else JSON."""
    default = ModelSpec(spec.model)
    if spec == default:
        return spec.model
    fields = {k: v for k, v in asdict(spec).items() if k == "model" or v != getattr(default, k)}
    for name in ("input_shape", "output_shapes"):
        if name in fields:
            fields[name] = json.loads(json.dumps(fields[name]))  # tuples as lists
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


def spec_flags(text):
    """The command-line flags that give the model `text` (or a ModelSpec) to a command: `--model X`
    and, for a model of one's own, `--model-args`, `--input-shape`, `--input-dtype`, `--vocab-size`,
    `--loss`."""
    return parse_spec(text).flags


def _flags(spec):
    flags = ["--model", spec.model]
    if spec.args:
        flags += ["--model-args", json.dumps(spec.args, sort_keys=True, separators=(",", ":"))]
    for shape in input_shapes(spec):
        flags += ["--input-shape", ",".join(map(str, shape))]
    if spec.input_dtype != "float32":
        flags += ["--input-dtype", spec.input_dtype, "--vocab-size", str(spec.vocab)]
    if spec.loss:
        flags += ["--loss", spec.loss]
    return flags


def label(text):
    """A short name for tables and titles of the model `text` (or a ModelSpec); a record's
    `model` field is text (anything else is read as its str, as records of old were)."""
    return parse_spec(text).label


def _label(spec):
    name = spec.model
    if is_factory(name):
        where, factory = name.rsplit(":", 1)
        name = "%s:%s" % (os.path.basename(where), factory)
    if spec.args:
        name += "(%s)" % ",".join("%s=%s" % kv for kv in sorted(spec.args.items()))
    if spec.input_shape:
        name += " " + "+".join("x".join(map(str, shape)) for shape in input_shapes(spec))
    if spec.input_dtype != "float32":
        name += " %s<%d" % (spec.input_dtype, spec.vocab)
    return name


def parse_model_args(text):
    """`--model-args`: JSON (`{"depth": 3}`) or `key=value,key=value`, values read as JSON
    where they parse (3, 0.5, true, "x") and as text otherwise."""
    text = (text or "").strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            out = json.loads(text)
        except ValueError as e:
            raise ValueError("--model-args %s: not JSON (%s); write {\"key\": value} or key=value,key=value"
                             % (text, e))
        if not isinstance(out, dict):
            raise ValueError("--model-args %s: give an object, {\"key\": value}" % text)
        return out
    out = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ValueError("--model-args %s: %r is not key=value; write key=value,key=value or JSON"
                             % (text, part))
        try:
            out[key.strip()] = json.loads(value)
        except ValueError:
            out[key.strip()] = value
    return out


def parse_shape(text):
    """`--input-shape C,H,W` (or CxHxW): one sample's shape, positive integers."""
    parts = str(text).replace("x", ",").split(",")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        shape = ()
    if not shape or any(n <= 0 for n in shape):
        raise ValueError("--input-shape %s: give one sample's shape as positive integers, e.g. 3,32,32" % text)
    return shape


def load_factory(ref, what="--model"):
    """The callable `ref` names: `package.module:name` or `path/to/file.py:name`.
    ValueError in one line when the module or file is not there, does not import, or
    has no such callable."""
    where, _, name = str(ref).rpartition(":")
    if not where or not name:
        raise ValueError("%s %s: write module:factory or file.py:factory" % (what, ref))
    if where.endswith(".py"):
        path = os.path.abspath(where)
        if not os.path.isfile(path):
            raise ValueError("%s %s: no file %s" % (what, ref, where))
        module_name = "gluonperf_user_" + os.path.splitext(os.path.basename(path))[0]
        module = sys.modules.get(module_name)
        if module is None or getattr(module, "__file__", None) != path:
            module_spec = importlib.util.spec_from_file_location(module_name, path)
            module = importlib.util.module_from_spec(module_spec)
            sys.path.insert(0, os.path.dirname(path))  # its own imports of files beside it
            try:
                module_spec.loader.exec_module(module)
            except Exception as e:  # the user's code: any error is the answer
                raise ValueError("%s %s: %s does not import: %s: %s" % (what, ref, where, type(e).__name__, e))
            finally:
                sys.path.remove(os.path.dirname(path))
            sys.modules[module_name] = module
    else:
        try:
            module = importlib.import_module(where)
        except Exception as e:
            raise ValueError("%s %s: module %s does not import: %s: %s" % (what, ref, where, type(e).__name__, e))
    factory = getattr(module, name, None)
    if not callable(factory):
        raise ValueError("%s %s: %s has no callable %r" % (what, ref, where, name))
    return factory


def absolute(ref):
    """`ref` with a file.py's path made absolute, so that processes started elsewhere find it."""
    where, _, name = str(ref).rpartition(":")
    return "%s:%s" % (os.path.abspath(where), name) if where.endswith(".py") else ref


def build_factory(spec, classes):
    """The Block `spec`'s factory returns, with its args and `classes=` when it accepts it."""
    from mxnet import gluon
    factory = load_factory(spec.model)
    kwargs = dict(spec.args)
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if "classes" in params or any(p.kind == p.VAR_KEYWORD for p in params.values()):
        kwargs.setdefault("classes", classes)
    try:
        net = factory(**kwargs)
    except Exception as e:
        raise ValueError("--model %s: %s(%s) failed: %s: %s" % (spec.label, spec.model.rsplit(":", 1)[1],
                         ", ".join("%s=%r" % kv for kv in kwargs.items()), type(e).__name__, e))
    if not isinstance(net, gluon.Block):
        raise ValueError("--model %s: the factory returned %s, not a gluon Block" % (spec.model, type(net).__name__))
    return net


def random_input(spec, shape, batch_size, rng):
    """A batch of inputs for `spec` (numpy): token ids in 0..vocab-1 for int32, else uniform in [0, 1)."""
    full = (batch_size,) + tuple(shape)
    if spec.input_dtype == "int32":
        return rng.randint(0, spec.vocab, size=full).astype("int32")
    return rng.uniform(size=full).astype("float32")


def load_loss(spec):
    """The loss Block of `spec`: its own factory's, or softmax cross-entropy."""
    from mxnet import gluon
    if not spec.loss:
        return gluon.loss.SoftmaxCrossEntropyLoss()
    try:
        loss = load_factory(spec.loss, "--loss")()
    except ValueError:
        raise
    except Exception as e:
        raise ValueError("--loss %s: the factory failed: %s: %s" % (spec.loss, type(e).__name__, e))
    if not isinstance(loss, gluon.Block):
        raise ValueError("--loss %s: the factory returned %s, not a gluon Loss (Block)" % (spec.loss, type(loss).__name__))
    return loss

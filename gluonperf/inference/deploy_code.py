"""The configuration to deploy, served outside gluonperf: its rung's files kept (`--keep DIR`),
its runtime and precision in words, and the few lines of code that serve it as it was measured.

The lines are written from the same definitions the rung was built and served with, never a
second spelling of them: MXNet's graph rungs `SymbolBlock.imports` and `hybridize(**STATIC)`
(ladder.load), with the layout's threads as OMP_NUM_THREADS set before MXNet loads (as each
instance has it); ONNX Runtime's `InferenceSession` with `runtimes.ort_options`; OpenVINO's
`compile_model` with `runtimes.ov_properties`. Each snippet defines `predict(batch)`: a float32
numpy batch in, the numpy output out, as the rung answered in the run.

What the lines need is in the records (`fields`: the files' names, the folder they were kept
in, the graph's input name), so that the report writes the same lines as the command. Without
--keep the lines name the files under DIR, and the deploy line says how to get them.
Nothing here imports MXNet or a runtime.
"""
import contextlib
import os
import shutil

from ..records import Result
from . import runtimes

STATIC = {"static_alloc": True, "static_shape": True}   # how MXNet's graph rungs run (ladder.load, and here)
PLACEHOLDER = "DIR"   # where the files would be: --keep DIR
WORDS = {             # each rung's runtime and precision, in words
    "fp32": "MXNet, float32, the Block as written (imperative)",
    "static": "MXNet, float32, hybridized static graph",
    "fused": "MXNet, float32, graph fused by oneDNN",
    "bf16": "MXNet, bfloat16 (AMP: convolutions and dense layers)",
    "int8": "MXNet, INT8 (oneDNN, calibrated min/max)",
    "ort-fp32": "ONNX Runtime, float32",
    "ort-int8": "ONNX Runtime, INT8 (QDQ, U8S8)",
    "ov-fp32": "OpenVINO, float32",
    "ov-bf16": "OpenVINO, bfloat16",
    "ov-int8": "OpenVINO, INT8 (QDQ, U8S8)",
}


def files(rung):
    """{role: (the file rung `rung` serves from, its name when kept)}: an MXNet graph's
    'symbol' and 'params' (named by the rung, as export() names them: an exported model's own
    files are copied under the static rung's names); fp32's 'params'; a runtime's 'onnx' (one
    file may serve two rungs: static.onnx, int8-qdq.onnx). {} for a rung not built."""
    if rung.error:
        return {}
    if rung.kind == "onnx":
        return {"onnx": (rung.onnx, os.path.basename(rung.onnx))}
    if rung.kind == "spec":
        return {"params": (rung.params, "%s.params" % rung.name)}
    return {"symbol": (rung.symbol, "%s-symbol.json" % rung.name),
            "params": (rung.params, "%s-0000.params" % rung.name)}


def fields(rung, kept=None):
    """The record fields of rung `rung` (a built ladder.Rung) that its lines need: the files'
    names, the folder `kept` they were kept in (None: not kept), the graph's input name (an MXNet
    graph rung) or the model spec and classes (fp32, rebuilt from them)."""
    out = {"files": {role: name for role, (_, name) in files(rung).items()}}
    if not out["files"]:
        return {}
    if kept:
        out["kept"] = kept
    if rung.kind == "symbol":
        from .exported import input_name
        out["input_name"] = input_name(rung.symbol, rung.params)
    elif rung.kind == "spec":
        out.update(spec=rung.spec, classes=rung.classes)
    return out


def keep_problem(directory):
    """Why `directory` cannot receive the rungs' files (None when it can): it must not exist yet or
    be an empty folder, in a folder that exists and can be written."""
    from ..runtime.outputs import directory_problem
    target = os.path.abspath(directory)
    if os.path.lexists(target) and not os.path.isdir(target):
        return "is a file; give a folder that does not exist yet, or an empty one"
    if os.path.isdir(target) and os.listdir(target):
        return "is a folder with files in it; give a folder that does not exist yet, or an empty one"
    parent = os.path.dirname(target)
    if not os.path.isdir(parent):
        return "cannot be made: %s is not a folder" % parent
    return directory_problem(parent)


@contextlib.contextmanager
def keeping(directory):
    """--keep DIR: yields `keep(rungs)`, which copies the built rungs' files (`files`) into a
    hidden folder beside DIR and returns DIR's absolute path; when the block ends without an
    error that folder becomes DIR, and on an error, a signal or a stall it is removed
    (guard.temp_dir): DIR never holds half a run. Yields None when `directory` is None.
    ValueError, one line: a DIR that cannot take them (`keep_problem`)."""
    if directory is None:
        yield None
        return
    problem = keep_problem(directory)
    if problem:
        raise ValueError("--keep %s %s" % (directory, problem))
    from ..runtime import guard
    from ..runtime.outputs import umask_mode
    target = os.path.abspath(directory)
    with guard.temp_dir(prefix=".%s-partial-" % os.path.basename(target), dir=os.path.dirname(target)) as partial:
        def keep(rungs):
            for rung in rungs:
                for source, name in files(rung).values():
                    if not os.path.exists(os.path.join(partial, name)):
                        shutil.copyfile(source, os.path.join(partial, name))
            return target
        yield keep
        if os.path.isdir(target):
            os.rmdir(target)  # empty, as checked: rename() puts the folder in its place
        os.chmod(partial, umask_mode(0o777))  # a folder as mkdir makes it, not mkdtemp's private one
        os.rename(partial, target)


def not_kept(records):
    """`records` without the folder --keep names: a stopped run's records, whose folder `keeping`
    removes, so that their deploy line says the files were not kept instead of naming a folder
    that is not there."""
    return [Result(r.bench, r.name, {k: v for k, v in r.metrics.items() if k != "kept"}) for r in records]


def layout_words(m):
    """'2 instances of 1 thread, each pinned to cores of its own' for a record's fields `m`."""
    n, threads = int(m.get("instances") or 1), int(m.get("threads") or 1)
    return "%d instance%s of %d thread%s%s" % (n, "" if n == 1 else "s", threads, "" if threads == 1 else "s",
                                               ", each pinned to cores of its own" if n > 1 else "")


def batching_words(m):
    """'batches of up to 8 gathered within 5 ms', or 'one request a call'."""
    if not m.get("batch_window_s"):
        return "one request a call"
    return "batches of up to %s gathered within %g ms" % (m.get("max_batch"), m["batch_window_s"] * 1e3)


def words(m):
    """The configuration of a record's fields `m` in words: runtime and precision, layout, batching."""
    return "%s; %s; %s" % (WORDS.get(m.get("precision"), m.get("precision")), layout_words(m), batching_words(m))


def code(m):
    """The lines of Python that serve configuration `m` (a record's fields, with `fields`'s) as it
    was measured: one instance's process, which defines `predict(batch)`; comments say how many
    such processes, on which cores, and the batching. None for a record without its rung's files."""
    names = m.get("files")
    if not names:
        return None
    where = m.get("kept") or PLACEHOLDER
    path = {role: os.path.join(where, name) for role, name in names.items()}
    name, threads = m["precision"], int(m.get("threads") or 1)
    n = int(m.get("instances") or 1)
    cores = "0" if threads == 1 else "0-%d" % (threads - 1)
    head = ["# %s as measured: %s" % (name, WORDS.get(name, name)),
            "# %s: %s pinned to %d core%s of its own (taskset -c %s python serve.py)" % (
                m.get("layout", "%dx%d" % (n, threads)), "this process" if n == 1 else
                "%d processes of this code, each" % n, threads, "" if threads == 1 else "s", cores)]
    if m.get("batch_window_s"):
        from .instances import buckets
        head.append("# batching: the requests that arrive within %g ms of a batch's first, up to %s, in one "
                    "predict() call, padded to %s (each size called once before serving)"
                    % (m["batch_window_s"] * 1e3, m.get("max_batch"),
                       _listed(buckets(int(m.get("max_batch") or 1)))))
    shape = ", ".join(str(d) for d in m.get("input_shape") or ())
    runtime = runtimes.runtime_of(name) if name in runtimes.RUNGS else "mxnet"
    body, out = {"ort": _ort, "ov": _ov, "mxnet": _mxnet}[runtime](m, name, path, threads)
    return "\n".join(head + body + ["", "", "def predict(batch):  # float32, shape (N, %s)" % shape,
                                    "    return " + out])


def _listed(sizes):
    """'1, 2, 4 or 8'."""
    words = [str(s) for s in sizes]
    return words[0] if len(words) == 1 else "%s or %s" % (", ".join(words[:-1]), words[-1])


def _ort(m, name, path, threads):
    options = ["options.%s = %s" % (k, "onnxruntime." + v if isinstance(v, str) else repr(v))
               for k, v in runtimes.ort_options(threads).items()]
    return (["import onnxruntime", "", "options = onnxruntime.SessionOptions()"] + options +
            ["session = onnxruntime.InferenceSession(%r, options, providers=%r)" % (path["onnx"],
                                                                                    runtimes.ORT_PROVIDERS),
             "name = session.get_inputs()[0].name"]), "session.run(None, {name: batch})[0]"


def _ov(m, name, path, threads):
    return (["import openvino", "",
             "compiled = openvino.Core().compile_model(%r, %r, %r)" % (path["onnx"], runtimes.OV_DEVICE,
                                                                       runtimes.ov_properties(name, threads)),
             "request = compiled.create_infer_request()"]), "request.infer({0: batch})[0]"


def _mxnet(m, name, path, threads):
    lines = ["import os", "", "os.environ['OMP_NUM_THREADS'] = %r  # the layout's threads, before MXNet loads"
             % str(threads), "import mxnet as mx", ""]
    if "symbol" in path:
        lines += ["net = mx.gluon.SymbolBlock.imports(%r, [%r], %r, ctx=mx.cpu())" % (
            path["symbol"], m.get("input_name") or "data", path["params"]),
                  "net.hybridize(%s)" % ", ".join("%s=%r" % kv for kv in STATIC.items())]
    else:  # fp32: the Block as written, not hybridized; in your code, your model's class
        lines += ["from gluonperf.training.models import get_model", "",
                  "net = get_model(%r, %r, [mx.cpu()])" % (m.get("spec"), m.get("classes") or 10),
                  "net.load_parameters(%r, ctx=mx.cpu())" % path["params"]]
    if name == "bf16":
        lines.append("# on a CPU with AMX, Linux asks for the process's permission first: "
                     "gluonperf.runtime.precision.request_amx()")
    cast = ".astype('float32')" if name == "bf16" else ""  # AMP's last layer may answer in bfloat16
    return lines, "net(mx.nd.array(batch))%s.asnumpy()" % cast

"""Parse `--ctx` values into MXNet contexts, and refuse what cannot run here.

Accepted: `cpu`, `cpu0`, `cpu:1`, `cpu0,cpu1`, `gpu0,gpu1`, `gpu:0`, and `gpu`
(every GPU MXNet sees). Several `cpu(i)` contexts are separate devices to MXNet's
engine, which is how the multi-device code paths are tested without a GPU.

MXNet is imported only once the text is well formed: a mistyped --ctx is refused at once, not
after MXNet's start of a second or two.
"""
import re

from .. import UserError

_ITEM = re.compile(r"^(cpu|gpu)(?::?(\d+))?$")


def num_gpus():
    import mxnet as mx
    try:
        return mx.context.num_gpus()
    except mx.base.MXNetError:
        return 0


def parse_contexts(spec, gpus=None):
    """'gpu0,gpu1' -> [mx.gpu(0), mx.gpu(1)]. Raises UserError for anything else.

    `gpus` is the number of visible GPUs (asked of MXNet when None).
    """
    items = [s.strip().lower() for s in str(spec).split(",")]
    if not spec or not all(items):
        raise UserError("--ctx %r is empty or has an empty item; use e.g. cpu, cpu0,cpu1 or gpu0,gpu1" % spec)
    for item in items:
        if not _ITEM.match(item):
            raise UserError("--ctx item %r is not a context; use cpu, cpuN, gpu, gpuN or gpu:N, comma-separated" % item)
    import mxnet as mx
    if gpus is None:
        gpus = num_gpus()
    contexts = []
    for item in items:
        kind, index = _ITEM.match(item).groups()
        if kind == "gpu":
            if gpus == 0:
                raise UserError(
                    "--ctx %s asks for a GPU but MXNet sees none (%s build); install the GPU build with "
                    "pip install '.[gpu]' on a machine with CUDA 11, or use --ctx cpu" % (spec, _build()))
            if index is None:
                contexts.extend(mx.gpu(i) for i in range(gpus))
                continue
            if int(index) >= gpus:
                raise UserError("--ctx %s asks for gpu%s but MXNet sees %d GPU(s): gpu0..gpu%d"
                                % (spec, index, gpus, gpus - 1))
            contexts.append(mx.gpu(int(index)))
        else:
            contexts.append(mx.cpu(int(index or 0)))
    if len(set(contexts)) != len(contexts):
        raise UserError("--ctx %s names the same context twice" % spec)
    return contexts


def _build():
    import mxnet as mx
    return "CUDA" if mx.runtime.Features().is_enabled("CUDA") else "CPU-only"


def describe(contexts):
    return ",".join("%s%d" % (c.device_type, c.device_id) for c in contexts)

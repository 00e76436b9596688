"""What ran: the oneDNN primitives one call of each MXNet graph rung executed, read from oneDNN's
own verbose output (`DNNL_VERBOSE=1`: a line per primitive executed, on stdout, with its kind,
its implementation, e.g. `jit:avx2` or `x64:gemm:jit`, and its time in ms).

MXNet 1.9.1's library does not export oneDNN's `dnnl_set_verbose`, and oneDNN reads
`DNNL_VERBOSE` once, at its first primitive, so verbose cannot be switched on in the parent for
one call. `read` therefore starts one short process (`gluonperf.workers.primitives`, with
`DNNL_VERBOSE=1`) that loads every graph rung in turn as `ladder.load` serves it, calls it once
at the batch size (MXNet plans the graph, oneDNN creates its primitives and reorders the
weights it keeps), then once more with stdout in a file: the second call's lines are what a
warm call runs. Operators MXNet runs outside oneDNN print nothing and do not show.
"""
import collections

GRAPH_RUNGS = ("static", "fused", "bf16", "int8")   # MXNet's graph rungs: oneDNN's kernels run them
MODULE = "gluonperf.workers.primitives"
TIMEOUT_S = 300


Primitive = collections.namedtuple("Primitive", "kind impl post_ops ms")


def executed(lines):
    """[Primitive(kind, impl, post_ops, ms)] of oneDNN's verbose `exec` lines among `lines`, in
    order ('dnnl_verbose,exec,cpu,convolution,x64:gemm:jit,...,attr-post-ops:eltwise_relu:0:1 ,...,0.90';
    with DNNL_VERBOSE_TIMESTAMP a timestamp follows the prefix). `post_ops`: the operations
    folded into the primitive ('eltwise_relu', ...). Other lines (info, create, ...) are skipped."""
    out = []
    for line in lines:
        fields = line.strip().split(",")
        if fields[0] not in ("dnnl_verbose", "mkldnn_verbose") or len(fields) < 6:
            continue
        if fields[1] not in ("exec", "create") and fields[2] in ("exec", "create"):
            fields = fields[:1] + fields[2:]  # the timestamp
        if fields[1] != "exec":
            continue
        post_ops = tuple(op.split(":")[0] for word in " ".join(fields[5:-1]).split()
                         if word.startswith("attr-post-ops:") for op in word[len("attr-post-ops:"):].split("+"))
        try:
            ms = float(fields[-1])
        except ValueError:
            ms = None
        out.append(Primitive(fields[3], fields[4], post_ops, ms))
    return out


def summary(primitives):
    """'convolution x64:gemm:jit+eltwise_relu x2, pooling_v2 simple_nchw:any x2; 2 reorders (jit:uni)'
    from `executed`'s list: each kind and implementation (with the operations folded into it)
    and its count, in the order first run; reorders apart (data converted between layouts or
    types, not computed on). ValueError for an empty list."""
    if not primitives:
        raise ValueError("no oneDNN primitive ran")
    return ran_text(["%s %s%s" % (p.kind, p.impl, "".join("+" + op for op in p.post_ops))
                     for p in primitives if p.kind != "reorder"],
                    [p.impl for p in primitives if p.kind == "reorder"], "no computing primitive")


def ran_text(keys, reorders, nothing):
    """'convolution jit:avx2 x2, pooling ...; 2 reorders (jit:uni)': each of `keys` (what ran, in
    order) with its count, in the order first run, then the reorders apart; `nothing` where no key
    is left. The one wording of what ran, for MXNet's primitives and the runtimes' kernels."""
    counts = collections.Counter(keys)
    ran = ["%s%s" % (k, " x%d" % counts[k] if counts[k] > 1 else "") for k in dict.fromkeys(keys)]
    tail = ("%d reorder%s (%s)" % (len(reorders), "" if len(reorders) == 1 else "s",
                                   ", ".join(dict.fromkeys(reorders))) if reorders else "no reorder")
    return "%s; %s" % (", ".join(ran) or nothing, tail)


def read(rungs, ctx, batch_size, timeout=TIMEOUT_S):
    """{rung name: 'ran at batch N: ...'} for each built MXNet graph rung of `rungs` (`GRAPH_RUNGS`;
    the others are left out; none off the CPU), read in one fresh process with DNNL_VERBOSE=1.
    Never raises for what the process does: a rung whose primitives could not be read gets
    'what ran: not read (why)'. ValueError for a batch size below 1."""
    import subprocess
    from .. import error_line
    from ..runtime import transport, wire
    if int(batch_size) < 1:
        raise ValueError("batch_size %r: give a positive batch size" % (batch_size,))
    graphs = [r for r in rungs if r.name in GRAPH_RUNGS and r.kind == "symbol" and not r.error]
    if not graphs or ctx.device_type != "cpu":  # oneDNN is MXNet's CPU backend
        return {}
    settings = {"rungs": [r.to_text() for r in graphs], "device_type": ctx.device_type,
                "device_id": ctx.device_id, "batch_size": int(batch_size)}
    try:
        answers = transport.run_worker(MODULE, settings, "the reading process", timeout=timeout,
                                       env={"DNNL_VERBOSE": "1"})
    except subprocess.TimeoutExpired:
        return {r.name: "what ran: not read (no answer in %g s)" % timeout for r in graphs}
    except wire.WorkerFailed as e:
        return {r.name: "what ran: not read (%s)" % e for r in graphs}
    except Exception as e:  # noqa: BLE001 (whatever stops the reading, the rungs stand)
        return {r.name: "what ran: not read (%s: %s)" % (type(e).__name__, error_line(e)) for r in graphs}
    out = {}
    for r in graphs:
        got = answers.get(r.name) or {"error": "the process did not answer for it"}
        try:
            if "error" in got:
                raise RuntimeError(got["error"])
            out[r.name] = "ran at batch %d: %s" % (batch_size, summary(executed(got["lines"])))
        except Exception as e:  # noqa: BLE001
            out[r.name] = "what ran: not read (%s)" % error_line(e)
    return out

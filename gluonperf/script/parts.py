"""The parts of profile --'s summary besides the step (script/summary.py): the operators of the
profiled steps, the model's Blocks, the script's own waits for the engine, the model alone
hybridized, and the growth of its memory over the whole run, each from what the driver wrote
(script/driver.py), as records. In gluonperf's process; it runs nothing.
"""
from ..measure.profile_columns import TOP_OPERATORS
from ..measure import stats
from ..records import result
from .text import code_at, size, where

BENCH = "script"     # the records' bench: the step and its parts, the input verdict, the model alone hybridized
OPERATORS = "script-operators"


def operator_rows(run, batch, peak_flops, common):
    """The top operators of the profiled steps per step (time, share of the profiled step,
    calls, GFLOP/s and fraction of the ceiling where the model's FLOPs count them), and the
    time no operator ran; and notes."""
    from ..measure.operators import GAPS, WAITING, phase, with_ceiling
    ops = run.get("operators")
    notes = []
    if not ops or not ops.get("ops"):
        if ops and ops.get("note"):
            notes.append("note: no operator table: %s" % ops["note"])
        return [], notes
    n, step = ops["steps"], ops["step_s"]
    flops = run.get("model", {}).get("flops")
    count = flop_count(flops) if flops else None
    extra = dict(common, profiled_steps=n, profiled_step_s=step)
    rows = []
    bulk = any("," in name for name in ops["ops"])
    for name, (calls, total) in ops["ops"].items():
        per_image = count.op_flops(name) if count and not bulk else None
        rows.append(result(OPERATORS, name, op=name, phase=phase(name), calls_per_step=calls / n, time_s=total / n,
                           share=total / n / step, flops=per_image * batch if per_image and batch else None, **extra))
    for ctx, seconds in (ops.get("context_waits") or {}).items():
        rows.append(result(OPERATORS, WAITING % ctx, op=WAITING % ctx, phase="wait", time_s=seconds / n,
                           share=seconds / n / step, **extra))
    rows.sort(key=lambda r: -r.metrics["time_s"])
    rows = rows[:TOP_OPERATORS]
    busy = ops.get("busy_s")
    if busy is not None:
        idle = max(0.0, step - busy / n)
        rows.append(result(OPERATORS, GAPS, op=GAPS, phase="-", time_s=idle, share=idle / step, **extra))
    if peak_flops:  # an operator's time is summed over the contexts: device-seconds, against one device's peak
        rows = with_ceiling(rows, peak_flops)
    if any(r.metrics["share"] > 1 for r in rows):
        notes.append("note: an operator above 100% of the step ran on threads of its own, overlapping the others and "
                     "the steps around it (a dist kvstore's push and pull wait for the servers)")
    if bulk:
        notes.append("note: a hybridized graph runs in bulk segments, which MXNet's profiler names by the operators "
                     "they join, so no operator row gets FLOPs (a layer's work may sit in a segment); "
                     "profile --split-bulk runs the script with bulk execution off, which splits them (and changes "
                     "how the script runs)")
    return rows, notes


def block_rows(run, peak_flops, notes):
    """The Blocks' records (measure.blocks), against one context's ceiling."""
    from ..records import Result
    from ..measure.blocks import with_ceiling
    blocks = run.get("blocks")
    if not blocks:
        return []
    if blocks.get("error"):
        notes.append("note: no Blocks table: %s" % blocks["error"])
        return []
    rows = [Result(r.pop("bench"), r.pop("name"), r) for r in (dict(r) for r in blocks["records"])]
    return with_ceiling(rows, peak_flops) if peak_flops else rows


def flop_count(flops):
    """A measure.flops.FlopCount back from its JSON form (`_flops`)."""
    from ..measure.flops import FlopCount
    return FlopCount(flops["forward_by_op"], flops["backward_by_op"], flops["layers_by_op"],
                     tuple(flops["input_shape"]), flops["matmul_forward"], tuple(flops["uncounted"]))


WAITS = "script-waits"
FENCED = ("profile's measured steps are fenced (mx.nd.waitall() at each Trainer.step), so a wait placed after "
          "trainer.step blocks little here, while in the unfenced script it blocks for the whole step's queued work")


def wait_rows(run, step_s, common):
    """The script's own waits for the engine in the measured steps (asnumpy, which asscalar, float()
    and a metric's update call; wait_to_read; waitall), one record a line of the script: calls per
    step and the time Python was blocked there per step, under profile's fences (FENCED)."""
    line = run.get("waits") or {}
    out = []
    for w in line.get("waits") or []:
        out.append(result(WAITS, "%s:%d %s" % (w["file"], w["line"], w["what"]), what=w["what"], file=w["file"],
                          line=w["line"], calls=w["calls"], calls_per_step=w["calls_per_step"],
                          blocked_s_per_step=w["seconds_per_step"],
                          blocked_share=w["seconds_per_step"] / step_s if step_s else None,
                          waits_steps=line.get("steps"), caveat=FENCED, **common))
    return out


def hybridize_rows(run, threshold, common):
    """The model alone (`hybridize_alone`), as the script runs it against hybridized static: the
    per-round speed ratio (as it is / static, > 1: static is faster) with its interval and verdict;
    or why it was not timed."""
    h = run.get("hybridize")
    if not h:
        return []
    fields = {k: h.get(k) for k in ("mode", "skipped", "error", "steps_per_round", "ctx") if h.get(k) is not None}
    fields["model_batch"] = h.get("batch_size")
    fields["kind"] = h.get("model_kind")
    fields.setdefault("model_class", h.get("model"))
    if h.get("as_is_s") and h.get("static_s"):
        iv = stats.ratio_interval(stats.paired_ratios(h["as_is_s"], h["static_s"]))
        judged = stats.verdict(iv, threshold)
        fields.update(iv.fields("ratio"), **judged.fields(), as_is_s=h["as_is_s"], static_s=h["static_s"],
                      as_is_step_s=_median(h["as_is_s"]), static_step_s=_median(h["static_s"]))
    return [result(BENCH, "hybridize alone", part="the model alone, as it is against hybridized static",
                   **fields, **common)]


def _median(values):
    values = sorted(values)
    return (values[(len(values) - 1) // 2] + values[len(values) // 2]) / 2


COUNTED = {"finished": "the steps the engine finished (a marker queued behind each step)",
           "queued": "the steps Python queued (no marker could be queued behind the Trainer's last parameter)"}


def growth_rows(run, cwd=None, common=None):
    """The records of the growth of a run's memory (measure.growth.records_of), with where it
    comes from when the window could tell: `held` (the lines that hold arrays), `where` and
    `code` (the first), `input_shapes`; `finding` names them when memory grows; `counted`:
    against which steps memory was counted. Then the queue's record (measure.progress:
    how far Python ran ahead of the engine, what its queue held), apart from growth."""
    from ..measure.growth import records_of
    from ..measure.progress import queue_records
    line = run.get("memory_steps")
    if not line:
        return []
    warmup = line.get("warmup") or 0
    counted = line.get("counted") or "queued"
    rows = records_of(line["memory"], warmup=warmup, counted=COUNTED[counted], **(common or {}))
    causes, fields = _causes(run.get("held") or {}, cwd)
    for r in rows:
        r.metrics.update(fields, causes=causes)
        if r.metrics["growth_verdict"] == "grows" and causes and r.name == "memory growth":
            r.metrics["finding"] += "; " + "; ".join(causes)
    if line.get("queue"):
        rows += queue_records(line["queue"], warmup, **(common or {}))
    return rows


def _causes(window, cwd):
    """(sentences, record fields) of what the window saw: the lines that hold arrays, and a new
    input shape at most steps."""
    causes, fields = [], {}
    if not window:
        return causes, fields
    steps = window.get("steps") or 0
    fields.update(window_start_step=window.get("start"), window_steps=steps)
    if window.get("note"):
        fields["held_note"] = window["note"]
    lines = window.get("lines") or []
    if lines:
        top = lines[0]
        fields.update(where=where(top["file"], top["line"], cwd), code=code_at(top["file"], top["line"]),
                      held_arrays=top["arrays"], held_bytes=top["bytes"],
                      held=[dict(h, where=where(h["file"], h["line"], cwd)) for h in lines])
        causes.append("%d arrays (%s) made at %s `%s` in the %d steps traced from step %d were still held after "
                      "them" % (top["arrays"], size(top["bytes"]), fields["where"], fields["code"], steps,
                                window["start"]))
    shapes = window.get("shapes") or {}
    if shapes.get("calls"):
        fields.update(input_shapes=shapes["distinct"], input_calls=shapes["calls"])
        if shapes["distinct"] >= max(2, 0.5 * shapes["calls"]):
            causes.append("the model got a new input shape at most steps (%d shapes in %d calls, e.g. %s): a "
                          "hybridized model builds and keeps a graph for each shape, oneDNN a kernel; pad or bucket "
                          "the inputs to a few shapes" % (shapes["distinct"], shapes["calls"], shapes["examples"][0]))
    return causes, fields

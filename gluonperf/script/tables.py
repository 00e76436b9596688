"""The tables of profile --'s report on a user's script (and of `report(prof)` on a loop of one's
own): their columns and titles, the intervals as one cell each. Formatting only: the records
are script/summary.py's.

    from gluonperf.measure.steps import StepProfiler
    from gluonperf.script.tables import report
    with StepProfiler(warmup=3, active=20, profiled=5) as prof:
        ...                                    # the loop, prof.step(batch_size) at each step's end
    print(report(prof))
"""
import math

from ..measure.profile_columns import BLOCK_COLUMNS, OPERATOR_COLUMNS, TOP_OPERATORS
from ..measure import stats
from ..records import format_table, result
from .driver import run_of
from .summary import summarise
from .text import images, pct

STEP_COLUMNS = ["part", "time_s", "share", "share_ci", "images_per_s", "images_per_s_ci", "n"]
MEMORY_COLUMNS = ["part", "rss_peak_bytes", "rss_growth_bytes", "child_processes", "children_peak_bytes"]


def _ci(m, key, share):
    low, high = m.get(key + "_ci_low"), m.get(key + "_ci_high")
    if low is None or high is None:
        return None
    if not math.isfinite(high):
        return "unknown"
    return "%s-%s" % (pct(low), pct(high)) if share else "%s-%s" % (images(low), images(high))


def _shown(records):
    """The step rows with their intervals as one cell each."""
    out = []
    for r in records:
        m = dict(r.metrics)
        m["share_ci"] = _ci(m, "share", True)
        m["images_per_s_ci"] = _ci(m, "images_per_s", False)
        m["n"] = m.get("share_n") or m.get("images_per_s_n")
        out.append(result(r.bench, r.name, **m))
    return out


def sections(summary, warmup=None, what="the script"):
    """(title, results, columns) of each table of a summary, in the order they are printed."""
    step = summary["steps"][0].metrics
    out = [("%s: %d steps measured%s, batch %s on %s; each fenced by mx.nd.waitall() (the step: from the end of "
            "one Trainer.step to the end of the next; waiting for data: inside the data loader's next(); update: "
            "Trainer.step); 95%% intervals over %d rounds of consecutive steps%s"
            % (what, step["steps"], " after %d warm-up" % warmup if warmup is not None else "", step["batch_size"],
               step["contexts"] or "?", step["rounds"], "; the script ended before all were measured (partial)"
               if step["partial"] else ""), _shown(summary["steps"]), STEP_COLUMNS)]
    ops = summary["operators"]
    if ops:
        m = ops[0].metrics
        out.append(("operators [MXNet's profiler, %d more steps]: per step; share of the profiled step (%.4g ms); "
                    "top %d" % (m["profiled_steps"], 1e3 * m["profiled_step_s"], TOP_OPERATORS), ops,
                    OPERATOR_COLUMNS))
    blocks = summary["blocks"]
    if blocks:
        m = blocks[0].metrics
        check = blocks[-1].metrics
        out.append(("Blocks of the model the Trainer updates, each timed alone on the inputs it got in the script's "
                    "last measured batch (%d on %s), %d interleaved rounds; forward under autograd.record, backward "
                    "from a gradient of ones (the script's loss is not known); %s"
                    % (m.get("batch_size") or 0, m.get("ctx"), m.get("rounds") or 0, check.get("finding", "")),
                    blocks, BLOCK_COLUMNS))
    if summary["memory"]:
        out.append(("memory: peak resident memory of %s's process over the measured steps; child_processes: its "
                    "child processes (a DataLoader's workers), the most at once; children_peak_bytes: their memory "
                    "at its peak, as proportional set size (the pages they share with %s counted by their share)"
                    % ("the script" if what != "the loop" else "this", "the script" if what != "the loop" else "it"),
                    summary["memory"], MEMORY_COLUMNS))
    return out


def report(prof, threshold=stats.THRESHOLD):
    """The tables `profile -- python train.py` prints, for a StepProfiler of one's own loop
    (no ceiling: GFLOP/s are not held against one), and the input verdict's sentence."""
    summary = summarise(run_of(prof), threshold=threshold)
    text = "\n\n".join(format_table(results, columns, title) for title, results, columns in sections(
        summary, what="the loop"))
    return "\n".join([text, "", summary["input"][0].metrics["finding"]] + summary["notes"])

"""The terminal text of a user's script's reports: profile --'s "what to change", tune --'s
recipe and what it found and tried, and the small formats they share (a share, images/s, a
line of the script). Formatting only: it reads records and probe findings, measures nothing,
runs nothing (the tables are script/tables.py's).
"""
import linecache
import os
import shlex

from ..measure import stats
from ..records import duration_text as duration  # noqa: F401 (its callers' name)
from ..records import level_text


def pct(x):
    """'4.2%' under 10%, '42%' from there."""
    return "%.1f%%" % (100 * x) if abs(x) < 0.1 else "%.0f%%" % (100 * x)


def images(rate):
    """'6432' or '93,630' images/s: whole numbers from 10,000 up, not 9.363e+04."""
    return "{:,.0f}".format(rate) if rate >= 1e4 else "%.4g" % rate


def times(n):
    """'once' or '2 times' (a step)."""
    return "once" if abs(n - 1) < 1e-9 else "%.3g times" % n


def where(file, line, cwd=None):
    """'train.py:42' (relative to `cwd`, default the current folder, when it is below it); None
    without a file."""
    if not file:
        return None
    rel = os.path.relpath(file, cwd or os.getcwd())
    return "%s:%d" % (file if rel.startswith("..") else rel, line)


def code_at(file, line):
    """The script's line `line` of `file`, stripped ('' without a file)."""
    return linecache.getline(file, line).strip() if file else ""


def size(n):
    """'3.2 MiB', '512 KiB'."""
    return "%.3g MiB" % (n / 2 ** 20) if n >= 2 ** 20 else "%.3g KiB" % (n / 2 ** 10)


def shown(command):
    """The command as a user would type it: a Python interpreter given by its path shown by its
    name (`/venv/bin/python train.py` -> `python train.py`)."""
    first = os.path.basename(command[0])
    return " ".join(shlex.quote(c) for c in [first if first.startswith("python") else command[0]] + list(command[1:]))


# --- profile --'s "what to change" -----------------------------------------------------------

def advice_lines(records):
    """The section `profile --` ends with: the changes measured faster, numbered (only those: a
    person reads a numbered line as an instruction); what was measured and was not faster, and
    what is only to try, each with the `tune --` line that settles it on the whole script; the memory
    findings (memory that grows, nothing measured faster) unnumbered after them."""
    findings = finding_lines([r for r in records if r.metrics.get("lever") == "memory"])
    records = [r for r in records if r.metrics.get("lever") != "memory"]
    faster = [r for r in records if r.metrics["measured"] and r.metrics.get("verdict") == "faster"]
    tried = [r for r in records if r.metrics["measured"] and r.metrics.get("verdict") != "faster"]
    to_try = [r for r in records if not r.metrics["measured"]]
    if faster:
        lines = ["what to change (measured faster in this run):"]
    else:
        lines = ["what to change: nothing this run measured was faster"]
    for i, r in enumerate(faster, 1):
        m = r.metrics
        mark = "measured on %s" % m["measured_on"] if m.get("measured_on") else "measured"
        lines.append("%d. [%s] %s" % (i, mark, _said(m)))
        if m.get("tune"):
            lines.append("   tries it on the whole script: %s" % m["tune"])
    if tried:
        lines.append("measured, not faster (not a change to make; the tune -- line settles it on the whole script):")
        for r in tried:
            lines.append("- %s" % _said(r.metrics))
            if r.metrics.get("tune"):
                lines.append("  %s" % r.metrics["tune"])
    if to_try:
        lines.append("to try (not measured here):")
        for r in to_try:
            m = r.metrics
            lines.append("- %s" % _said(m))
            if m.get("tune"):
                lines.append("  %s: %s" % ("times this wait unfenced, as the script runs" if m["lever"] == "wait"
                                           else "measures it on the whole script", m["tune"]))
    if not records:
        lines = ["what to change: nothing this run measured calls for a change (no costly wait for the engine, not "
                 "input-bound, no model that hybridize could speed up)"]
    return lines + findings


def _said(m):
    """An advice record's line: where, the code, the change (without its 'to try: ')."""
    change = m["change"][len("to try: "):] if m["change"].startswith("to try: ") else m["change"]
    return "%s%s%s" % ("%s: " % m["where"] if m.get("where") else "", "`%s`: " % m["code"] if m.get("code") else "",
                       change)


def finding_lines(records):
    """The lines of profile's "what to change" for the memory findings (never numbered: nothing
    was measured faster)."""
    lines = []
    for r in records:
        m = r.metrics
        lines.append("finding (nothing to measure faster): %s%s%s" % (
            "%s: " % m["where"] if m.get("where") else "", "`%s`: " % m["code"] if m.get("code") else "",
            m["change"]))
    return lines


# --- tune --'s recipe ------------------------------------------------------------------------

def failure_notes(results):
    """What a candidate's failure means for the user, where gluonperf knows: a DataLoader's workers
    hand batches over in shared memory (cpu_shared), which a model hybridized with static_alloc
    refuses (MXNet's CachedOp wants every input on the model's context)."""
    out = []
    if any("cpu_shared" in str(r.metrics.get("error", "")) for r in results if r.metrics.get("lever") == "data"):
        out.append("note: DataLoader workers hand batches over in shared memory (cpu_shared), which a model "
                   "hybridized with static_alloc refuses: copy each batch to the model's context first "
                   "(data = data.as_in_context(mx.cpu())), then try the workers again (tune --levers data)")
    return out


def tried_text(results, idle):
    """What was tried and how each came out, for "no change pays here"."""
    parts = []
    for r in results:
        m = r.metrics
        if m.get("verdict") in ("baseline", None) or m.get("lever") == "confirm":
            continue
        if m.get("ratio") is None:
            parts.append("%s: %s" % (r.name, m.get("error", "no figure")))
        else:
            parts.append("%s %s, %s" % (r.name, interval_text(m), m["verdict"]))
    parts += ["%s not tried: %s" % kv for kv in idle.items()]
    return "; ".join(parts)


def interval_text(m, key="ratio"):
    """'1.29x (95% CI 1.21-1.37, 5 rounds)', or where the rounds are too few for an interval a reader
    can use (`stats.readable`), '0.72x (2 rounds: too few for an interval; about 4 would give one)'."""
    iv = stats.Interval(m[key], m[key + "_ci_low"], m[key + "_ci_high"], m.get(key + "_n") or 0,
                        m.get(key + "_joint_level") or m.get(key + "_level") or stats.LEVEL)
    if stats.readable(iv):
        return "%.2fx (%s CI %.2f-%.2f, %d rounds)" % (iv.estimate, level_text(iv.level), iv.low, iv.high, iv.n)
    # at the level the interval was built at (a look's, under a plan), not the level it states
    need = stats.rounds_for_readable(m.get("round_ratios") or [], m.get(key + "_level") or iv.level)
    return "%.2fx (%d round%s: too few for an interval%s)" % (
        iv.estimate, iv.n, "s" if iv.n != 1 else "", "; about %d would give one" % need if need and need > iv.n else "")


def found_text(found, rate, cwd):
    """What the probe found, in one line."""
    parts = ["as it is: %s images/s" % images(rate["images_per_s"])]
    if found.get("contexts"):
        parts.append("a Trainer (%s) on %s" % (found.get("optimizer"), found["contexts"]))
    model = found.get("model")
    if model:
        kind = {"hybrid": "a HybridBlock", "sequential": "a Sequential of HybridBlocks",
                "imperative": "not hybridizable"}[model["kind"]]
        mode = {"none": "not hybridized", "hybrid": "hybridized", "static": "hybridized static"}[model["mode"]]
        built = where(model.get("file"), model.get("line") or 0, cwd)
        parts.append("the model %s (%s, %s%s)" % (model["class"], kind, mode, ", built at %s" % built if built else ""))
    for l in found.get("loaders") or []:
        parts.append("a DataLoader at %s (num_workers=%s%s)" % (where(l["file"], l["line"], cwd), l["num_workers"],
                                                                 ", thread_pool" if l.get("thread_pool") else ""))
    return "; ".join(parts)


def left_alone(found):
    """What tune -- does not change in the script, when that matters: several contexts, a dist kvstore."""
    ctxs = (found.get("contexts") or "").split(",")
    kv = str(found.get("kvstore") or "")
    said = []
    if len(ctxs) > 1:
        said.append("the script's %d contexts (%s)" % (len(ctxs), found["contexts"]))
    if kv.startswith("dist") or kv == "horovod":
        said.append("its kvstore (%s)" % kv)
    if not said:
        return None
    return ("tune leaves %s as the script sets them, and its batch size: it tunes what can be changed from outside "
            "in each process" % " and ".join(said))


# the levers of the recipe's records that are not a change to make (what it cost, a wait tune cannot remove,
# the changes together, nothing, a lever left unsettled or not reached)
NOT_CHANGES = ("wait", "together", "none", "run", "unsettled", "unreached")


def recipe_lines(advice):
    """The recipe as the terminal shows it."""
    lines = []
    for r in advice:
        if r.metrics["lever"] == "run":
            budget = r.metrics.get("budget_s")
            lines.append("recipe (tune took %s%s: %d runs of the script, the probe included)" % (
                duration(r.metrics["wall_s"]), " of its %s budget" % duration(budget) if budget else "",
                r.metrics["runs"]))
    changes = [r for r in advice if r.metrics["lever"] not in NOT_CHANGES]
    waits = [r for r in advice if r.metrics["lever"] == "wait"]
    together = [r for r in advice if r.metrics["lever"] == "together"]
    if changes:
        lines.append("what to change (each measured on this script, here, against it as it is):")
        for i, r in enumerate(changes, 1):
            m = r.metrics
            lines.append("%d. %s: %s" % (i, m["where"] or "?", m["change"]))
            lines.append("   faster: %s" % interval_text(m))
    for r in together:
        m = r.metrics
        # its interval as the changes above say theirs (interval_text: at the level held over the plan's
        # looks, and "too few rounds" where the interval is too wide to read); the verdict's own text
        # states the same level (schedule.summarize) but gives a wide interval as it is
        if m.get("verdict") == "not confirmed":
            lines.append("together: %s" % m["verdict_text"])
            continue
        lines.append("together, confirmed in one interleaved run: %s" % (
            "%s: %s" % (m["verdict"], interval_text(m)) if m.get("ratio_ci_low") is not None else m.get("verdict_text")))
    for r in advice:
        if r.metrics["lever"] == "none":
            lines.append(r.metrics["change"])
    for r in advice:
        if r.metrics["lever"] in ("unsettled", "unreached"):
            lines.append("%s:\n   %s" % (r.metrics["change"], r.metrics["tune"]))
    if waits:
        lines.append("waits for the engine (tune cannot remove them from outside: they change what the script "
                     "computes):")
        for r in waits:
            m = r.metrics
            lines.append("- %s: `%s`: %s" % (m["where"], m["code"], m["change"]))
    return lines

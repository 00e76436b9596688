"""The readings beside the docs' generated examples: the prose that states an example's figures,
written from the records that example kept (docs/examples/NAME.jsonl), never typed by hand.

A page marks each reading `<!-- reading:NAME -->` ... `<!-- /reading:NAME -->`; docs/examples.py
rewrites the text between the markers from READINGS[NAME] whenever it runs the example, and
`python docs/examples.py --check-readings` (tests/test_docs.py) fails where a page's text is not
what the records give. Each function takes the example's records (gluonperf Results) and its
caption ('Real output on a 2-core AMD EPYC (...), 2026-11-28 07:26 UTC (146 s; ...)') and returns
Markdown.
"""
import re

from gluonperf.inference.deploy import accuracy_text, gate, held_text, recommend
from gluonperf.records import format_value
from gluonperf.render.kinds import verdict_of, with_interval


def machine_and_date(caption):
    """('2-core AMD EPYC (family 25 model 17)', '2026-11-28') from an example's caption."""
    found = re.match(r"Real output on an? (.*), (\d{4}-\d\d-\d\d) \d\d:\d\d UTC", caption or "")
    return found.groups() if found else ("machine not recorded", "date not recorded")


def _of(records, scenario, **fields):
    return [r for r in records if r.metrics.get("scenario") == scenario and not r.metrics.get("error")
            and all(r.metrics.get(k) == v for k, v in fields.items())]


def _ratio(r, of):
    """'0.47x static's p90 (95% CI 0.39-0.57, 3 rounds; slower)'."""
    head, _, rest = with_interval(r.metrics, "ratio").partition(" (")
    said = verdict_of(r.metrics).strip(" ()")
    return "%s %s%s" % (head, of, " (%s%s)" % (rest.rstrip(")"), "; " + said if said else "") if rest else "")


def _points(value):
    return "%+.2f" % (100 * value) if value else "0.00"


def _best(records, key, lower):
    timed = [r for r in records if r.metrics.get(key) is not None]
    return (min if lower else max)(timed, key=lambda r: r.metrics[key]) if timed else None


def infer(records, caption):
    """infer at its defaults: fp32 as written against static, the best of each scenario, how
    many ratios the rounds could not settle."""
    where, _ = machine_and_date(caption)
    single, offline = _of(records, "single-stream"), _of(records, "offline")
    fp32 = min((r for r in single if r.metrics["precision"] == "fp32" and r.metrics.get("ratio_ci_low")),
               key=lambda r: r.metrics["ratio_ci_high"] / r.metrics["ratio_ci_low"], default=None)
    out = ["On that %s:" % where]
    if fp32 is not None:
        out = ["On that %s," % where]
        static = next(r for r in single if r.metrics["precision"] == "static"
                      and r.metrics["layout"] == fp32.metrics["layout"])
        out.append("at %s (the layout where its interval is narrowest), LeNet as written (fp32) answered a "
                   "single-stream query at %s, p90 %s against %s." % (
                       fp32.metrics["layout"], _ratio(fp32, "the speed of its hybridized static form"),
                       format_value("p90_s", fp32.metrics["p90_s"]), format_value("p90_s", static.metrics["p90_s"])))
    for scenario, rs, key, lower in (("single-stream", single, "p90_s", True),
                                     ("offline", offline, "samples_per_s", False)):
        top = _best(rs, key, lower)
        if top is not None:
            out.append("%s %s: %s, %s." % ("The lowest p90 in" if lower else "The most samples/s in", scenario,
                                           top.name, format_value(key, top.metrics[key])))
    rated = [r for r in single + offline if r.metrics.get("verdict") not in (None, "baseline")]
    unsettled = [r for r in rated if r.metrics["verdict"] == "inconclusive"]
    if rated:
        out.append("%d of the %d ratios to static are inconclusive: %s rounds do not settle them, and the tables "
                   "say so rather than guess." % (len(unsettled), len(rated), rated[0].metrics.get("rounds")))
    return " ".join(out)


def infer_exported(records, caption):
    """The exported LeNet served with --calib-data digits: each rung's accuracy against static's,
    and INT8's speed offline."""
    rows = {r.metrics["precision"]: r.metrics for r in records if not r.metrics.get("error")}
    static = rows.get("static")
    if static is None or static.get("accuracy") is None:
        return "The records hold no accuracy of the static rung."
    n = static.get("evaluated_n")
    parts = ["%s %s" % (name, accuracy_text(m).replace(" on %s held-out samples" % m.get("accuracy_n"), ""))
             for name, m in rows.items() if name != "static" and m.get("accuracy_change") is not None]
    out = ["On the %s held-out digits, fp32 static answered %.1f%% right; against it, %s." % (
        n, 100 * static["accuracy"], "; ".join(parts))]
    out[0] = out[0].replace(" against fp32 static (", " (")
    int8 = rows.get("int8")
    if int8 and int8.get("top1_agreement") is not None:
        changed = round((1 - int8["top1_agreement"]) * int8["agreement_n"])
        out.append("INT8 changed %d answer%s of %d." % (changed, "" if changed == 1 else "s", int8["agreement_n"]))
    for name in ("bf16", "int8"):
        if name in rows:
            ok, why = gate(dict(rows[name], precision=name))
            out.append("%s is %sdeployable: %s." % (name, "" if ok else "not ", why))
    fast = [r for r in _of(records, "offline") if r.metrics["precision"] == "int8" and r.metrics.get("ratio_n")]
    best = max(fast, key=lambda r: r.metrics["ratio_ci_low"], default=None)
    if best is not None:
        out.append("Offline, %s got through %s." % (best.name, _ratio(best, "static's samples/s")))
    return " ".join(out)


def infer_runtimes(records, caption):
    """The exported LeNet on MXNet's rungs and the runtimes': each rung's accuracy against static's
    and whether each INT8 rung is deployable, then the rung ahead of static in each scenario."""
    rows = {r.metrics["precision"]: r.metrics for r in records if not r.metrics.get("error")}
    static = rows.get("static")
    if static is None or static.get("accuracy") is None:
        return "The records hold no accuracy of the static rung."
    parts = ["%s %s" % (name, accuracy_text(m).replace(" on %s held-out samples" % m.get("accuracy_n"), "")
                        .replace(" against fp32 static (", " ("))
             for name, m in rows.items() if name != "static" and m.get("accuracy_change") is not None]
    out = ["On the %s held-out digits, fp32 static answered %.1f%% right; against it, %s." % (
        static.get("evaluated_n"), 100 * static["accuracy"], "; ".join(parts))]
    verdicts = [(name, gate(dict(rows[name], precision=name))[0]) for name in ("int8", "ort-int8", "ov-int8")
                if name in rows]
    if verdicts:
        ok = [name for name, passed in verdicts if passed]
        out.append("Deployable by the 99%% rule: %s." % (", ".join(ok) if ok else "none of the INT8 rungs"))
    for scenario, figure in (("single-stream", "static's speed"), ("offline", "static's samples/s")):
        rated = [r for r in _of(records, scenario) if r.metrics.get("ratio_n") and r.metrics["precision"] != "static"]
        best = max(rated, key=lambda r: r.metrics["ratio_ci_low"], default=None)
        if best is not None:
            out.append("%s, the surest gain was %s: %s." % (scenario.capitalize(), best.name, _ratio(best, figure)))
    return " ".join(out)


def infer_server(records, caption):
    """The server scenario: what the deploy line says, and the best configuration without
    batching beside it."""
    advice = recommend(records)
    if advice is None:
        return "The records hold no server run."
    servers = _of(records, "server")
    if not advice.meets:
        return "Nothing met the bound at any rate tried; the closest was %s." % advice.record.name
    if advice.record is None:
        return "No deployable configuration met the bound; %s did." % advice.held.name
    m = advice.record.metrics
    out = ["There (the same machine, minutes later), %s sustained %s with its p99 within %s (%s, valid by "
           "LoadGen%s)." % (advice.record.name, format_value("_per_s", m["rate_at_bound_per_s"]),
                            format_value("_s", m["latency_bound_s"]), format_value("_s", m.get("p99_s")),
                            "; %s was not" % format_value("_per_s", m["rate_invalid_per_s"])
                            if m.get("rate_invalid_per_s") else "")]
    if advice.confirmed is not None:
        chosen, how, judged, why = advice.confirmed
        rate = format_value("_per_s", m.get("confirm_rate_per_s"))
        for first, dropped in advice.earlier:
            out.append("Run again with the others at %s, a round each, interleaved, %s rounds, none held the bound "
                       "in every round (%s), so they ran again at %s, the search's tolerance lower." % (
                           format_value("_per_s", first), m.get("confirm_rounds"), held_text(dropped), rate))
        out.append({"lower": "Run again with %s at %s, a round each, interleaved, %s rounds, it held the bound in "
                             "every round " + ("with the lowest p99 beyond the noise." if any(
                                 "p99_ratio" in f for f in judged.values()) else "and was the only one that did."),
                    "tie": "Run again with %s at %s, a round each, interleaved, %s rounds, it held the bound in every "
                           "round and tied within the noise: it is named for " + why + ".",
                    "none": "Run again with %s at %s, a round each, interleaved, %s rounds, no configuration held the "
                            "bound in every round: the choice is unconfirmed."}[how] % (
            ", ".join(sorted(judged)) or "the others", rate, m.get("confirm_rounds")))
    if advice.held is not None:
        ok, why = gate(advice.held.metrics)
        out.append("%s had the higher rate, %s, and is %s: %s." % (
            advice.held.name, format_value("_per_s", advice.held.metrics["rate_at_bound_per_s"]),
            "not recommended until its accuracy is measured" if ok is None else "not deployable", why))
    plain = _best([r for r in servers if not r.metrics.get("batch_window_s")], "rate_at_bound_per_s", False)
    if plain is not None and plain not in (advice.record, advice.held):
        out.append("Without batching the most was %s's %s." % (
            plain.name, format_value("_per_s", plain.metrics["rate_at_bound_per_s"])))
    out.append("Each rate is one search's LoadGen runs (the one at %s issued %s queries); the bracket, not an "
               "interval, is what the search can say." % (format_value("_per_s", m["rate_at_bound_per_s"]),
                                                           m.get("queries", "?")))
    return " ".join(out)


def _ladder_rows(label, records):
    rows = {r.metrics["precision"]: r.metrics for r in records if not r.metrics.get("error")}
    out = []
    for name in ("static", "fused", "bf16", "int8"):
        m = rows.get(name)
        if m is None or m.get("accuracy") is None:
            continue
        if name == "static":
            out.append("| %s | static (reference) | %.4f | | | |" % (label, m["accuracy"]))
            continue
        out.append("| %s | %s | %.4f | %s points (%s to %s) | %.3f | %.3g |" % (
            label, name, m["accuracy"], _points(m["accuracy_change"]), _points(m["accuracy_change_ci_low"]),
            _points(m["accuracy_change_ci_high"]), m["top1_agreement"], m["max_abs_diff"]))
    return out, rows


def ladder_measured(records, caption, more=()):
    """The precision ladder page's table: every rung's accuracy on the held-out digits, LeNet
    (infer_exported's records) and the MLP (ladder_mlp's, `more`), and what the intervals say."""
    where, date = machine_and_date(caption)
    head = ["On a %s, MXNet 1.9.1, %s, each rung built from the exported files, calibrated on 64 digits of the "
            "test split and judged on the others (95%% paired intervals, one run each):" % (where, date), "",
            "| model | rung | accuracy | change against fp32 static (95% CI) | top-1 agreement | largest output "
            "difference |", "|---|---|---|---|---|---|"]
    tables, judged = [], []
    for label, rs in (("LeNet", records), ("MLP", more)):
        rows, fields = _ladder_rows(label, rs)
        tables += rows
        judged += [m for m in fields.values() if m.get("accuracy_change") is not None]
    if not judged:
        return "\n".join(head + tables)
    worst = min(m["accuracy_change_ci_low"] for m in judged)
    spread = max(abs(m["accuracy_change"]) for m in judged)
    width = max(m["accuracy_change_ci_high"] - m["accuracy_change_ci_low"] for m in judged)
    n = sorted({m["accuracy_n"] for m in judged})
    tail = ("Every rung's accuracy estimate %s fp32 static's; the intervals, up to %.1f points wide, say what %s "
            "held-out samples can tell: at 95%% confidence no rung lowers the accuracy by more than %.2f points." % (
                "is within %.2f points of" % (100 * spread) if spread else "equals", 100 * width,
                " and ".join(map(str, n)), -100 * worst))
    return "\n".join(head + tables + ["", tail])


# reading -> (the example whose records it reads, the function, examples whose records it also reads)
READINGS = {
    "infer": ("infer", infer, ()),
    "infer_exported": ("infer_exported", infer_exported, ()),
    "infer_runtimes": ("infer_runtimes", infer_runtimes, ()),
    "infer_server": ("infer_server", infer_server, ()),
    "ladder_measured": ("infer_exported", ladder_measured, ("ladder_mlp",)),
}

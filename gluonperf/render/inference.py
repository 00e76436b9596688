"""`infer`'s records for people: a table per scenario, the ratio lines, what to deploy, and the
report's section. Derived from the records alone (`bench` inference); nothing here imports MXNet.
"""
import math

from ..inference.deploy import CONFIRM, accuracy_text, gate, passes, recommend, settle
from ..inference.loadgen import FIGURE
from ..inference.rounds import BESIDE, COLD_START, LADDER, LOWER_IS_BETTER, beside_prefix
from ..records import Result, format_value, header_name
from .figures import error_bars, figure, labelled_bars, svg
from .kinds import Block, Kind, Table, interval_column, verdict_of, with_interval

RATIO = ["ratio", "ratio_ci_low", "ratio_ci_high", "verdict"]
COLUMNS = {
    "single-stream": ["name", "p50_s", "p90_s", "p99_s", "early_stopping_p90_s", "loadgen_valid"] + RATIO,
    "multi-stream": ["name", "p50_s", "p99_s", "early_stopping_p99_s", "loadgen_valid"] + RATIO,
    "offline": ["name", "samples_per_s", "loadgen_valid"] + RATIO,
    "server": ["name", "rate_at_bound_per_s", "rate_invalid_per_s", "p99_s", "trials", "loadgen_valid",
               "loadgen_invalid_reason"],
}
ERROR_COLUMNS = ["name", "error"]
LADDER_COLUMNS = ["name", "build_s", "accuracy", "accuracy_change", "accuracy_change_ci_low", "accuracy_change_ci_high",
                  "deployable", "top1_agreement", "max_abs_diff", "note"]
LADDER_FIELDS = ("build_s", "note", "accuracy", "accuracy_ref", "accuracy_change", "accuracy_change_ci_low",
                 "accuracy_change_ci_high", "accuracy_n", "accuracy_level", "accuracy_method", "top1_agreement",
                 "max_abs_diff", "agreement_n", "evaluated_n", "accuracy_note", "accuracy_target")
COLD_COLUMNS = ["name", "total_s", "import_s", "load_s", "first_call_s", "new_shape_call_s", "steady_call_s"]
ORDER = ("single-stream", "multi-stream", "offline", "server")  # the server last: what to deploy follows it
WHAT = {
    "single-stream": "one query of one sample at a time: latency percentiles (LoadGen's figure: p90)",
    "multi-stream": "one query of N samples (b) at a time: its latency percentiles (LoadGen's figure: p99)",
    "offline": "every sample at once, in batches of b: samples/s",
    "server": "Poisson arrivals: the highest rate LoadGen called valid with its p99 within %s, and the lowest "
              "it did not",
}


def _of(records, scenario):
    return [r for r in records if r.metrics.get("scenario") == scenario and not r.metrics.get("error")]


def title(scenario, records):
    m = records[0].metrics
    what = WHAT[scenario] % format_value("_s", m.get("latency_bound_s")) if scenario == "server" else WHAT[scenario]
    ratio = "" if scenario == "server" else (
        "; ratio: speed against %s static in the same round, geometric mean of %s rounds, 95%% interval"
        % ("fp32", m.get("rounds")))
    return "%s, %s on %s, %s%s" % (scenario, m.get("model"), m.get("ctx"), what, ratio)


def ladder_rows(records):
    """One row per precision rung, in the ladder's order: what it is (its note), how long it
    took to build, and its accuracy against fp32 static (the ladder's fields, which every
    record of the rung carries)."""
    rows = {}
    for r in records:
        m = r.metrics
        fields = {k: m[k] for k in LADDER_FIELDS if m.get(k) is not None}
        if fields and not m.get("error") and m.get("precision") in LADDER and m["precision"] not in rows:
            deployable = gate(dict(fields, precision=m["precision"]))[0]  # None: its accuracy was not measured
            fields["deployable"] = "not measured" if deployable is None else deployable
            rows[m["precision"]] = Result("inference", m["precision"], fields)
    return [rows[name] for name in LADDER if name in rows]


def ladder_title(records):
    judged = [r.metrics for r in records if not r.metrics.get("error")]
    m = next((m for m in judged if m.get("accuracy_n") or m.get("agreement_n")), judged[0])
    n = m.get("accuracy_n") or m.get("agreement_n") or m.get("evaluated_n")
    judged = ("accuracy on %s held-out samples of %s, its change against fp32 static with a paired 95%% interval "
              "(Newcombe)" % (n, m.get("calib_data")) if m.get("accuracy_n") else
              "outputs on %s held-out samples against fp32 static's (%s)" % (n, m.get("accuracy_note") or "no labels"))
    target = "{:g}%".format(100 * (m.get("accuracy_target") or 0.99))
    return ("precision ladder, %s: %s; deployable: a float32 rung, or one whose accuracy's interval stays above %s of "
            "fp32 static's; build: seconds to build the rung (calibration included)" % (m.get("model"), judged, target))


def cold_title(records):
    m = records[0].metrics
    sizes = m.get("batch_sizes") or [1, 64]
    return ("cold start, %s on %s: a fresh process from its start to its first answer at batch %d (total: import, "
            "load, first call), then its first call at batch %d (a new shape) and %s after; "
            "%s" % (m.get("model"), m.get("ctx"), sizes[0], sizes[1],
                    "one call" if m.get("steady_calls") == 1 else "the median of %s calls" % m.get("steady_calls"),
                    "1 process a rung" if m.get("rounds") == 1 else "median of %s processes a rung" % m.get("rounds")))


def shown(record):
    """The record as its table row shows it: a percentile its runs had too few queries for says
    so in its cell ('n<662'), where the record holds none."""
    withheld = record.metrics.get("percentiles_withheld")
    if not withheld:
        return record
    return Result(record.bench, record.name, dict(record.metrics, **{k: "n<%d" % n for k, n in withheld.items()}))


def withheld_line(records):
    """Why a percentile cell says 'n<662', and the --duration that would give the queries."""
    short = [r for r in records if set(r.metrics.get("percentiles_withheld") or ()) & set(
        COLUMNS.get(r.metrics.get("scenario"), ()))]
    if not short:
        return None
    needed = {k: n for r in short for k, n in r.metrics["percentiles_withheld"].items()
              if k in COLUMNS[r.metrics["scenario"]]}
    key = max(needed, key=needed.get)
    rates = [r.metrics["samples_per_s"] for r in short if r.metrics.get("scenario") == "single-stream"
             and r.metrics.get("samples_per_s")]
    longer = "; --duration %ds would give them at the rates measured here" % math.ceil(
        needed[key] / min(rates)) if rates else ""
    return ("%s not shown (n<%d) for %d configuration%s: a run had %d queries, and LoadGen's early stopping needs %d "
            "to estimate a %s at 99%% confidence (fewer, and it is about the slowest query)%s" % (
                ", ".join(header_name(k) for k in sorted(needed, key=needed.get)), needed[key], len(short),
                "" if len(short) == 1 else "s", min(r.metrics.get("fewest_queries_per_run") or 0 for r in short),
                needed[key], header_name(key), longer))


CONFIRM_COLUMNS = ["name", "confirm_rate_per_s", "held_rounds", "rounds", "p99_s", "p99_ratio", "p99_ratio_ci_low",
                   "p99_ratio_ci_high", "p99_verdict"]


def confirmation(records):
    """The confirmation's table: (title, rows, columns), a row per contender and pass, with each
    contender's p99 ratio to the one its pass chose (deploy.settle), or None without a
    confirmation."""
    confirms = _of(records, CONFIRM)
    if not confirms:
        return None
    threshold = confirms[0].metrics.get("threshold", 0.05)
    rows, by_pass = [], passes(confirms)
    for _, group in by_pass:
        chosen, how, judged, _ = settle(group, threshold)
        rows += [Result(c.bench, c.name, dict(c.metrics, **judged.get(c.name, {}),
                                              **({"p99_verdict": "chosen (%s)" % how} if c is chosen else {})))
                 for c in group]
    m = confirms[0].metrics
    rates = " then ".join(format_value("_per_s", rate) for rate, _ in by_pass)
    return ("server choice confirmed, %s: each contender at %s (a second rate, the search's tolerance lower, only when "
            "none held the bound in every round at the first), one LoadGen run a round, interleaved; held_rounds: "
            "rounds LoadGen called valid (p99 within %s); p99_ratio: its p99 over the chosen one's at that rate, "
            "geometric mean of the rounds, 95%% interval" % (m.get("model"), rates,
                                                              format_value("_s", m.get("latency_bound_s"))),
            rows, CONFIRM_COLUMNS)


def sections(records):
    """(title, records, columns) of each table the command prints: one per scenario, the
    precision ladder (what each rung costs in accuracy), cold start, then the rungs and
    instances that could not run, each with its one line."""
    out = [(title(s, _of(records, s)), [shown(r) for r in _of(records, s)], COLUMNS[s]) for s in ORDER
           if _of(records, s)]
    out += [part for part in [confirmation(records)] if part]
    ladder = ladder_rows(records)
    if ladder:
        out.append((ladder_title(records), ladder, LADDER_COLUMNS))
    colds = _of(records, COLD_START)
    if colds:  # a row per rung, named by it (the records: 'RUNG cold-start')
        out.append((cold_title(colds), [Result(r.bench, r.metrics["precision"], r.metrics) for r in colds],
                    COLD_COLUMNS))
    failed = [r for r in records if r.metrics.get("error")]
    if failed:
        out.append(("not run here", failed, ERROR_COLUMNS))
    return out


def best_line(scenario, records):
    """'offline: the most samples/s: static 2x1 b64, 12,834/s; of the rungs against static, int8 2x1 b64
    3.91x (95% CI 3.5-4.4, 3 rounds), faster' (the rung whose interval's lower end is highest)."""
    key = FIGURE[scenario]
    lower = key in LOWER_IS_BETTER
    timed = [r for r in records if r.metrics.get(key) is not None]
    if not timed:
        return None
    top = (min if lower else max)(timed, key=lambda r: r.metrics[key])
    line = "%s: the %s: %s, %s" % (scenario, "lowest %s" % header_name(key) if lower else "most %s"
                                   % header_name(key), top.name, format_value(key, top.metrics[key]))
    rated = [r for r in timed if r.metrics.get("ratio_ci_low") is not None]
    if rated:
        best = max(rated, key=lambda r: r.metrics["ratio_ci_low"])
        line += "; of the rungs against static, %s %s%s" % (best.name, with_interval(best.metrics, "ratio"),
                                                             verdict_of(best.metrics))
    return line


BESIDE_WHY = {"int8": "what the 8 bits give beyond oneDNN's fusion"}


def beside_lines(scenario, records):
    """'offline: int8 against fused in the same rounds (what the 8 bits give beyond oneDNN's fusion):
    1x2 b64 3.31x (95% CI 2.80-3.90, 3 rounds) (faster), ...', a line per rung that `BESIDE` sets
    against another, from its records' `vs_RUNG_` fields."""
    lines = []
    for rung, other in BESIDE.items():
        prefix = beside_prefix(other)
        rated = [r for r in records if r.metrics.get("precision") == rung and r.metrics.get(prefix + "ratio")]
        if rated:
            lines.append("%s: %s against %s in the same rounds%s: %s" % (
                scenario, rung, other, " (%s)" % BESIDE_WHY[rung] if rung in BESIDE_WHY else "",
                ", ".join("%s %s%s" % (r.name[len(rung) + 1:], with_interval(r.metrics, prefix + "ratio"),
                                       verdict_of(r.metrics, prefix)) for r in rated)))
    return lines


def readings(records, model_flags=()):
    """The lines under the tables: per scenario the best configuration and the rung furthest
    ahead of fp32 static, and int8 against fused; LoadGen's INVALID runs, and what to deploy."""
    lines = [line for s in ORDER if s != "server" and _of(records, s)
             for line in [best_line(s, _of(records, s))] + beside_lines(s, _of(records, s)) if line]
    lines += [line for line in [withheld_line(records)] if line]
    invalid = [r for r in records if r.metrics.get("loadgen_valid") is False and r.metrics.get("scenario") != "server"]
    if invalid:
        lines.append("LoadGen called %d of the runs above INVALID (%s): their figures are shown, not certified"
                     % (len(invalid), invalid[0].metrics.get("loadgen_invalid_reason", "see its log")))
    cold = [r for r in records if r.metrics.get("unwarmed_batch_sizes")]
    if cold:
        lines.append("%d configurations served batch sizes the warm-up never ran (%s: %s): their latency includes "
                     "building the graph for a new shape" % (len(cold), cold[0].name, ", ".join(
                         map(str, cold[0].metrics["unwarmed_batch_sizes"]))))
    advice = recommend(records, model_flags)
    if advice is not None:
        lines.append(advice.text())
        if advice.code:  # under the line, indented: the lines that serve what it names
            lines.append("\n".join("    " + line if line else "" for line in advice.code.splitlines()))
    return lines


def section(records):
    """The report's block: every table, a plot of the ratios to fp32 static, the readings."""
    tables = [Table(rs, _report_columns(cols), heading) for heading, rs, cols in sections(records)]
    rated = [r for r in records if r.metrics.get("ratio") is not None and r.metrics.get("verdict") != "baseline"]
    fig = None
    if rated:
        f, ax = figure(width=8.0, height=0.35 * len(rated) + 1.2)
        labelled_bars(ax[0][0], ["%s %s" % (r.name, r.metrics["scenario"]) for r in rated],
                      [r.metrics["ratio"] for r in rated], error_bars(rated, "ratio"),
                      "speed against fp32 static (bar: its 95% interval over the rounds)")
        ax[0][0].axvline(1, color="black", lw=0.8, ls="--")
        fig = svg(f)
    m = records[0].metrics
    best = max(rated, key=lambda r: r.metrics.get("ratio_ci_low") or r.metrics["ratio"]) if rated else None
    advice = recommend(records)  # the deploy line, the one of `readings` the report's reading takes
    reading = "; ".join(
        ([("fastest against static: %s %s, %s%s, %s" % (best.name, best.metrics["scenario"],
                                                        with_interval(best.metrics, "ratio"), verdict_of(best.metrics),
                                                        accuracy_text(best.metrics)))] if best else [])
        + ([advice.text()] if advice else []))
    return Block("Inference: %s under MLPerf's scenarios (LoadGen)" % m.get("model"), tables, fig, reading or None,
                 code=advice.code if advice else None)


def _report_columns(columns):
    out = []
    for c in columns:
        if c == "ratio_ci_low":
            out.append(interval_column("ratio"))
        elif c != "ratio_ci_high":
            out.append(c)
    return out


KIND = Kind(("inference",), "Inference: latency and throughput under MLPerf's scenarios", section)

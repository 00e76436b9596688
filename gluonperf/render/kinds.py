"""What the report draws a kind of records with: Table, Block and Kind, the text of numbers and
intervals, and one renderer per kind of record that commands other than bench write: a
function of one run's records (one file's records of one kind, keyed by their `bench`) that
returns a Block, its tables, a plot where a plot says it better, and the one-line reading the
command printed (derived here from the records). The bench subcommands' renderers are in their
own modules (gluonperf.bench), beside the tables they print. Nothing here imports MXNet.
"""
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

from .figures import error_bars, figure, labelled_bars, per_epoch, short_number, svg
from ..records import Result, fixed, format_bounds, format_estimate, format_value, level_text
from ..training.model_spec import label as model_label


# --- what renderers return ------------------------------------------------------

@dataclass
class Table:
    """Records shown as rows; a column is a field name or (header, function of a record)."""
    records: List[Result]
    columns: list
    caption: str = ""


@dataclass
class Block:
    """One run of one kind (the records of one file): its tables, plot and reading."""
    title: str
    tables: List[Table]
    figure: Optional[str] = None  # inline SVG
    reading: Optional[str] = None
    note: Optional[str] = None
    source: Optional[str] = None  # the file the run came from (set by build_block)
    row_classes: Optional[List[str]] = None  # CSS class per row of the first table
    code: Optional[str] = None  # lines of code the reading names (infer's deploy line: what serves it)


@dataclass(frozen=True)
class Kind:
    benches: Tuple[str, ...]
    title: str
    render: Callable[[List[Result]], Block]


# --- numbers and intervals as text ----------------------------------------------

def seconds(value):
    return format_value("_s", value)


def percent(value):
    return "-" if value is None else "%.0f%%" % (100 * value)


def interval_of(m, key):
    """The stats.Interval a record holds for `key` (key_ci_low, key_ci_high, key_n, key_level),
    or None for a record without one."""
    from ..measure.stats import LEVEL, Interval
    if m.get(key) is None or m.get(key + "_ci_low") is None or m.get(key + "_ci_high") is None:
        return None
    return Interval(m[key], m[key + "_ci_low"], m[key + "_ci_high"], m.get(key + "_n") or 0,
                    m.get(key + "_level") or LEVEL)


def _rounds_of(m, key):
    """How many rounds an old record's min..max of `key` spans: its per-round ratios when kept,
    else its `rounds`."""
    ratios = m.get("round_ratios")
    if ratios is not None:
        return sum(1 for r in ratios if r is not None)
    return m.get(key + "_n") or m.get("rounds")


def with_interval(m, key, what="rounds", pct=False):
    """A ratio as it may be stated: '1.12x (95% CI 1.04-1.21, 12 rounds)' (a share with
    `pct`: '70% (95% CI 65%-75%, 5 rounds)'); an old record's min..max with the level it has
    as an interval of the median, '1.13x (min..max 1.04..1.22: 75% for 3 rounds)'
    (stats.minmax_level); without either, '(no interval recorded)'."""
    value = m.get(key)
    if value is None:
        return "-"
    bound = percent if pct else fixed
    head = percent(value) if pct else format_estimate("ratio", value)  # '1.12x', as the terminal's tables
    iv = interval_of(m, key)
    if iv is not None:
        from ..measure.stats import readable
        rounds = "%d %s" % (iv.n, what if iv.n != 1 else what.rstrip("s"))
        if not pct and not readable(iv):  # 2 rounds at a corrected level can span 1e-16 to 1e15
            return "%s (%s: too few for an interval)" % (head, rounds)
        # a tune candidate's interval holds its family's level (the plan's looks, every candidate) together
        level = m.get(key + "_joint_level") or iv.level
        text = ("%s CI unknown" % level_text(level) if not iv.high < float("inf")
                else "%s CI %s-%s" % (level_text(level), bound(iv.low), bound(iv.high)))
        return "%s (%s, %s)" % (head, text, rounds)
    lo, hi = m.get(key + "_min"), m.get(key + "_max")
    if lo is not None and hi is not None:
        from ..measure.stats import minmax_level
        n = _rounds_of(m, key)
        level = ("%.0f%% for %d %s" % (100 * minmax_level(n), n, what if n != 1 else what.rstrip("s"))
                 if n else "level unknown")
        return "%s (min..max %s..%s: %s)" % (head, bound(lo), bound(hi), level)
    return "%s (no interval recorded)" % head


def interval_column(key, pct=False):
    """A table column: `key`'s interval (or an old record's min..max, labelled with its level);
    its ends read as in the terminal's tables (records.format_bounds: '2.51-4.69')."""
    fmt = percent if pct else fixed

    def cell(r):
        m = r.metrics
        iv = interval_of(m, key)
        if iv is not None:
            bounds = ("%s-%s" % (fmt(iv.low), fmt(iv.high) if iv.high < float("inf") else "inf") if pct
                      else format_bounds(key, iv.low, iv.high, like=iv.estimate))
            return "%s (%s, n=%d)" % (bounds, level_text(iv.level), iv.n)
        if m.get(key + "_min") is not None and m.get(key + "_max") is not None:
            from ..measure.stats import minmax_level
            n = _rounds_of(m, key)
            return "min..max %s..%s (%s)" % (fmt(m[key + "_min"]), fmt(m[key + "_max"]),
                                           "%.0f%%, n=%d" % (100 * minmax_level(n), n) if n else "level unknown")
        return "-"
    return ("%s CI" % key.replace("_", " "), cell)


def report_columns(columns, besides=None):
    """A command's table (`columns`, as it prints them) as the report shows it: an interval's
    X_ci_low and X_ci_high (and X_n) become one cell, `interval_column(X)`; `besides` maps a
    column to the columns the report shows after it besides the command's."""
    out = []
    for c in columns:
        if c.endswith("_ci_low"):
            out.append(interval_column(c[:-len("_ci_low")]))
        elif not (c.endswith("_ci_high") or c.endswith("_n") and c[:-len("_n")] + "_ci_low" in columns):
            out.append(c)
        out += (besides or {}).get(c, [])
    return out


def paired_interval(base, other, key):
    """`key`'s interval fields from two records' per-repeat samples (samples_s, paired repeat by
    repeat in one run): other_i / base_i; {} when they did not keep them."""
    a, b = base.get("samples_s"), other.get("samples_s")
    if not a or not b or len(a) != len(b):
        return {}
    from ..measure import stats
    try:
        return stats.ratio_interval(stats.paired_ratios(b, a)).fields(key)
    except ValueError:
        return {}


def verdict_of(m, prefix="", what="rounds"):
    """' (faster)', ' (same)', ' (inconclusive; about 9 rounds would settle it)' when the record
    has a verdict (other than the baseline's), else ''."""
    word = m.get(prefix + "verdict")
    if not word or word in ("baseline", "defaults"):
        return ""
    need = m.get(prefix + "rounds_needed")
    return " (%s%s)" % (word, "; about %d %s would settle it" % (need, what) if word == "inconclusive" and need
                        else "")


def noisy_note(records):
    return "; some results are noisy (IQR above 10% of the median)" if any(
        r.metrics.get("noisy") for r in records) else ""


# --- one renderer per kind --------------------------------------------------------

def hybridize_suite_section(records):
    groups = {}
    for r in records:
        groups.setdefault("%s %s b%s" % (r.metrics["model"], r.metrics["task"], r.metrics["batch_size"]), []).append(r)
    fig, ax = figure(width=8.5, height=0.35 * len(records) + 1.2)
    labelled_bars(ax[0][0], ["%s: %s" % (g, r.name) for g, rs in groups.items() for r in rs],
                  [r.metrics["ratio"] for rs in groups.values() for r in rs],
                  error_bars([r for rs in groups.values() for r in rs], "ratio"),
                  xlabel="speed ratio to the book's loop (bar: its confidence interval, where recorded)")
    ax[0][0].axvline(1, color="black", lw=0.8, ls="--")
    tops = {g: max([r for r in rs if r.metrics.get("verdict") != "baseline"] or rs,
                   key=lambda r: r.metrics.get("ratio_ci_low") or r.metrics["ratio"]) for g, rs in groups.items()}
    best = ["%s: %s %s%s" % (g, r.name, with_interval(r.metrics, "ratio", "repeats"),
                             verdict_of(r.metrics, what="repeats")) for g, r in tops.items()]
    return Block("gluonperf's hybridize modes against the chapter's benchmark loop",
                 [Table(records, ["name", "model", "task", "batch_size", "median_s", "iqr_s", "noisy",
                                  "samples_per_s", "ratio", interval_column("ratio"), "verdict"])], svg(fig),
                 "best against the book's loop (highest lower end of the interval): " + "; ".join(best)
                 + noisy_note(records))


def train_section(records):
    m = records[-1].metrics
    best = max(records, key=lambda r: r.metrics["test_top1"])
    reading = "epoch %s: test top-1 %.3g (train top-1 %.3g), %.4g training images/s" % (
        m["epoch"], m["test_top1"], m["train_top1"], m["train_images_per_s"])
    if best is not records[-1]:
        reading += "; best test top-1 %.3g at epoch %s" % (best.metrics["test_top1"], best.metrics["epoch"])
    return Block("%s on %s, batch %s on %s, kvstore %s, hybridize %s"
                 % (model_label(m.get("model", "")), m.get("dataset"), m.get("batch_size"), m.get("contexts"), m.get("kvstore"),
                    m.get("hybridize")),
                 [Table(records, ["epoch", "loss", "train_top1", "train_top5", "test_top1", "test_top5", "lr",
                                  "epoch_s", "train_images_per_s"])],
                 per_epoch(records, [("test_top1", "o-"), ("train_top1", "s--")], "train_images_per_s",
                           "training images/s"), reading)


def scaling_section(records):
    devices = [r.metrics["devices"] for r in records]
    fig, ax = figure(1, 2, width=8.5, height=3.0)
    a = ax[0][0]
    a.plot(devices, devices, "--", color="gray", label="ideal")
    a.plot(devices, [r.metrics["speedup"] for r in records], "o-", label="measured")
    for d, r in zip(devices, records):
        a.annotate(percent(r.metrics["efficiency"]), (d, r.metrics["speedup"]), xytext=(4, -10),
                   textcoords="offset points", fontsize=8)
    a.set_xlabel("devices")
    a.set_ylabel("speedup (label: efficiency)")
    a.set_xticks(devices)
    a.legend(fontsize=8)
    b = ax[0][1]
    bottom = [0.0] * len(records)
    for key, label in (("t1_s", "t1 compute"), ("t2_s", "t2 communication"), ("update_s", "update")):
        vals = [r.metrics[key] * 1e3 for r in records]
        b.bar(devices, vals, bottom=bottom, label=label, width=0.6)
        bottom = [x + y for x, y in zip(bottom, vals)]
    b.plot(devices, [r.metrics["step_s"] * 1e3 for r in records], "k_", markersize=30, mew=2, label="measured step")
    b.set_xlabel("devices")
    b.set_ylabel("ms per step")
    b.set_xticks(devices)
    b.legend(fontsize=8)
    for axis in (a, b):
        axis.grid(True, alpha=0.3)
    last = records[-1].metrics
    reading = ("on %s devices: %s the images/s of one (efficiency %s); a step is %s: t1 compute %s, "
               "t2 communication %s") % (
        last["devices"], with_interval(last, "speedup", "repeats"), percent(last["efficiency"]),
        seconds(last["step_s"]),
        seconds(last["t1_s"]), seconds(last["t2_s"]))
    serial, hidden = last.get("serial_model_s"), last.get("overlap_model_s")
    if serial and hidden and serial > 1.05 * hidden:  # the two models tell the cases apart
        reading += "; closer to %s" % ("t1 + t2 (communication not hidden)" if abs(last["step_s"] - serial) <
                                       abs(last["step_s"] - hidden) else "max(t1, t2) (communication hidden)")
    return Block("%s, %s images per device, kvstore %s" % (model_label(last.get("model", "")), last.get("per_device_batch"),
                                                           last.get("kvstore")),
                 [Table(records, ["devices", "batch_size", "step_s", "iqr_s", "t1_s", "t2_s", "update_s",
                                  "overlap_model_s", "serial_model_s", "images_per_s", "speedup",
                                  interval_column("speedup"),
                                  "efficiency",
                                  "noisy"])], svg(fig), reading + noisy_note(records))


def profile_section(records):
    """gluonperf.profile: the ceiling, the model's work, the fenced breakdown, the top
    operators against the ceiling, and the verdict."""
    by = lambda bench: [r for r in records if r.bench == bench]  # noqa: E731
    ceiling, work, parts, ops, verdict, blocks = (by(b) for b in ("ceiling", "work", "breakdown", "operators", "verdict",
                                                                  "blocks"))
    top = next(r for r in ceiling if r.metrics.get("ceiling"))
    step_parts = [r for r in parts if r.name not in ("fenced step", "unfenced step", "hidden by overlap")]
    timed_ops = sorted((r for r in ops if r.metrics.get("phase") is not None and r.name != "profiled step"),
                       key=lambda r: -r.metrics.get("time_s", 0))[:12]
    fig, ax = figure(1, 2, width=10.0, height=3.6, gridspec_kw={"width_ratios": [1, 2.2]})
    a, b = ax[0]
    bottom = 0.0
    for r in step_parts:
        ms = r.metrics["time_s"] * 1e3
        a.bar([0], [ms], bottom=bottom, label=r.name, width=0.5)
        bottom += ms
    a.set_xticks([0])
    a.set_xticklabels(["fenced step"])
    a.set_ylabel("ms per step")
    a.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    rated = [r for r in timed_ops if r.metrics.get("gflop_per_s")]
    if rated:
        labelled_bars(b, [r.name for r in rated], [r.metrics["gflop_per_s"] for r in rated],
                      xlabel="GFLOP/s achieved (line: the machine's ceiling)")
        b.axvline(top.metrics["gflop_per_s"], color="tab:red", linestyle="--")
    else:
        b.axis("off")
    achieved = next((r for r in verdict if r.name == "achieved"), None)
    findings = [r.metrics["finding"] for r in verdict if r.name.startswith("loss")]
    reading = (achieved.metrics["finding"] if achieved else "no verdict") + (
        "; largest losses: " + "; ".join(findings) if findings else "")
    m = parts[0].metrics if parts else {}
    tables = [Table(ceiling, ["name", "shape", "gflop_per_s", "median_gflop_per_s", "ceiling", "omp_threads"],
                    "the ceiling: peak %s FLOP/s measured on this machine"
                    % (ceiling[0].metrics.get("dtype", "float32") if ceiling else "float32")),
              Table(work, ["name", "layers", "forward_gflop", "backward_gflop", "training_gflop"],
                    "the model's work per training image"),
              Table(parts, ["name", "time_s", ("share", lambda r: percent(r.metrics.get("share"))), "noisy"],
                    "the step, each part fenced by a sync (timed run)"),
              Table(timed_ops, ["name", "phase", "calls_per_step", "time_s",
                                ("share", lambda r: percent(r.metrics.get("share"))), "gflop_per_s",
                                ("of ceiling", lambda r: percent(r.metrics.get("of_ceiling")))],
                    "top operators (profiled run, bulk execution off)"),
              Table(verdict, ["name", "finding"], "verdict")]
    if blocks:
        tables.insert(3, Table(blocks, ["tree", "parameters", "training_gflop", "forward_s", "backward_s",
                                        ("step share", lambda r: percent(r.metrics.get("step_share"))),
                                        ("of ceiling", lambda r: percent(r.metrics.get("of_ceiling"))), "note"],
                               "the model's Blocks, each timed alone on the inputs it gets in the model: %s"
                               % blocks[-1].metrics.get("finding", "")))
    return Block("%s, batch %s on %s, hybridize %s" % (model_label(m.get("model", "")), m.get("batch_size"), m.get("contexts"),
                                                        m.get("hybridize")),
                 tables, svg(fig), reading)


def predict_section(records):
    """gluonperf.predict: predicted speedup against the ideal per devices-per-machine, the
    largest efficient configuration per machine count, and checks against measured runs."""
    rows = [r for r in records if r.bench == "predict"]
    best = [r for r in records if r.bench == "predict-best"]
    checks = [r for r in records if r.bench == "predict-check"]
    fig, ax = figure(width=7.0, height=3.4)
    a = ax[0][0]
    parts, tables = [], []
    if rows:
        for d in sorted({r.metrics["devices"] for r in rows}):
            line = sorted((r for r in rows if r.metrics["devices"] == d), key=lambda r: r.metrics["total_devices"])
            a.plot([r.metrics["total_devices"] for r in line], [r.metrics["speedup"] for r in line], "o-",
                   label="%d device%s per machine" % (d, "s" if d > 1 else ""))
        top = max(r.metrics["total_devices"] for r in rows)
        a.plot([1, top], [1, top], "k--", linewidth=1, label="ideal")
        a.set_xscale("log", base=2)
        a.set_yscale("log", base=2)
        a.set_xlabel("devices in all")
        a.set_ylabel("predicted speedup")
        a.legend(fontsize=7)
        a.grid(True, alpha=0.3)
        largest = max(rows, key=lambda r: (r.metrics["total_devices"], r.metrics["devices"]))
        bound = [r.name for r in rows if r.metrics.get("comm_bound")]
        parts.append("%s devices (%s): efficiency %s, %s images/s predicted; %s" % (
            largest.metrics["total_devices"], largest.name, short_number(largest.metrics["efficiency"]),
            short_number(largest.metrics["images_per_s"]),
            "communication-bound (t2 > t1): " + ", ".join(bound) if bound else "none communication-bound"))
        tables.append(Table(rows, ["name", "global_batch", "t1_s", "t2_s", "step_s", "images_per_s", "speedup",
                                   "efficiency", "comm_bound", "lr", "warmup_epochs"],
                            "predicted, per devices x machines"))
    if best:
        fit = [r for r in best if r.metrics.get("devices")]
        if fit:
            far = max(fit, key=lambda r: r.metrics["machines"])
            parts.append("at efficiency >= %s: %s machines x %s devices" % (
                short_number(far.metrics["min_efficiency"]), far.metrics["machines"], far.metrics["devices"]))
        tables.append(Table(best, ["name", "devices", "total_devices", "efficiency", "images_per_s"],
                            "the most devices per machine that keep the efficiency"))
    if checks:
        errors = [r.metrics["error"] for r in checks]
        judged = [r for r in checks if interval_of(r.metrics, "measured_over_predicted")]
        if judged:  # the measured step with its interval: within, outside, or inconclusive
            counts = [sum(1 for r in judged if r.metrics.get("within_25pct") is v) for v in (True, False, None)]
            parts.append("checked against runs here, measured/predicted with its interval: within 25%% in %d of "
                         "%d, outside in %d, inconclusive in %d" % (counts[0], len(judged), counts[1], counts[2]))
            parts += ["%s: %s" % (r.name, r.metrics["judgement"]) for r in judged
                      if r.metrics.get("within_25pct") is not True and r.metrics.get("judgement")]
        else:  # older files: one measured step each, no spread
            parts.append("checked against runs here: within 25%% in %d of %d (errors %s..%s; one measured run each, "
                         "no interval)" % (sum(1 for r in checks if r.metrics.get("within_25pct")), len(checks),
                                           percent(min(errors)), percent(max(errors))))
        tables.append(Table(checks, ["name", "predicted_step_s", "measured_step_s",
                                     ("measured step CI", lambda r: "%s-%s (n=%s)" % (
                                         seconds(r.metrics["measured_step_low_s"]),
                                         seconds(r.metrics["measured_step_high_s"]), r.metrics.get("measured_n"))
                                      if r.metrics.get("measured_step_low_s") is not None else "-"),
                                     "measured_over_predicted", interval_column("measured_over_predicted"),
                                     "predicted_images_per_s", "measured_images_per_s",
                                     ("error", lambda r: percent(r.metrics["error"])), "within_25pct"],
                            "predictions against measured runs (within 25%: the whole interval of measured/predicted "
                            "inside 0.75..1.25; '-': inconclusive)"))
        if not rows:
            labelled_bars(a, [r.name for r in checks], [100 * r.metrics["error"] for r in checks],
                          xlabel="prediction error, % of the measured step", annotate=lambda v: "%.0f%%" % v)
    m = (rows or checks or best)[0].metrics
    links = ", ".join(dict.fromkeys(str(r.metrics[k]) for k in ("machine_link", "network_link")
                                    for r in rows if r.metrics.get(k)))
    return Block("%s%s" % (model_label(m.get("model", "predict")), " over " + links if links else ""), tables, svg(fig),
                 "; ".join(parts))


def _baseline(group):
    """The candidate a lever's ratios are relative to (its own ratio is exactly 1 every round)."""
    return next((r.name for r in group if r.metrics.get("verdict") == "baseline"),
                next((r.name for r in group if r.metrics.get("ratio") == 1 and r.metrics.get("ratio_min") == 1
                      and r.metrics.get("ratio_max") == 1), "the lever's baseline"))


# benchmarks/train_throughput.py's ceiling: a yardstick measured like a run, never the fastest run
CEILING_RUNNER = "benchmarks/ceiling_probe.py"


def tune_section(records):
    best = [r for r in records if r.name == "best"]
    cands = [r for r in records if r.name != "best"]
    groups = {}
    for r in cands:
        lever, batch = r.metrics.get("lever"), r.metrics.get("batch_size")
        label = lever if str(lever).endswith(" b%s" % batch) else "%s b%s" % (lever, batch)
        groups.setdefault(label, []).append(r)
    group_of = {id(r): g for g, rs in groups.items() for r in rs}
    measured = [r for r in cands if r.metrics.get("ratio") is not None]
    intervals = any(interval_of(r.metrics, "ratio") for r in measured)
    fig = None
    if measured:
        f, ax = figure(width=8.5, height=0.3 * len(measured) + 1.2)
        labelled_bars(ax[0][0], [("%s: %s" % (group_of[id(r)], r.name)) if len(groups) > 1 else r.name
                                 for r in measured], [r.metrics["ratio"] for r in measured], error_bars(measured, "ratio"),
                      "ratio to the lever's baseline (%s)" % ("geometric mean, bar: its confidence interval"
                                                              if intervals else "median, bar: min..max over rounds"))
        ax[0][0].axvline(1, color="black", lw=0.8, ls="--")
        fig = svg(f)
    # benchmarks/train_throughput.py with PyTorch also sets every run against PyTorch (eager and
    # torch.compile), round by round, and with its ceiling probe against the ceiling
    yardsticks = [(key, label) for key, label in (("vs_pytorch", "PyTorch"), ("vs_torch_compile", "torch.compile"))
                  if any(r.metrics.get(key) is not None for r in cands)]
    if best:
        reading = "; ".join(("best at batch %s: %s" % (r.metrics.get("batch_size"), r.metrics.get("verdict_text"))
                             if r.metrics.get("verdict") == "defaults" else
                             "best at batch %s: %s the defaults%s with %s" % (
                                 r.metrics.get("batch_size"), with_interval(r.metrics, "speedup"),
                                 verdict_of(r.metrics), r.metrics.get("command"))) for r in best)
    else:
        parts = []
        for g, rs in groups.items():
            runs = [r for r in rs if r.metrics.get("runner") != CEILING_RUNNER] or rs
            top = min(runs, key=lambda r: r.metrics.get("rank") or 1e9)
            against = "".join(", %s %s%s" % (with_interval(top.metrics, key), label,
                                             verdict_of(top.metrics, key + "_"))
                              for key, label in yardsticks if top.metrics.get(key) is not None)
            if top.metrics.get("of_ceiling") is not None:
                against += ", %s of the ceiling" % with_interval(top.metrics, "of_ceiling", pct=True)
            parts.append("%s: %s runs %s as fast as %s%s%s" % (
                g, top.name, with_interval(top.metrics, "ratio"), _baseline(rs), verdict_of(top.metrics), against))
        reading = "; ".join(parts)
    vs = [c for key, _ in yardsticks for c in (key, interval_column(key), key + "_verdict")]
    vs += ([("of ceiling", lambda r: percent(r.metrics.get("of_ceiling"))), interval_column("of_ceiling", pct=True)]
           if any(r.metrics.get("of_ceiling") is not None for r in cands) else [])
    partial = [r for r in cands if r.metrics.get("partial")]
    if partial:  # written by a run stopped part-way (cli.keep_on_stop)
        reading = ("stopped before the end: %d row(s) marked partial hold only the rounds their sweep had "
                   "finished. " % len(partial)) + reading
    tables = [Table(cands, ["batch_size", "lever", "rank", "name", "images_per_s", "ratio", interval_column("ratio"),
                            "verdict"]
                    + vs + ["rounds", "error"] + (["partial"] if partial else []),
                    "ratios to each lever's baseline, measured interleaved (%s)"
                    % ("geometric mean of the per-round ratios, confidence interval and n" if intervals else
                       "median, min..max over rounds, labelled with the level it has as an interval of the median"))]
    if best:
        tables.append(Table(best, ["batch_size", "name", "speedup", interval_column("speedup"), "verdict", "command",
                                   "warnings"], "winning settings"))
    return Block(", ".join(groups) or "tune", tables, fig, reading)


def growth_section(records):
    """Memory over a run (gluonperf.measure.growth: train, profile, profile --): the verdict, the
    growth per 1,000 steps with its interval, the steps counted; the reading is each finding."""
    m = records[0].metrics
    return Block("memory over the run%s" % (" of %s" % m["command"] if m.get("command") else ""),
                 [Table(records, ["name", "memory", "growth_verdict", "growth_mb_per_1000_steps",
                                  interval_column("growth_mb_per_1000_steps"), "steps_counted", "warmup_steps",
                                  "where"])], None, "; ".join(r.metrics.get("finding", "") for r in records))


# The kinds of records the commands other than bench write (and the benchmark suites); each
# bench subcommand's module holds its own (gluonperf.bench, `section`), and the report puts
# them all in the order a reader needs them (gluonperf.report.PAGE). A new kind is one more
# line here and a renderer.
KINDS = [
    Kind(("hybridize_suite",), "Hybridize against the book's loop", hybridize_suite_section),
    Kind(("train",), "Training: accuracy and images/s per epoch", train_section),
    Kind(("scaling",), "Scaling: speedup and efficiency against the ideal", scaling_section),
    Kind(("ceiling", "work", "breakdown", "operators", "verdict", "blocks"),
         "Profile: where a training step's time goes, against the machine's ceiling", profile_section),
    Kind(("tune",), "Throughput suites and tune: ratios with their intervals", tune_section),
    Kind(("predict", "predict-best", "predict-check"), "Predicted scaling: devices and machines you do not have",
         predict_section),
    Kind(("growth",), "Memory over time: is the job leaking?", growth_section),
]

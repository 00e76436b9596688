"""From LoadGen runs to records: one record per configuration and scenario, the ratio of each
rung to fp32 static with its interval and verdict. Pure: the tests give it made-up runs.

Each round's ratio sets a rung's figure against static's from the same round, and the interval
is Student's t on those per-round log ratios (`measure.stats.ratio_interval`): the unit of
evidence is the run, not the query. LoadGen's early-stopping estimate is reported beside it.
int8 is also set against fused from the same rounds (`BESIDE`; its fields prefixed
`vs_fused_`). docs/commands/infer.md ("Where each interval comes from") says why.
"""
import statistics

from ..measure import stats
from ..records import Result
from .coldstart import PARTS as COLD_PARTS
from .loadgen import FIGURE

REFERENCE = "static"
# a rung also set against the rung it builds on, from the same rounds: int8 against fused says
# what the 8 bits give beyond oneDNN's fusion (int8's graph is fused as well)
BESIDE = {"int8": "fused"}
LADDER = ("fp32", "static", "fused", "bf16", "int8",     # ladder.RUNGS, here without importing MXNet (render)
          "ort-fp32", "ort-int8", "ov-fp32", "ov-bf16", "ov-int8")
COLD_START = "cold-start"   # a cold start's records' scenario (coldstart.measure, not LoadGen)
CONFIRM = "confirm"         # the server choice's confirmation: deploy.CONFIRM
LOWER_IS_BETTER = ("p90_s", "p99_s")
# figures whose median over rounds is reported (the others: the first run's, e.g. its log folder)
MEDIANS = ("p50_s", "p90_s", "p95_s", "p97_s", "p99_s", "p999_s", "mean_latency_s", "samples_per_s")
BOUNDS = ("early_stopping_p90_s", "early_stopping_p99_s")


def config_name(precision, layout, batch_size, window_s=None):
    """'static 1x2 b64'; with server batching 'int8 2x1 b8 window 5ms' (b: the largest batch)."""
    name = "%s %s b%s" % (precision, layout, batch_size)
    return name + (" window %gms" % (window_s * 1e3) if window_s else "")


def merge_rounds(runs):
    """One configuration's per-round runs (dicts of loadgen.figures, each with 'log') into one
    record's fields: the median of each figure over the rounds (a percentile only when every
    round had the queries for it: `percentiles_withheld` otherwise), the largest early-stopping
    bound (each holds for its own run), LoadGen's verdict (VALID only if every round was)."""
    fields = {"rounds": len(runs), "loadgen_valid": all(r.get("loadgen_valid") for r in runs)}
    withheld = {k: n for r in runs for k, n in (r.get("percentiles_withheld") or {}).items()}
    if withheld:  # a percentile some round had too few queries for is shown from none
        fields["percentiles_withheld"] = withheld
        fields["fewest_queries_per_run"] = min(r.get("queries") or 0 for r in runs)
    for key in MEDIANS:
        values = [r[key] for r in runs if r.get(key) is not None]
        if values and key not in withheld:
            fields[key] = statistics.median(values)
    for key in BOUNDS:
        values = [r[key] for r in runs if r.get(key) is not None]
        if values:
            fields[key] = max(values)
            fields["early_stopping_level"] = runs[0].get("early_stopping_level")
    reasons = [r["loadgen_invalid_reason"] for r in runs if r.get("loadgen_invalid_reason")]
    if reasons:
        fields["loadgen_invalid_reason"] = reasons[0]
        fields["loadgen_invalid_rounds"] = len(reasons)
    fields["queries"] = sum(r.get("queries") or 0 for r in runs)
    fields.update(shapes(runs))
    fields["loadgen_logs"] = [r["log"] for r in runs if r.get("log")]
    return fields


def shapes(runs):
    """The batch sizes the runs' instances served, those the warm-up ran, and any served that
    it had not (there should be none: the batches are padded to warmed sizes)."""
    out = {}
    for key in ("batch_sizes_served", "warmed_batch_sizes", "unwarmed_batch_sizes"):
        sizes = sorted({s for r in runs for s in r.get(key) or ()})
        if sizes or key != "unwarmed_batch_sizes":
            out[key] = sizes
    return out


def round_ratios(scenario, reference_runs, runs):
    """Per-round speed ratios of a rung against the reference (> 1: the rung is faster), from
    the rounds both ran (matched by their 'round')."""
    key = FIGURE[scenario]
    ref = {r["round"]: r.get(key) for r in reference_runs}
    out = []
    for r in runs:
        a, b = ref.get(r["round"]), r.get(key)
        if a and b:
            out.append(a / b if key in LOWER_IS_BETTER else b / a)
    return out


def ratio_fields(scenario, reference_runs, runs, threshold=stats.THRESHOLD, level=stats.LEVEL, prefix=""):
    """The ratio to the reference with its interval and verdict ({} without a common round);
    `prefix` before every field's name (`beside_prefix`: against another rung than static)."""
    ratios = round_ratios(scenario, reference_runs, runs)
    if not ratios:
        return {}
    interval = stats.ratio_interval(ratios, level)
    fields = dict(interval.fields("ratio"), round_ratios=ratios,
                  **stats.verdict(interval, threshold, what="rounds").fields())
    return {prefix + k: v for k, v in fields.items()}


def beside_prefix(rung):
    """The prefix of the ratio fields against `rung` (not static): 'vs_fused_' (vs_fused_ratio,
    vs_fused_ratio_ci_low, vs_fused_verdict, ...)."""
    return "vs_%s_" % rung


def config_records(runs, base, threshold=stats.THRESHOLD):
    """Records of the scenarios run in rounds. `runs`: {(layout, precision, scenario, batch):
    [run fields with 'round']}; `base`: fields every record gets (model, ctx, ...), and per
    precision the rung's own under base['rungs'][precision] (its build time, accuracy)."""
    out = []
    for (layout, precision, scenario, batch), rs in runs.items():
        if not rs:
            continue
        fields = dict(_common(base, precision, layout, scenario, batch), **merge_rounds(rs))
        fields["round_values"] = [r.get(FIGURE[scenario]) for r in rs]
        reference = runs.get((layout, REFERENCE, scenario, batch))
        if precision == REFERENCE:
            fields.update(ratio=1.0, verdict="baseline")
        elif reference:
            fields.update(ratio_fields(scenario, reference, rs, threshold))
        beside = runs.get((layout, BESIDE.get(precision), scenario, batch))
        if beside:
            fields.update(ratio_fields(scenario, beside, rs, threshold, prefix=beside_prefix(BESIDE[precision])))
        out.append(Result("inference", config_name(precision, layout, batch), fields))
    return out


def _common(base, precision, layout, scenario, batch):
    fields = {k: v for k, v in base.items() if k != "rungs"}
    fields.update(base.get("rungs", {}).get(precision, {}))
    fields.update(precision=precision, scenario=scenario, layout=str(layout), batch_size=batch,
                  primary_metric=FIGURE.get(scenario))
    if hasattr(layout, "instances"):
        fields.update(instances=layout.instances, threads=layout.threads)
    return fields


def server_record(base, precision, layout, window_s, max_batch, bound_s, peak):
    """The server scenario's record of one configuration from its rate search (search.Peak)."""
    fields = _common(base, precision, layout, "server", max_batch if window_s else 1)
    fields.update(latency_bound_s=bound_s, batch_window_s=window_s or 0.0, max_batch=max_batch if window_s else 1,
                  trials=len(peak.trials), trial_rates=[t.rate for t in peak.trials],
                  trial_valid=[t.valid for t in peak.trials], search_resolved=peak.resolved,
                  loadgen_valid=peak.best is not None)
    if peak.best is not None:
        fields["rate_at_bound_per_s"] = peak.best.rate
        fields.update({k: v for k, v in peak.best.fields.items() if k not in ("round", "loadgen_valid")})
    else:
        closest = peak.closest()
        fields.update(closest_rate_per_s=closest.rate, **{k: v for k, v in closest.fields.items()
                                                           if k not in ("round", "loadgen_valid")})
    if peak.above is not None:
        fields["rate_invalid_per_s"] = peak.above.rate
    fields["loadgen_logs"] = [t.fields.get("log") for t in peak.trials if t.fields.get("log")]
    fields.update(shapes([t.fields for t in peak.trials]))
    fields.pop("log", None)
    return Result("inference", config_name(precision, layout, fields["batch_size"], window_s), fields)


def confirm_record(server, rate, runs, threshold):
    """The confirmation of one server configuration (its search's record `server`): its runs at
    the one `rate` every contender ran at, a round each, interleaved (loadgen.figures with
    'round'): LoadGen's verdict and p99 of each round, and their median p99."""
    keep = [k for k in server.metrics if not k.startswith(("rate_", "trial", "closest_", "search_", "early_"))
            and k not in MEDIANS + ("loadgen_logs", "queries", "samples_per_s", "scheduled_per_s", "trials")
            and not k.startswith("loadgen_")]
    fields = {k: server.metrics[k] for k in keep}
    p99s = [r.get("p99_s") for r in runs]
    fields.update(scenario=CONFIRM, primary_metric="p99_s", confirm_rate_per_s=rate, rounds=len(runs),
                  round_valid=[bool(r.get("loadgen_valid")) for r in runs], round_p99_s=p99s, threshold=threshold,
                  held_rounds=sum(bool(r.get("loadgen_valid")) for r in runs),
                  loadgen_logs=[r["log"] for r in runs if r.get("log")])
    if all(v is not None for v in p99s) and p99s:
        fields["p99_s"] = statistics.median(p99s)
    fields.update(shapes(runs))
    return Result("inference", server.name, fields)


def rung_record(base, rung_name, error, layout=None, scenario=None):
    """A rung that cannot be built or served here (under `layout`, or in `scenario`: its cold
    start): one record saying why."""
    fields = _common(base, rung_name, layout or "-", scenario or "-", None)
    fields.pop("primary_metric")
    if scenario is None:
        fields.pop("scenario")
    fields["error"] = error
    return Result("inference", " ".join(str(w) for w in (rung_name, layout, scenario) if w), fields)


def cold_start_record(base, rung_name, runs):
    """A rung's cold starts (`coldstart.measure`'s parts, one fresh process a round, each with
    'round'): the median of each part over them, and each process's total in `round_values`."""
    fields = _common(base, rung_name, "-", COLD_START, runs[0]["batch_sizes"][0])
    fields.update(primary_metric="total_s", rounds=len(runs), batch_sizes=runs[0]["batch_sizes"],
                  steady_calls=runs[0].get("steady_calls"), round_values=[r["total_s"] for r in runs],
                  round_parts=[{k: r[k] for k in COLD_PARTS} for r in runs])
    for key in COLD_PARTS:
        fields[key] = statistics.median(r[key] for r in runs)
    return Result("inference", "%s %s" % (rung_name, COLD_START), fields)

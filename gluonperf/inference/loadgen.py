"""MLPerf Inference's four scenarios, through MLPerf's own load generator (`mlperf_loadgen`).

LoadGen issues the queries and keeps the clock (a query that waited behind a slow one counts
the wait). `run` supplies the system under test, a function that takes LoadGen's samples and
completes them later, from any thread, with `complete`; `read_log` reads what LoadGen wrote in
its log folder (mlperf_log_detail.txt, one `:::MLLOG {json}` line per value): percentiles,
early-stopping estimates and the VALID / INVALID verdict. Each run lasts at least the
`Minimums` in force: by default about a second and FEWEST_QUERIES, with `mlperf=True`
MLPerf's own. docs/commands/infer.md ("How it works") says what each scenario sends and
reports, and why these minimums.
"""
import json
import os
import re
from dataclasses import dataclass
from typing import Optional

SCENARIOS = ("single-stream", "multi-stream", "server", "offline")
_NAMES = {"single-stream": "SingleStream", "multi-stream": "MultiStream", "server": "Server", "offline": "Offline"}
# LoadGen's early stopping (loadgen/results.cc, PerformanceSummary::EarlyStopping): a binomial bound
# on the percentile at this confidence, with no tolerance
EARLY_STOPPING_CONFIDENCE = 0.99
# The fewest queries with which early stopping can pass, with none over the bound (LoadGen's own
# messages: 64 for a p90, 662 for multi-stream's p99, 459 for the server's p99); offline is one query
FEWEST_QUERIES = {"single-stream": 64, "multi-stream": 662, "server": 459, "offline": 1}
PERCENTILES = (("50.00", "p50_s"), ("90.00", "p90_s"), ("95.00", "p95_s"), ("97.00", "p97_s"),
               ("99.00", "p99_s"), ("99.90", "p999_s"))


def fewest_queries(percentile, confidence=EARLY_STOPPING_CONFIDENCE):
    """The fewest queries from which LoadGen's early stopping can estimate `percentile` (0.99) at
    `confidence`: the least n with P(at most 1 of n queries above the percentile) < 1 - confidence
    (binomial, as loadgen/early_stopping.cc computes it for single- and multi-stream): 64 for p90,
    662 for p99. Fewer, and the percentile shown would be little more than the slowest query."""
    if not (0 < percentile < 1 and 0 < confidence < 1):
        raise ValueError("a percentile and a confidence between 0 and 1, got %r and %r" % (percentile, confidence))
    n, over = 2, 1 - percentile
    while percentile ** n + n * over * percentile ** (n - 1) >= 1 - confidence:
        n += 1
    return n


# percentile field -> the queries a run needs before it is shown (single- and multi-stream)
QUERIES_FOR = {key: fewest_queries(float(p) / 100) for p, key in PERCENTILES}
# The figure of each scenario, as records name it (what compare and the ratios use)
FIGURE = {"single-stream": "p90_s", "multi-stream": "p99_s", "server": "rate_at_bound_per_s",
          "offline": "samples_per_s"}


@dataclass(frozen=True)
class Minimums:
    """What each LoadGen run must reach before it may end: `duration_s` and FEWEST_QUERIES
    (what a person waits for), or MLPerf's own (`mlperf`)."""
    duration_s: float = 1.0
    mlperf: bool = False

    def describe(self):
        return ("to MLPerf's own minimums (LoadGen's mlperf.conf: 600 s)" if self.mlperf else
                "%g s and the fewest queries LoadGen's early stopping can pass with" % self.duration_s)


@dataclass(frozen=True)
class Load:
    """One LoadGen test: its scenario and what LoadGen schedules by (hints of how fast the
    system is, which LoadGen uses to generate enough queries, never as results)."""
    scenario: str
    samples_per_query: int = 1              # multi-stream's N
    expected_latency_s: float = 1e-3        # single- and multi-stream: a query's latency
    expected_rate: float = 1.0              # offline: samples/s
    offline_samples: int = 1                # offline: at least this many samples in its query
    server_rate: Optional[float] = None     # server: the target rate, queries/s
    latency_bound_s: Optional[float] = None  # server: the p99 bound

    def __post_init__(self):
        if self.scenario not in SCENARIOS:
            raise ValueError("unknown scenario %r; the scenarios are %s" % (self.scenario, ", ".join(SCENARIOS)))
        if self.scenario == "server" and not (self.server_rate and self.server_rate > 0 and self.latency_bound_s
                                              and self.latency_bound_s > 0):
            raise ValueError("the server scenario needs a rate and a latency bound above 0")


def test_settings(load, minimums):
    """LoadGen's TestSettings for `load` under `minimums` (performance mode)."""
    import mlperf_loadgen as lg
    s = lg.TestSettings()
    if minimums.mlperf:
        s.FromConfig("", "gluonperf", _NAMES[load.scenario], 0)  # 0: only LoadGen's own mlperf.conf
    else:
        s.min_duration_ms = max(1, int(round(minimums.duration_s * 1e3)))
        s.min_query_count = FEWEST_QUERIES[load.scenario] if load.scenario != "offline" else \
            max(1, load.offline_samples)
    s.scenario = getattr(lg.TestScenario, _NAMES[load.scenario])
    s.mode = lg.TestMode.PerformanceOnly
    ns = max(1, int(load.expected_latency_s * 1e9))
    s.single_stream_expected_latency_ns = ns
    s.multi_stream_expected_latency_ns = max(1, ns // 2)  # enough queries generated, whatever the noise
    s.multi_stream_samples_per_query = load.samples_per_query
    s.offline_expected_qps = max(1.0, load.expected_rate)
    if load.scenario == "server":
        s.server_target_qps = load.server_rate
        s.server_target_latency_ns = max(1, int(load.latency_bound_s * 1e9))
        s.server_target_latency_percentile = 0.99
    return s


def complete(ids):
    """Tell LoadGen that the samples `ids` (QuerySample.id) are answered; any thread."""
    import mlperf_loadgen as lg
    lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in ids])


def run(issue, load, minimums, library_size, log_dir):
    """One LoadGen test: `issue([(id, index), ...])` gets each query's samples (on LoadGen's
    thread; it must return at once and later `complete` them). Returns `read_log(log_dir)`."""
    import mlperf_loadgen as lg
    os.makedirs(log_dir, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = log_dir
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    sut = lg.ConstructSUT(lambda samples: issue([(q.id, q.index) for q in samples]), lambda: None)
    qsl = lg.ConstructQSL(library_size, library_size, lambda indices: None, lambda indices: None)
    try:
        lg.StartTestWithLogSettings(sut, qsl, test_settings(load, minimums), log)
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroySUT(sut)
    return read_log(log_dir)


def read_log(folder):
    """LoadGen's values from `folder`/mlperf_log_detail.txt: {key: value} (the last of a key
    that repeats) and, under 'errors' and 'warnings', the messages LoadGen flagged."""
    values, errors, warnings = {}, [], []
    with open(os.path.join(folder, "mlperf_log_detail.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.startswith(":::MLLOG "):
                continue
            try:
                entry = json.loads(line[len(":::MLLOG "):])
            except ValueError:
                continue
            values[entry.get("key")] = entry.get("value")
            meta = entry.get("metadata") or {}
            if meta.get("is_error"):
                errors.append("%s" % entry.get("value"))
            elif meta.get("is_warning"):
                warnings.append("%s" % entry.get("value"))
    values["errors"], values["warnings"] = errors, warnings
    return values


def _seconds(ns):
    return None if ns is None else float(ns) * 1e-9


def early_stopping(text):
    """{percentile: seconds} of LoadGen's early-stopping estimates in its result text
    ('Early stopping 90.0th percentile estimate: 2459866')."""
    found = re.findall(r"Early stopping (\d+(?:\.\d+)?)th percentile estimate: (\d+)", text or "")
    return {float(p): _seconds(ns) for p, ns in found}


def figures(values, scenario):
    """Record fields of one LoadGen run: its verdict and why, its percentiles (not offline's:
    one query's; in single- and multi-stream only those the run has the queries for, the others
    under `percentiles_withheld` with the queries they need), its early-stopping bounds, its rate.
    The server's p99 is LoadGen's verdict's: a VALID run had the queries for it."""
    valid = values.get("result_validity") == "VALID"
    reasons = [values.get("result_invalid_reason", "").strip()] + [
        e for e in values.get("errors", []) if "Ending early" in e or "error" in e.lower()]
    out = {"loadgen_valid": valid, "queries": values.get("result_query_count"),
           "loadgen_min_duration_met": values.get("result_min_duration_met"),
           "loadgen_min_queries_met": values.get("result_min_queries_met"),
           "loadgen_early_stopping_met": values.get("early_stopping_met")}
    if not valid:
        out["loadgen_invalid_reason"] = "; ".join(r for r in dict.fromkeys(reasons) if r) or _unmet(values)
    if scenario != "offline":
        per_query = "_per_query" if scenario == "multi-stream" else ""
        for p, key in PERCENTILES:
            out[key] = _seconds(values.get("result_%s_percentile%s_latency_ns" % (p, per_query)))
            if scenario != "server" and (out["queries"] or 0) < QUERIES_FOR[key] and out[key] is not None:
                out.setdefault("percentiles_withheld", {})[key] = QUERIES_FOR[key]  # too few queries
                out[key] = None
        out["mean_latency_s"] = _seconds(values.get("result_mean%s_latency_ns" % ("_query" if per_query else "")))
        for p, s in early_stopping(values.get("early_stopping_result")).items():
            out["early_stopping_p%g_s" % p] = s
        out["early_stopping_level"] = EARLY_STOPPING_CONFIDENCE
    if scenario == "single-stream":
        out["samples_per_s"] = values.get("result_qps_with_loadgen_overhead")
    elif scenario == "server":
        out["samples_per_s"] = values.get("result_completed_samples_per_sec")
        out["scheduled_per_s"] = values.get("result_scheduled_samples_per_sec")
        out["loadgen_perf_constraints_met"] = values.get("result_perf_constraints_met")
    elif scenario == "offline":
        out["samples_per_s"] = values.get("result_samples_per_second")
    return {k: v for k, v in out.items() if v is not None}


def _unmet(values):
    unmet = [what for key, what in (("result_min_duration_met", "the minimum duration"),
                                    ("result_min_queries_met", "the minimum queries"),
                                    ("early_stopping_met", "early stopping"),
                                    ("result_perf_constraints_met", "the latency bound"))
             if values.get(key) is False]
    return "not met: " + ", ".join(unmet) if unmet else "LoadGen said INVALID"


"""Matching and judging two sets of result records: which records measured the same thing,
which metric to compare them on (direction-aware: a rate is better higher, a time lower), and
the ratio of NEW to OLD with its interval and verdict, from the statistics of
gluonperf.measure.stats. Also runs two commands in alternation (compare --ab). Used by
`python -m gluonperf.compare` and `python -m gluonperf.report --compare`; nothing here
imports MXNet.
"""
import json
import os
import statistics
from dataclasses import dataclass
from typing import Optional

from .. import UserError
from . import stats
from ..records import Result, SchemaError, format_value, read_jsonl


# Fields that identify what a record measured (not how fast it went).
ID_FIELDS = ("model", "task", "batch_size", "ctx", "contexts", "hybridize", "kvstore",
             "dataset", "workers", "devices", "mode", "variant", "size", "candidate", "scenario")

# Metrics tried in this order when --metric is not given; then any other rate, then any time.
PREFERRED = ("train_images_per_s", "images_per_s", "samples_per_s", "median_s", "step_s", "epoch_s")

# Environment entries worth a remark when they differ between the two runs.
ENV_KEYS = ("mxnet", "cpu_count", "gpus", "contexts", "env", "processor")


def load_records(path, which):
    """Read a JSON-lines results file; UserError with one line when it cannot be used."""
    if not os.path.exists(path):
        raise UserError("%s file %s does not exist; give a file written with --json" % (which, path))
    if os.path.isdir(path):
        raise UserError("%s file %s is a directory; give a file written with --json" % (which, path))
    try:
        records = read_jsonl(path)
    except OSError as e:
        raise UserError("cannot read %s file %s: %s" % (which, path, e.strerror or e))
    except SchemaError as e:
        raise UserError("%s file %s" % (which, e))
    except UnicodeDecodeError:
        raise UserError("%s file %s is not text; give a JSON-lines file written with --json" % (which, path))
    except json.JSONDecodeError as e:
        raise UserError("%s file %s is not JSON lines (line %d: %s); give a file written with --json"
                        % (which, path, e.lineno, e.msg))
    except (KeyError, TypeError, AttributeError):
        raise UserError("%s file %s has records without 'bench' and 'name'; it was not written by gluonperf"
                        % (which, path))
    if not records:
        raise UserError("%s file %s holds no results" % (which, path))
    return records


def key(record):
    """What a record measured: (bench, name, (field, value)...) for the identifying fields."""
    return (record.bench, record.name) + tuple(
        (f, json.dumps(record.metrics[f], sort_keys=True)) for f in ID_FIELDS if f in record.metrics)


def higher_is_better(metric):
    return metric.endswith("_per_s") or metric in ("speedup", "ratio", "top1", "test_top1", "train_top1")


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def positive(value):
    """A number a ratio can be taken of: finite and above 0. A record may hold a signed
    difference (profile's 'hidden by overlap', fenced - unfenced, is negative when the
    unfenced steps ran slower), or a 0, which no ratio or log interval can be made of."""
    return _number(value) and 0 < value < float("inf")


def pick_metric(old, new, metric=None):
    """The metric to compare two matched records on, or None when they share none that both
    hold as a positive number (`positive`): `metric` when given, else the one the records name
    as theirs (`primary_metric`: an inference record's p90_s in single-stream), else the first
    of PREFERRED."""
    both = [k for k in old.metrics if k in new.metrics and positive(old.metrics[k]) and positive(new.metrics[k])]
    if metric is not None:
        return metric if metric in both else None
    own = new.metrics.get("primary_metric")
    if own in both and own == old.metrics.get("primary_metric"):
        return own
    for m in PREFERRED:
        if m in both:
            return m
    for m in both:
        if m.endswith("_per_s"):
            return m
    for m in both:
        if m.endswith("_s") and not m.startswith(("iqr", "max", "min", "mean")):
            return m
    return None


def environment_changes(old_env, new_env):
    """One-line remarks about how the environments of the two runs differ."""
    if not old_env or not new_env:
        return []
    out = []
    for k in ENV_KEYS:
        a, b = old_env.get(k), new_env.get(k)
        if k == "env" and isinstance(a, dict) and isinstance(b, dict):
            for var in sorted(set(a) | set(b)):
                if a.get(var) != b.get(var):
                    out.append("%s: %s -> %s" % (var, a.get(var, "unset"), b.get(var, "unset")))
        elif a != b:
            out.append("%s: %s -> %s" % (k, a, b))
    return out


def _values(records, m):
    """The evidence of one side for metric `m`: per-run values (one per record: the runs in
    the file) and, when there is one run holding raw per-repeat samples, those (`per_repeat`)."""
    runs = [float(r.metrics[m]) for r in records if positive(r.metrics.get(m))]
    return runs, (per_repeat(records[0], m) if len(records) == 1 else None)


def per_repeat(record, m):
    """Metric `m` of each repeat of one run: its raw times (`samples_s`) for a time per call;
    for a rate of a batch per call (`samples_per_s` = batch_size / median_s), the batch over
    each repeat's time; an inference record's figure in each of its rounds (`round_values`, of
    its `primary_metric`); None otherwise."""
    x = record.metrics
    if m == x.get("primary_metric") and isinstance(x.get("round_values"), list):
        return [float(v) for v in x["round_values"] if positive(v)] or None
    times = x.get("samples_s")
    if not isinstance(times, list):
        return None
    times = [float(t) for t in times if positive(t)]
    if m in SAMPLED:
        return times or None
    if m.endswith("_per_s") and positive(x.get(m)) and positive(x.get("median_s")) and positive(x.get("batch_size")):
        batch = float(x["batch_size"])
        if abs(float(x[m]) * float(x["median_s"]) - batch) <= 1e-9 * batch:  # the rate is batch / median_s
            return [batch / t for t in times] or None
    return None


# Metrics a record's raw samples (samples_s, seconds per call) stand for.
SAMPLED = ("median_s", "mean_s")


def call_seconds(records, m):
    """How long one timed call of these records took, in seconds (what the run-to-run noise
    floor depends on): the median per call, or a step's time, or the batch over a rate of
    samples; None when the records do not say."""
    found = []
    for r in records:
        x = r.metrics
        if _number(x.get("median_s")):
            found.append(float(x["median_s"]))
        elif _number(x.get("step_s")):
            found.append(float(x["step_s"]))
        elif m.endswith("_s") and m == x.get("primary_metric") and positive(x.get(m)):  # infer's latency percentile
            found.append(float(x[m]))
        elif m.endswith("_per_s") and positive(x.get(m)) and _number(x.get("batch_size")):
            found.append(float(x["batch_size"]) / float(x[m]))
    return statistics.median(found) if found else None


def against_yardstick(records, m):
    """One side's evidence held against the yardstick its runs timed beside the benchmark
    (harness.Yardstick): per run, a time per call over the yardstick's median time (a rate
    times it); for one run with raw samples, each repeat's value against the yardstick's time in
    the same repeat. (runs, samples) as `_values` gives them, or None when `m` is neither a time
    per call nor a batch's rate, or a record has no yardstick."""
    if not records or not all(positive(r.metrics.get("yardstick_s")) for r in records):
        return None
    if m in SAMPLED:
        def held(value, ruler):
            return value / ruler
    elif m.endswith("_per_s") and per_repeat(records[0], m) is not None:
        def held(value, ruler):
            return value * ruler
    else:
        return None
    runs = [held(float(r.metrics[m]), float(r.metrics["yardstick_s"])) for r in records if positive(r.metrics.get(m))]
    samples = None
    if len(records) == 1:
        values, ruler = per_repeat(records[0], m), records[0].metrics.get("yardstick_samples_s")
        if values and isinstance(ruler, list) and len(values) == len(ruler):
            samples = [held(v, y) for v, y in zip(values, ruler) if positive(y)] or None
    return runs, samples


@dataclass(frozen=True)
class Bar:
    """What `judge` holds a change to: the `threshold` its estimate must pass, the interval's
    `level`, the run-to-run `noise_floor` that widens one run per side, `yardstick_floor` in its
    place when the evidence is held against the yardstick."""
    threshold: float = stats.THRESHOLD
    noise_floor: float = stats.NOISE_FLOOR
    level: float = stats.LEVEL
    yardstick_floor: Optional[float] = None


def judge(old, new, m, bar=Bar(), pairs=None, held=None):
    """The ratio of NEW to OLD on metric `m` as a change for the better (> 1: better), with its
    interval, how it was made, and a verdict. `old`/`new`: the records of each side (several
    when a file holds several runs). The evidence, best first:

    - `pairs`: runs made in alternation (compare --ab): per pair, a ratio; a t interval;
    - several runs per side: Welch's t on the runs' values, which see the drift between runs,
      with `stats.SESSION_FLOOR` for the drift that the runs of one file share;
    - one run per side: its raw samples (or its one value) with `bar.noise_floor`, the
      run-to-run drift that samples from within one run cannot show.

    With `held` (each side's evidence held against the yardstick its runs timed beside the
    benchmark, `against_yardstick`, given when both runs were made with the same settings), that
    evidence is judged instead: the host's speed moving between the runs then cancels, and one
    run per side is widened by `bar.yardstick_floor` instead of `bar.noise_floor`."""
    threshold, noise_floor, level = bar.threshold, bar.noise_floor, bar.level
    higher = higher_is_better(m)
    words = ("faster", "slower") if m.endswith(("_per_s", "_s")) or m in ("speedup", "ratio") else \
        ("better", "worse")
    if pairs:
        ratios = [(b / a if higher else a / b) for a, b in pairs if a and b]
        interval, how, what, settle = stats.ratio_interval(ratios, level), "alternating pairs", "pairs", None
        return interval, how, stats.verdict(interval, threshold, words, what=what, settle=settle)
    ruled = ""
    if held:
        (old_runs, old_samples), (new_runs, new_samples) = held
        speed = statistics.median(float(r.metrics["yardstick_s"]) for r in old) / \
            statistics.median(float(r.metrics["yardstick_s"]) for r in new)
        ruled = " against the yardstick each run timed (the machine ran it at %.2fx OLD's speed in NEW)" % speed
        noise_floor = bar.yardstick_floor
    else:
        old_runs, old_samples = _values(old, m)
        new_runs, new_samples = _values(new, m)
    if len(old_runs) > 1 and len(new_runs) > 1:
        interval = stats.two_sample_interval(old_runs, new_runs, level, noise_floor=stats.SESSION_FLOOR,
                                             higher_is_better=higher)
        how, what = "%d and %d runs%s, +-%g%% drift between saved runs" % (
            len(old_runs), len(new_runs), ruled, 100 * stats.SESSION_FLOOR), "runs"
        settle = "more runs of each side would settle it"
    else:
        sampled = bool(old_samples and new_samples)
        a, b = (old_samples, new_samples) if sampled else (old_runs, new_runs)
        interval = stats.two_sample_interval(a, b, level, noise_floor=noise_floor, higher_is_better=higher)
        how = "one run each%s%s, +-%g%% run-to-run noise floor" % (
            " (%d and %d repeats)" % (len(a), len(b)) if sampled else "", ruled, 100 * noise_floor)
        what = "repeats" if sampled else "runs"
        settle = "one run of each side cannot settle it: run each several times, or use --ab"
    return interval, how, stats.verdict(interval, threshold, words, what=what, settle=settle)


def compare(old_records, new_records, fail_above=None, metric=None, threshold=stats.THRESHOLD,
            noise_floor=None, pairs=None, level=stats.LEVEL):
    """Match NEW records to OLD ones and judge each change.

    `old_records`/`new_records` are lists of Result (or (Result, env) pairs as `read_jsonl`
    returns); records with the same key on one side are several runs of it. `fail_above` is a
    fraction (0.1 = 10%). `pairs` ({key: [(old value, new value)]}) holds alternating runs
    (compare --ab). When a side holds one run, the interval includes the run-to-run
    `noise_floor`; by default `stats.noise_floor` of the shorter side's call time
    (`call_seconds`), recorded as `noise_floor` and `call_s`. Returns one Result(bench='compare', name='<bench>/<name>') per benchmark with
    the metric, old and new values (the runs' medians), `change` (new/old - 1), `worse` (the
    fraction by which it got worse, direction-aware; negative when it improved), the ratio's
    interval as a change for the better (`ratio`, `ratio_ci_low`, `ratio_ci_high`, `ratio_n`),
    `evidence`, the verdict's fields (at `level`) and `status`: 'regression' (judged worse, by more than
    `fail_above`), 'worse', 'improved', 'same', 'inconclusive', 'new', 'removed', or
    'no common metric'.
    """
    envs = [next((r[1] for r in side if isinstance(r, tuple)), None) for side in (old_records, new_records)]
    # the yardstick stands for the machine's speed only between runs made with the same settings
    same_settings = None not in envs and not environment_changes(*envs)
    old_records = [r[0] if isinstance(r, tuple) else r for r in old_records]
    new_records = [r[0] if isinstance(r, tuple) else r for r in new_records]
    old_by_key, new_by_key = {}, {}
    for r in old_records:
        old_by_key.setdefault(key(r), []).append(r)
    for r in new_records:
        new_by_key.setdefault(key(r), []).append(r)
    out = []
    for k, news in new_by_key.items():
        new = news[0]
        ident = {f: new.metrics[f] for f in ID_FIELDS if f in new.metrics}
        label = "%s/%s" % (new.bench, new.name)
        olds = old_by_key.get(k)
        if olds is None:
            out.append(Result("compare", label, dict(ident, status="new")))
            continue
        m = pick_metric(olds[0], new, metric)
        if m is None:
            out.append(Result("compare", label, dict(ident, status="no common metric")))
            continue
        olds = [r for r in olds if positive(r.metrics.get(m))]
        news = [r for r in news if positive(r.metrics.get(m))]
        a = statistics.median(float(r.metrics[m]) for r in olds)
        b = statistics.median(float(r.metrics[m]) for r in news)
        change = b / a - 1 if a else float("inf")
        worse = -change if higher_is_better(m) else change
        # a run that recorded an unstable machine (gluonperf.measure.machine) widens the verdict, as it did there
        unstable = any(r.metrics.get("machine_warnings") for r in olds + news)
        here = max(level, stats.UNSTABLE_LEVEL) if unstable else level
        call = [call_seconds(olds, m), call_seconds(news, m)]
        call = min(call) if None not in call else None
        floor = stats.noise_floor(call) if noise_floor is None else noise_floor
        ruler_floor = stats.noise_floor(call, yardstick=True) if noise_floor is None else noise_floor
        paired = (pairs or {}).get(k)
        held = None if paired else (against_yardstick(olds, m), against_yardstick(news, m))
        held = held if held and None not in held else None  # both sides timed a yardstick
        ruled = held is not None and same_settings
        interval, how, v = judge(olds, news, m, Bar(threshold, floor, here, ruler_floor), paired,
                                 held if ruled else None)
        if held is not None and not same_settings:
            how += "; not against the yardstick: the runs' settings differ"
        floor_fields = {"noise_floor": ruler_floor if ruled else floor, "call_s": call, "yardstick": ruled} \
            if how.startswith("one run each") else {"yardstick": ruled}
        if unstable:
            how += "; a run recorded an unstable machine: 99% interval"
        if v.word in ("slower", "worse"):
            status = "regression" if fail_above is not None and worse > fail_above else "worse"
        else:
            status = {"faster": "improved", "better": "improved"}.get(v.word, v.word)
        out.append(Result("compare", label, dict(ident, metric=m, old=a, new=b, change=change, worse=worse,
                                                  runs_old=len(olds), runs_new=len(news), evidence=how, **floor_fields,
                                                  **interval.fields("ratio"), **v.fields(), status=status)))
    for k, olds in old_by_key.items():
        if k not in new_by_key:
            old = olds[0]
            ident = {f: old.metrics[f] for f in ID_FIELDS if f in old.metrics}
            out.append(Result("compare", "%s/%s" % (old.bench, old.name), dict(ident, status="removed")))
    return out


def regressions(results):
    return [r for r in results if r.metrics.get("status") == "regression"]


def display(results):
    """Rows for people: values in their metric's unit, changes as signed percentages, the
    ratio (> 1: better) with its 95% interval and n."""
    rows = []
    for r in results:
        m = dict(r.metrics)
        metric = m.get("metric")
        if metric is not None:
            m["old"] = format_value(metric, m["old"])
            m["new"] = format_value(metric, m["new"])
            m["change"] = "%+.1f%%" % (100 * m["change"])
            m["better"] = "higher" if higher_is_better(metric) else "lower"
            m["ratio"] = "%.3gx" % m["ratio"]
            m["95% CI"] = stats.Interval(0, m["ratio_ci_low"], m["ratio_ci_high"], 0).ci_text()[7:] \
                if m.get("ratio_ci_high") not in (None, float("inf")) else "-"
            m["n"] = m.get("ratio_n")
            del m["worse"]
        rows.append(Result(r.bench, r.name, m))
    return rows


def run_ab(old_cmd, new_cmd, runs, timeout, progress=None):
    """Run two commands in alternation, A B B A A B ..., `runs` times each, each with --json into
    a temporary file. Returns (OLD's runs, NEW's runs, warnings about the machine): a run is
    the list of (Result, env) its file held."""
    import shlex
    import subprocess
    from ..runtime import guard
    from ..records import read_jsonl
    sides = {"old": shlex.split(old_cmd), "new": shlex.split(new_cmd)}
    for name, argv in sides.items():
        if not argv:
            raise UserError("--ab: the %s command is empty" % name.upper())
    got = {"old": [], "new": []}
    from . import machine
    start, watch, loads = machine.before(), machine.Watch(), []
    with guard.temp_dir(prefix="gluonperf-ab-") as tmp:
        for i in range(runs):
            for side in (("old", "new") if i % 2 == 0 else ("new", "old")):
                path = os.path.join(tmp, "%s-%d.json" % (side, i))
                try:
                    p = guard.run(sides[side] + ["--json", path], timeout=timeout)
                except FileNotFoundError:
                    raise UserError("--ab: cannot run %r: no such program" % sides[side][0])
                except subprocess.TimeoutExpired:
                    raise UserError("--ab: the %s command did not finish within %ds (--timeout)"
                                    % (side.upper(), timeout))
                if p.returncode != 0:
                    raise UserError("--ab: the %s command failed (exit %d): %s"
                                    % (side.upper(), p.returncode, guard.last_line(p.stderr, "no message")))
                if not os.path.exists(path):
                    raise UserError("--ab: the %s command wrote no --json file; is it a gluonperf command?"
                                    % side.upper())
                got[side].append(read_jsonl(path))
                if progress:
                    progress()
            loads.append(watch.round())
    return got["old"], got["new"], machine.judge(loads, start)


def ab_pairs(old_runs, new_runs, metric=None):
    """{key: [(old value, new value)]}, run i of OLD with run i of NEW, on the metric
    `pick_metric` chooses for the key."""
    pairs = {}
    for old, new in zip(old_runs, new_runs):
        new_by_key = {key(r): r for r, _ in new}
        for r, _ in old:
            n = new_by_key.get(key(r))
            m = pick_metric(r, n, metric) if n is not None else None
            if m is not None:
                pairs.setdefault(key(r), []).append((float(r.metrics[m]), float(n.metrics[m])))
    return pairs

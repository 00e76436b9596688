"""Compare two saved runs: `python -m gluonperf.compare OLD NEW [--fail-above 10%]`.

OLD and NEW are JSON-lines files written with `--json` by any gluonperf command or
benchmark suite. Records are matched by (bench, name) and the fields that say what
was measured (model, batch size, contexts, ...). For each pair the change of one
metric is shown, direction-aware: a rate (`*_per_s`, e.g. images/s) is better when
higher, a time (`*_s`, e.g. median_s) when lower. As pytest-benchmark's compare
does, the exit status is 1 when any benchmark got worse by more than --fail-above.
"""
import argparse
import json
import os
import statistics
import sys

from . import UserError
from .measure import stats
from .cli.common import add_threshold, check_output_path, percentage, positive_int
from .render.records import Result, format_table, format_value, read_jsonl, write_jsonl

# Fields that identify what a record measured (not how fast it went).
ID_FIELDS = ("model", "task", "batch_size", "ctx", "contexts", "hybridize", "kvstore",
             "dataset", "workers", "devices", "mode", "variant", "size", "candidate")

# Metrics tried in this order when --metric is not given; then any other rate, then any time.
PREFERRED = ("train_images_per_s", "images_per_s", "samples_per_s", "median_s", "step_s", "epoch_s")

# Environment entries worth a remark when they differ between the two runs.
ENV_KEYS = ("mxnet", "cpu_count", "gpus", "contexts", "env", "processor")


def load(path, which):
    """Read a JSON-lines results file; UserError with one line when it cannot be used."""
    if not os.path.exists(path):
        raise UserError("%s file %s does not exist; give a file written with --json" % (which, path))
    if os.path.isdir(path):
        raise UserError("%s file %s is a directory; give a file written with --json" % (which, path))
    try:
        records = read_jsonl(path)
    except OSError as e:
        raise UserError("cannot read %s file %s: %s" % (which, path, e.strerror or e))
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


def pick_metric(old, new, metric=None):
    """The metric to compare two matched records on, or None when they share none."""
    both = [k for k in old.metrics if k in new.metrics and _number(old.metrics[k]) and _number(new.metrics[k])]
    if metric is not None:
        return metric if metric in both else None
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
    the file) and, when there is one run holding raw per-repeat samples of a time, those."""
    runs = [float(r.metrics[m]) for r in records if _number(r.metrics.get(m))]
    samples = None
    if len(records) == 1 and m in SAMPLED and isinstance(records[0].metrics.get("samples_s"), list):
        samples = [float(x) for x in records[0].metrics["samples_s"] if _number(x) and x > 0] or None
    return runs, samples


# Metrics a record's raw samples (samples_s, seconds per call) stand for.
SAMPLED = ("median_s", "mean_s")


def judge(old, new, m, threshold=stats.THRESHOLD, noise_floor=stats.NOISE_FLOOR, pairs=None, level=stats.LEVEL):
    """The ratio of NEW to OLD on metric `m` as a change for the better (> 1: better), with its
    interval, how it was made, and a verdict. `old`/`new`: the records of each side (several
    when a file holds several runs). The evidence, best first:
    - `pairs`: runs made in alternation (compare --ab): per pair, a ratio; a t interval;
    - several runs per side: Welch's t on the runs' values, which see the drift between runs;
    - one run per side: its raw samples (or its one value) with the `noise_floor`, the
      run-to-run drift that samples from within one run cannot show."""
    higher = higher_is_better(m)
    words = ("faster", "slower") if m.endswith(("_per_s", "_s")) or m in ("speedup", "ratio") else \
        ("better", "worse")
    if pairs:
        ratios = [(b / a if higher else a / b) for a, b in pairs if a and b]
        interval, how, what, settle = stats.ratio_interval(ratios, level), "alternating pairs", "pairs", None
    else:
        old_runs, old_samples = _values(old, m)
        new_runs, new_samples = _values(new, m)
        if len(old_runs) > 1 and len(new_runs) > 1:
            interval = stats.two_sample_interval(old_runs, new_runs, level, noise_floor=0, higher_is_better=higher)
            how, what = "%d and %d runs" % (len(old_runs), len(new_runs)), "runs"
            settle = "more runs of each side would settle it"
        else:
            sampled = bool(old_samples and new_samples)
            a, b = (old_samples, new_samples) if sampled else (old_runs, new_runs)
            interval = stats.two_sample_interval(a, b, level, noise_floor=noise_floor, higher_is_better=higher)
            how = "one run each%s, +-%g%% run-to-run noise floor" % (
                " (%d and %d repeats)" % (len(a), len(b)) if sampled else "", 100 * noise_floor)
            what = "repeats" if sampled else "runs"
            settle = "one run of each side cannot settle it: run each several times, or use --ab"
    return interval, how, stats.verdict(interval, threshold, words, what=what, settle=settle)


def compare(old_records, new_records, fail_above=None, metric=None, threshold=stats.THRESHOLD,
            noise_floor=stats.NOISE_FLOOR, pairs=None, level=stats.LEVEL):
    """Match NEW records to OLD ones and judge each change.

    `old_records`/`new_records` are lists of Result (or (Result, env) pairs as `read_jsonl`
    returns); records with the same key on one side are several runs of it. `fail_above` is a
    fraction (0.1 = 10%). `pairs` ({key: [(old value, new value)]}) holds alternating runs
    (compare --ab). Returns one Result(bench='compare', name='<bench>/<name>') per benchmark with
    the metric, old and new values (the runs' medians), `change` (new/old - 1), `worse` (the
    fraction by which it got worse, direction-aware; negative when it improved), the ratio's
    interval as a change for the better (`ratio`, `ratio_ci_low`, `ratio_ci_high`, `ratio_n`),
    `evidence`, the verdict's fields (at `level`) and `status`: 'regression' (judged worse, by more than
    `fail_above`), 'worse', 'improved', 'same', 'inconclusive', 'new', 'removed', or
    'no common metric'.
    """
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
        olds = [r for r in olds if _number(r.metrics.get(m))]
        news = [r for r in news if _number(r.metrics.get(m))]
        a = statistics.median(float(r.metrics[m]) for r in olds)
        b = statistics.median(float(r.metrics[m]) for r in news)
        change = b / a - 1 if a else float("inf")
        worse = -change if higher_is_better(m) else change
        # a run that recorded an unstable machine (gluonperf.measure.machine) widens the verdict, as it did there
        unstable = any(r.metrics.get("machine_warnings") for r in olds + news)
        here = max(level, stats.UNSTABLE_LEVEL) if unstable else level
        interval, how, v = judge(olds, news, m, threshold, noise_floor, (pairs or {}).get(k), here)
        if unstable:
            how += "; a run recorded an unstable machine: 99% interval"
        if v.word in ("slower", "worse"):
            status = "regression" if fail_above is not None and worse > fail_above else "worse"
        else:
            status = {"faster": "improved", "better": "improved"}.get(v.word, v.word)
        out.append(Result("compare", label, dict(ident, metric=m, old=a, new=b, change=change, worse=worse,
                                                  runs_old=len(olds), runs_new=len(news), evidence=how,
                                                  **interval.fields("ratio"), **v.fields(), status=status)))
    for k, olds in old_by_key.items():
        if k not in new_by_key:
            old = olds[0]
            ident = {f: old.metrics[f] for f in ID_FIELDS if f in old.metrics}
            out.append(Result("compare", "%s/%s" % (old.bench, old.name), dict(ident, status="removed")))
    return out


def regressions(results):
    return [r for r in results if r.metrics.get("status") == "regression"]


def parse_threshold(text):
    """'10%', '10' -> 0.10; '0.5%' -> 0.005 (0% to 1000%)."""
    return percentage(text, upper=1000, upper_included=True)


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


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m gluonperf.compare",
        description="Compare two result files written with --json, or two commands run in alternation "
                    "(--ab): per benchmark the change of throughput (higher is better) or time (lower is "
                    "better), its 95% interval and a verdict: faster/slower only when the interval says "
                    "so, 'same' when it lies within +-THRESHOLD, otherwise inconclusive. Exit 1 on a "
                    "regression that is significant and past --fail-above.")
    p.add_argument("old", metavar="OLD", help="baseline results (JSON lines written with --json; several runs "
                                              "of the same benchmark in one file count as runs); with --ab, "
                                              "the baseline command, quoted")
    p.add_argument("new", metavar="NEW", help="new results to judge against OLD; with --ab, the new command")
    p.add_argument("--fail-above", type=parse_threshold, metavar="PCT",
                   help="exit with status 1 when a benchmark got worse by more than PCT (e.g. 10%%) and the "
                        "interval says it got worse; without it the table is informational and the exit status 0")
    add_threshold(p)
    p.add_argument("--noise-floor", type=percentage, default=stats.NOISE_FLOOR, metavar="PCT",
                   help="the run-to-run drift of one configuration on this kind of machine (the SD of one run's "
                        "level), added to the interval when each side is a single run (default: %g%%%%, measured "
                        "with benchmarks/verdicts.py)" % (100 * stats.NOISE_FLOOR))
    p.add_argument("--ab", action="store_true",
                   help="OLD and NEW are commands (each run with --json FILE added): run them in alternation "
                        "(ABBA...), --runs times each, and judge the per-pair ratios")
    p.add_argument("--runs", type=positive_int, default=6, help="with --ab: runs of each command (default: "
                                                                 "%(default)s)")
    p.add_argument("--timeout", type=positive_int, default=1800, metavar="SEC",
                   help="with --ab: seconds before one run is abandoned (default: %(default)s)")
    p.add_argument("--metric", help="compare on this metric (e.g. median_s, images_per_s) instead of the "
                                    "first of %s found in both records" % ", ".join(PREFERRED))
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON lines")
    return p


def run_ab(old_cmd, new_cmd, runs, timeout, progress=None):
    """Run two commands in alternation, A B B A A B ..., `runs` times each, each with --json into
    a temporary file. Returns (OLD's runs, NEW's runs, warnings about the machine): a run is
    the list of (Result, env) its file held."""
    import shlex
    import subprocess
    from .runtime import guard
    from .render.records import read_jsonl
    sides = {"old": shlex.split(old_cmd), "new": shlex.split(new_cmd)}
    for name, argv in sides.items():
        if not argv:
            raise UserError("--ab: the %s command is empty" % name.upper())
    got = {"old": [], "new": []}
    from .measure import machine
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


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv[:-1]):  # "--fail-above -5%": argparse takes "-5%" for an option
        if a == "--fail-above" and argv[i + 1][:1] == "-" and argv[i + 1][1:2].isdigit():
            argv[i:i + 2] = ["--fail-above=" + argv[i + 1]]
            break
    args = build_parser().parse_args(argv)
    check_output_path(args.json, "--json")  # as every command: before the work, not after it
    pairs, unstable = None, []
    if args.ab:
        from .cli.common import guard_command, progress_bar
        guard_command(args, "python -m gluonperf.compare", stall_timeout=args.timeout + 120)
        with progress_bar(2 * args.runs, "compare --ab") as bar:
            old_runs, new_runs, unstable = run_ab(args.old, args.new, args.runs, args.timeout, bar.update)
        pairs = ab_pairs(old_runs, new_runs, args.metric)
        if unstable:
            from .measure.machine import warning_line
            print("note: " + warning_line(unstable), file=sys.stderr)
        old = [pair for run in old_runs for pair in run]
        new = [pair for run in new_runs for pair in run]
    else:
        old = load(args.old, "OLD")
        new = load(args.new, "NEW")
    results = compare(old, new, args.fail_above, args.metric, args.threshold, args.noise_floor, pairs,
                      stats.level_for(not unstable))
    if not any("metric" in r.metrics for r in results):
        raise UserError("no benchmark of %s matches one in %s with a common metric%s; are they results of "
                        "the same suite?" % (args.new, args.old, " (%s)" % args.metric if args.metric else ""))
    for line in environment_changes(old[0][1], new[0][1]):
        print("note: environment differs: %s" % line, file=sys.stderr)
    for path, records in ((args.old, old), (args.new, new)):
        partial = sum(1 for r, _ in records if r.metrics.get("partial"))
        if partial:  # written by a run that was stopped (cli.keep_on_stop)
            print("note: %s comes from a run that was stopped: %d record(s) hold only the rounds it had "
                  "finished" % (path, partial), file=sys.stderr)
    columns = ["name"] + [f for f in ID_FIELDS if any(f in r.metrics for r in results)] + \
              ["metric", "better", "old", "new", "change", "ratio", "95% CI", "n", "status"]
    title = "%s -> %s: ratio > 1 is better; same within +-%g%%" % (args.old, args.new, 100 * args.threshold)
    if args.fail_above is not None:
        title += "; fail above %.4g%% worse" % (100 * args.fail_above)
    print(format_table(display(results), columns=columns, title=title))
    kinds = sorted({r.metrics["evidence"] for r in results if "evidence" in r.metrics})
    print("evidence: %s" % "; ".join(kinds))
    if any("one run each" in k for k in kinds):
        print("note: with one run on each side the interval includes a +-%g%% run-to-run noise floor: it cannot "
              "see how this machine drifted between the two runs; for a sharper verdict save several runs "
              "of each side in one file each, or use --ab" % (100 * args.noise_floor), file=sys.stderr)
    if args.json:
        write_jsonl(results, args.json)
    bad = regressions(results)
    if bad:
        print("%d regression(s) past %.4g%%: %s" % (len(bad), 100 * args.fail_above,
                                                  ", ".join(r.name for r in bad)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from .cli import common as cli  # no MXNet: cli loads it only where a command needs it
    cli.run(main, "python -m gluonperf.compare")

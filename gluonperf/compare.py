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
import sys

from . import UserError
from .cli import check_output_path
from .records import Result, format_table, format_value, read_jsonl, write_jsonl

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


def compare(old_records, new_records, threshold=None, metric=None):
    """Match NEW records to OLD ones and compute each change.

    `old_records`/`new_records` are lists of Result (or (Result, env) pairs as
    `read_jsonl` returns). `threshold` is a fraction (0.1 = 10%). Returns one
    Result(bench='compare', name='<bench>/<name>') per benchmark with the metric,
    old and new values, `change` (new/old - 1), `worse` (the fraction by which
    it got worse, direction-aware; negative when it improved) and `status`:
    'regression' (worse by more than threshold), 'improved', 'same', 'new',
    'removed', or 'no common metric'.
    """
    old_records = [r[0] if isinstance(r, tuple) else r for r in old_records]
    new_records = [r[0] if isinstance(r, tuple) else r for r in new_records]
    old_by_key = {}
    for r in old_records:
        old_by_key.setdefault(key(r), r)
    limit = threshold if threshold is not None else 0.0
    out, seen = [], set()
    for new in new_records:
        k = key(new)
        if k in seen:
            continue
        seen.add(k)
        ident = {f: new.metrics[f] for f in ID_FIELDS if f in new.metrics}
        label = "%s/%s" % (new.bench, new.name)
        old = old_by_key.get(k)
        if old is None:
            out.append(Result("compare", label, dict(ident, status="new")))
            continue
        m = pick_metric(old, new, metric)
        if m is None:
            out.append(Result("compare", label, dict(ident, status="no common metric")))
            continue
        a, b = float(old.metrics[m]), float(new.metrics[m])
        change = b / a - 1 if a else float("inf")
        worse = -change if higher_is_better(m) else change
        if worse > limit:
            status = "regression" if threshold is not None else "worse"
        elif worse < -limit:
            status = "improved"
        else:
            status = "same"
        out.append(Result("compare", label, dict(ident, metric=m, old=a, new=b, change=change,
                                                  worse=worse, status=status)))
    for k, old in old_by_key.items():
        if k not in seen:
            ident = {f: old.metrics[f] for f in ID_FIELDS if f in old.metrics}
            out.append(Result("compare", "%s/%s" % (old.bench, old.name), dict(ident, status="removed")))
    return out


def regressions(results):
    return [r for r in results if r.metrics.get("status") == "regression"]


def parse_threshold(text):
    """'10%', '10' -> 0.10; '0.5%' -> 0.005."""
    raw = text.strip().rstrip("%").strip()
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a percentage; use e.g. 10%%" % text)
    if not 0 <= value <= 1000:
        raise argparse.ArgumentTypeError("%r must be between 0%% and 1000%%" % text)
    return value / 100.0


def display(results):
    """Rows for people: values in their metric's unit, changes as signed percentages."""
    rows = []
    for r in results:
        m = dict(r.metrics)
        metric = m.get("metric")
        if metric is not None:
            m["old"] = format_value(metric, m["old"])
            m["new"] = format_value(metric, m["new"])
            m["change"] = "%+.1f%%" % (100 * m["change"])
            m["better"] = "higher" if higher_is_better(metric) else "lower"
            del m["worse"]
        rows.append(Result(r.bench, r.name, m))
    return rows


def build_parser():
    p = argparse.ArgumentParser(
        prog="python -m gluonperf.compare",
        description="Compare two result files written with --json: per-benchmark change of throughput "
                    "(higher is better) or time (lower is better); exit 1 on a regression past --fail-above.")
    p.add_argument("old", metavar="OLD", help="baseline results (JSON lines written with --json)")
    p.add_argument("new", metavar="NEW", help="new results to judge against OLD")
    p.add_argument("--fail-above", type=parse_threshold, metavar="PCT",
                   help="exit with status 1 when a benchmark got worse by more than PCT (e.g. 10%%); "
                        "without it the table is informational and the exit status 0")
    p.add_argument("--metric", help="compare on this metric (e.g. median_s, images_per_s) instead of the "
                                    "first of %s found in both records" % ", ".join(PREFERRED))
    p.add_argument("--json", metavar="PATH", help="also write the comparison as JSON lines")
    return p


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    for i, a in enumerate(argv[:-1]):  # "--fail-above -5%": argparse takes "-5%" for an option
        if a == "--fail-above" and argv[i + 1][:1] == "-" and argv[i + 1][1:2].isdigit():
            argv[i:i + 2] = ["--fail-above=" + argv[i + 1]]
            break
    args = build_parser().parse_args(argv)
    check_output_path(args.json, "--json")  # as every command: before the work, not after it
    old = load(args.old, "OLD")
    new = load(args.new, "NEW")
    results = compare(old, new, args.fail_above, args.metric)
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
              ["metric", "better", "old", "new", "change", "status"]
    title = "%s -> %s" % (args.old, args.new)
    if args.fail_above is not None:
        title += " (fail above %.4g%% worse)" % (100 * args.fail_above)
    print(format_table(display(results), columns=columns, title=title))
    if args.json:
        write_jsonl(results, args.json)
    bad = regressions(results)
    if bad:
        print("%d regression(s) past %.4g%%: %s" % (len(bad), 100 * args.fail_above,
                                                  ", ".join(r.name for r in bad)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    from . import cli  # no MXNet: cli loads it only where a command needs it
    cli.run(main, "python -m gluonperf.compare")

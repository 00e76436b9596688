"""The report's page: a results folder read (its JSON-lines files, profiler traces and
checkpoints skipped), the machine and environment section, the change against older
results (matched and judged by gluonperf.measure.comparison), one section per kind of records
(the Kinds it is given: gluonperf.render.kinds's, and the report command adds the bench
subcommands'), and the HTML of templates/report.html.j2. Nothing here imports MXNet.
"""
import datetime
import json
import os
import re

from .. import UserError
from ..measure import comparison
from .figures import figure, labelled_bars, svg
from .kinds import KINDS, Block, Kind, Table
from ..records import Result, format_value


# --- reading the results ----------------------------------------------------------

def _skippable(path):
    """True for JSON in a results folder that is not records: a profiler trace (--trace)
    or a training checkpoint's meta.json."""
    with open(path, "rb") as f:
        head = f.read(4096).decode("utf-8", "replace")
    if re.match(r'\s*\{\s*"traceEvents"', head):
        return True
    if os.path.basename(path) == "meta.json":
        try:
            with open(path) as f:
                meta = json.load(f)
            return isinstance(meta, dict) and "epoch" in meta and "config" in meta
        except (OSError, ValueError):
            return False
    return False


def load_results(paths, which="results"):
    """[(path, [(Result, env)])] for files and folders (searched for *.json / *.jsonl);
    UserError naming the file that cannot be read. Returns also the skipped files."""
    out, skipped, seen = [], [], set()
    for path in paths:
        if not os.path.isdir(path):
            if os.path.realpath(path) not in seen:
                seen.add(os.path.realpath(path))
                out.append((path, comparison.load_records(path, which)))
            continue
        found = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found += [os.path.join(root, f) for f in sorted(files)
                      if f.endswith((".json", ".jsonl")) and not f.startswith(".")]
        for f in found:
            if os.path.realpath(f) in seen:
                continue
            seen.add(os.path.realpath(f))
            try:
                out.append((f, comparison.load_records(f, which)))
            except UserError:
                if not _skippable(f):
                    raise
                skipped.append(f)
        if not any(p.startswith(os.path.join(path, "")) or p == path for p, _ in out):
            raise UserError("%s folder %s holds no JSON-lines results (*.json, *.jsonl written with --json)"
                            % (which, path))
    return out, skipped


# --- tables for the template ------------------------------------------------------

def _cell(key, value):
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    return format_value(key, value)


def _change(c):
    if c is None:
        return "-", ""
    status = c.get("status", "")
    if "change" not in c:
        return status, status.replace(" ", "-")
    return "%+.1f%% %s (%s)" % (100 * c["change"], c["metric"], status), status


def table(t, changes=None):
    """A Table as header + rows of formatted cells; columns no record has are left out."""
    cols = [c for c in t.columns if not isinstance(c, str) or c == "name" or any(c in r.metrics for r in t.records)]
    header = [c if isinstance(c, str) else c[0] for c in cols]
    with_change = changes is not None
    if with_change:
        header.append("vs old")
    rows = []
    for r in t.records:
        row = r.row()
        cells = [_cell(c, row.get(c)) if isinstance(c, str) else c[1](r) for c in cols]
        cls = ""
        if with_change:
            text, cls = _change(changes.get(comparison.key(r)))
            cells.append(text)
        rows.append({"cells": cells, "cls": cls})
    return {"caption": t.caption, "header": header, "rows": rows}


def all_fields(records):
    cols = ["name"] + list(dict.fromkeys(k for r in records for k in r.metrics))
    return Table(records, cols)


def build_block(kind, records, source):
    """Render one run; a renderer that cannot read it (fields missing or of another
    shape) gives way to the generic table, so no record is ever lost."""
    if kind is None:
        block = Block("%s records" % records[0].bench, [all_fields(records)])
    else:
        try:
            block = kind.render(records)
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, StopIteration) as e:
            block = Block("%s records" % records[0].bench, [all_fields(records)],
                          note="not drawn: the records do not have the shape this report knows (%s: %s)"
                               % (type(e).__name__, e))
        shown = {id(r) for t in block.tables for r in t.records}
        rest = [r for r in records if id(r) not in shown]
        if rest:
            block.tables.append(Table(rest, all_fields(rest).columns, "other records of this run"))
    block.source = source
    return block


# --- environment and comparison sections -----------------------------------------------

FEATURES = (("MKLDNN", "oneDNN"), ("CUDA", "CUDA"), ("CUDNN", "cuDNN"), ("NCCL", "NCCL"), ("BLAS_OPEN", "OpenBLAS"),
            ("BLAS_MKL", "MKL BLAS"), ("OPENMP", "OpenMP"), ("DIST_KVSTORE", "dist kvstore"))
THREAD_VARS = ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS", "MXNET_CPU_WORKER_NTHREADS", "MXNET_ENGINE_TYPE",
               "MXNET_MKLDNN_ENABLED", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def machine(env):
    features = env.get("features") or []
    build = ", ".join(label for f, label in FEATURES if f in features)
    return {"CPU model": env.get("cpu_model") or "not recorded (%s)" % env.get("processor", "?"),
            "cores (os.cpu_count)": str(env.get("cpu_count", "?")),
            "GPUs": ", ".join(env.get("gpus") or []) or "none",
            "MXNet build": "%s (%s)" % (env.get("mxnet", "?"), build or "no features recorded"),
            "Python": env.get("python", "?"), "platform": env.get("platform", "?")}


def threads(env):
    variables = env.get("env") or {}
    shown = ["%s=%s" % (k, variables[k]) for k in THREAD_VARS if k in variables]
    if "OMP_NUM_THREADS" not in variables:
        shown.insert(0, "OMP_NUM_THREADS unset, MXNet uses half the processors")
    return ", ".join(shown)


def _same_machine(a, b):
    """Equal in every field both record (files written before the CPU model was recorded
    match the machine of files that record it)."""
    unknown = lambda m: m["CPU model"].startswith("not recorded")  # noqa: E731
    return all(a[k] == b[k] for k in a if k != "CPU model") and (
        a["CPU model"] == b["CPU model"] or unknown(a) or unknown(b))


def environment_section(runs):
    machines, settings = [], []
    for path, pairs in runs:
        env = next((e for _, e in pairs if e), None)
        kinds = ", ".join(dict.fromkeys(r.bench for r, _ in pairs))
        if env is None:
            settings.append(Result("file", path, {"kinds": kinds, "machine": "no environment recorded"}))
            continue
        m = machine(env)
        index = next((i for i, known in enumerate(machines) if _same_machine(known, m)), len(machines))
        if index == len(machines):
            machines.append(m)
        elif machines[index]["CPU model"].startswith("not recorded"):
            machines[index]["CPU model"] = m["CPU model"]
        settings.append(Result("file", path, {"kinds": kinds, "machine": "#%d" % (index + 1),
                                              "contexts": ",".join(env.get("contexts") or []) or "-",
                                              "thread settings": threads(env)}))
    rows = [Result("machine", "#%d" % (i + 1), m) for i, m in enumerate(machines)]
    tables = [Table(rows, ["name"] + list(machine({}))), Table(settings, ["name", "kinds", "machine", "contexts",
                                                                          "thread settings"], "files")]
    if len(machines) == 1:
        m = machines[0]
        reading = "one machine: %s, %s cores, MXNet %s" % (m["CPU model"], m["cores (os.cpu_count)"], m["MXNet build"])
    elif machines:
        reading = "results from %d different machines or builds (%s): compare their figures with care" % (
            len(machines), "; ".join("#%d %s, %s cores, MXNet %s" % (i + 1, m["CPU model"], m["cores (os.cpu_count)"],
                                                                     m["MXNet build"]) for i, m in enumerate(machines)))
    else:
        reading = "no file records its environment"
    thread_sets = sorted({r.metrics.get("thread settings") for r in settings if r.metrics.get("thread settings")})
    if len(thread_sets) > 1:
        reading += "; thread settings differ between files: %s" % " / ".join(thread_sets)
    return Block("", tables, reading=reading)


def compare_section(old_runs, new_runs, threshold, metric, label):
    old = [p for _, pairs in old_runs for p in pairs]
    new = [p for _, pairs in new_runs for p in pairs]
    order = {"regression": 0, "worse": 1, "improved": 2, "same": 3, "no common metric": 4, "new": 5, "removed": 6}
    results = sorted(comparison.compare(old, new, threshold, metric),
                     key=lambda r: (order.get(r.metrics["status"], 9), -abs(r.metrics.get("worse", 0))))
    matched = [r for r in results if "change" in r.metrics]
    bad = comparison.regressions(results)
    changes = {}
    for r in results:
        bench, name = r.name.split("/", 1)
        ident = {f: r.metrics[f] for f in comparison.ID_FIELDS if f in r.metrics}
        changes[comparison.key(Result(bench, name, ident))] = r.metrics
    fig = None
    if matched:
        f, ax = figure(width=8.5, height=0.3 * len(matched) + 1.2)
        colors = {"regression": "tab:red", "improved": "tab:green"}
        better = [-100 * r.metrics["worse"] for r in matched]
        labelled_bars(ax[0][0], [r.name for r in matched], better,
                      xlabel="% better than OLD (faster, or higher throughput)",
                      annotate=lambda v: "%+.1f%%" % v)
        for bar, r in zip(ax[0][0].patches, matched):
            bar.set_color(colors.get(r.metrics["status"], "tab:gray"))
        ax[0][0].axvline(0, color="black", lw=0.8)
        fig = svg(f)
    counts = {s: sum(1 for r in results if r.metrics.get("status") == s)
              for s in ("improved", "same", "new", "removed")}
    reading = ("%d regression(s) past %.4g%%: %s" % (len(bad), 100 * threshold, ", ".join(r.name for r in bad))
               if bad else "no regression past %.4g%% among %d matched benchmarks" % (100 * threshold, len(matched)))
    reading += " (%s)" % ", ".join("%d %s" % (n, s) for s, n in counts.items() if n)
    old_env = next((e for _, e in old if e), None)
    new_env = next((e for _, e in new if e), None)
    env_notes = comparison.environment_changes(old_env, new_env)
    columns = ["name"] + [f for f in comparison.ID_FIELDS if any(f in r.metrics for r in results)] + \
              ["metric", "better", "old", "new", "change", "status"]
    block = Block("", [Table(comparison.display(results), columns)], fig, reading,
                  note="environment differs: " + "; ".join(env_notes) if env_notes else None,
                  row_classes=[r.metrics.get("status", "").replace(" ", "-") for r in results])
    return block, changes, len(bad)


# --- the page ---------------------------------------------------------------------------

def sections(runs, kinds=KINDS):
    """Group every record by kind (in the order of `kinds`, then unknown kinds), one block per
    file and kind."""
    ordered = {kind.title: [] for kind in kinds}
    by_bench = {b: kind for kind in kinds for b in kind.benches}
    other = []
    for path, pairs in runs:
        by = {}
        for r, _ in pairs:
            by.setdefault(by_bench.get(r.bench, r.bench), []).append(r)
        for kind, records in by.items():
            if isinstance(kind, Kind):
                ordered[kind.title].append(build_block(kind, records, path))
            else:
                other.append(build_block(None, records, path))
    out = [(title, blocks) for title, blocks in ordered.items() if blocks]
    if other:
        out.append(("Other records (no renderer for their kind yet)", other))
    return out


def render_page(runs, title, old_runs=None, threshold=0.10, metric=None, old_label=None, skipped=(), kinds=KINDS):
    """The page's HTML and the number of regressions against `old_runs`; `kinds` draw the records
    (the report command gives every command's, gluonperf.report.kinds())."""
    import jinja2
    env = jinja2.Environment(loader=jinja2.PackageLoader("gluonperf.render", "templates"),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    changes, regressions = None, 0
    page = [("Machine and environment", [environment_section(runs)])]
    if old_runs is not None:
        block, changes, regressions = compare_section(old_runs, runs, threshold, metric, old_label)
        page.append(("Change against %s" % old_label, [block]))
    page += sections(runs, kinds)
    view = [{"id": "s%d" % number, "title": section_title, "blocks": [block_view(b, changes) for b in blocks]}
            for number, (section_title, blocks) in enumerate(page)]
    records = sum(len(pairs) for _, pairs in runs)
    html = env.get_template("report.html.j2").render(
        title=title, sections=view, files=[p for p, _ in runs], records=records, skipped=list(skipped),
        generated=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        regressions=regressions, threshold=threshold, old_label=old_label)
    return html, regressions


def block_view(b, changes):
    """What the template needs of a block: formatted tables, and for a run of records the
    change against OLD per row and every field of every record (folded away)."""
    tables = [table(t, changes if b.source else None) for t in b.tables]
    if b.row_classes:
        for row, cls in zip(tables[0]["rows"], b.row_classes):
            row["cls"] = cls
    return {"title": b.title, "source": b.source, "file": os.path.basename(b.source or ""), "reading": b.reading,
            "note": b.note, "figure": b.figure, "code": b.code,
            "tables": tables,
            "all_fields": table(all_fields(list({id(r): r for t in b.tables for r in t.records}.values())))
            if b.source else None}

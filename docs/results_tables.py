"""Render benchmarks/results/ as the tables of docs/measurements.md.

The page's block between `<!-- results:latest -->` and `<!-- /results:latest -->` is
written from the files themselves (and docs/faster_script.md's `<!-- advice:latest -->` block,
from benchmarks/advice.py's files): the training-throughput suite's latest run on each
machine (one table per machine), then every result file by suite and machine, linked. So
the page cannot say what the files do not.

    python docs/results_tables.py            # rewrite the block
    python docs/results_tables.py --check    # exit 1 if the block is not what the files give
"""
import argparse
import collections
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(os.path.dirname(HERE), "benchmarks", "results")
PAGE = os.path.join(HERE, "measurements.md")
NAME = re.compile(r"^(?P<suite>[a-z0-9-]+)_(?P<cpu>[a-z0-9-]+)_(?P<date>\d{4}-\d{2}-\d{2})\.(?P<ext>\w+)$")
MACHINES = {
    "xeon-spr": "2-core Intel Xeon (Sapphire Rapids class; AVX-512, AMX)",
    "xeon-emr": "2-core Intel Xeon (family 6 model 207, Emerald Rapids class; AVX-512, AMX not exposed)",
    "epyc-zen3": "2-core AMD EPYC (family 25 model 1, Zen 3; AVX2)",
    "epyc-zen4": "2-core AMD EPYC (family 25 model 17, Zen 4; AVX-512)",
    "epyc-zen5": "2-core AMD EPYC (family 26 model 2, Zen 5; AVX-512)",
    "epyc": "2-core AMD EPYC (AVX-512; shared with other jobs)",
}
LINK = "../benchmarks/results/"


def files():
    """{suite: {cpu: [file, ...]}} of the files that follow the name scheme; and the others."""
    named, others = collections.defaultdict(lambda: collections.defaultdict(list)), []
    for f in sorted(os.listdir(RESULTS)):
        m = NAME.match(f)
        if m:
            named[m["suite"]][m["cpu"]].append(f)
        else:
            others.append(f)
    return named, others


def _range(r, key, fmt):
    low, high = r.get(key + "_min"), r.get(key + "_max")
    if r.get(key) is None:
        return "-"
    text = fmt % r[key]
    return text + (" (" + fmt % low + "-" + fmt % high + ")" if low is not None and high is not None else "")


def throughput_table(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    out = ["| batch | run | images/s (min-max) | vs the book's loop | vs PyTorch | of the ceiling | rounds |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in sorted(rows, key=lambda r: (r.get("batch_size", 0), -(r.get("ratio") or 0))):
        if r.get("error"):
            continue
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r.get("batch_size", "-"), r["name"].replace("|", "/"),
            _range(dict(r, images_per_s_min=r.get("min_per_s"), images_per_s_max=r.get("max_per_s")),
                   "images_per_s", "%.1f"),
            _range(r, "ratio", "%.2fx"), _range(r, "vs_pytorch", "%.2fx"),
            _range(dict(r, of_ceiling=None if r.get("of_ceiling") is None else 100 * r["of_ceiling"],
                        of_ceiling_min=None if r.get("of_ceiling_min") is None else 100 * r["of_ceiling_min"],
                        of_ceiling_max=None if r.get("of_ceiling_max") is None else 100 * r["of_ceiling_max"]),
                   "of_ceiling", "%.0f%%"),
            r.get("rounds", "-")))
    return out


def render():
    named, others = files()
    out = ["### Training throughput, the latest run on each machine", "",
           "`python benchmarks/train_throughput.py --batch-sizes 64,128 --rounds 3 --steps 12`, "
           "from a clean environment; ratios are medians of per-round ratios, with their min-max. "
           "Only the `xeon-emr` run measured the ceiling in every round (`of the ceiling`).", ""]
    for cpu, fs in sorted(named.get("train-throughput", {}).items()):
        for f in fs:
            if f.endswith(".jsonl"):
                date = NAME.match(f)["date"]
                out += ["#### %s, %s" % (MACHINES.get(cpu, cpu), date), "",
                        "[%s](%s%s)" % (f, LINK, f), ""] + throughput_table(os.path.join(RESULTS, f)) + [""]
    out += inference_section(named)
    out += ["### Every result file, by suite and machine", "",
            "| suite | machine | files |", "| --- | --- | --- |"]
    for suite in sorted(named):
        for cpu in sorted(named[suite]):
            out.append("| %s | `%s` | %s |" % (suite, cpu, ", ".join(
                "[%s](%s%s)" % (f.rsplit(".", 1)[1], LINK, f) for f in named[suite][cpu])))
    out += [""]
    if others:
        out += ["Files not named `<suite>_<cpu>_<date>`: " + ", ".join("[%s](%s%s)" % (f, LINK, f) for f in others)
                + ".", ""]
    return "\n".join(out)


INFERENCE_VS = (("vs_pytorch_eager", "PyTorch eager"), ("vs_pytorch_compile", "torch.compile"),
                ("vs_pytorch_int8", "PyTorch INT8"))


def inference_section(named):
    """benchmarks/inference.py's latest run on each machine: gluonperf's best rung of each model
    and scenario against each PyTorch system (nothing while no such file exists)."""
    out = []
    for cpu, fs in sorted(named.get("inference", {}).items()):
        path = [f for f in fs if f.endswith(".jsonl")][-1:]
        if not path:
            continue
        rows = [json.loads(l) for l in open(os.path.join(RESULTS, path[0])) if l.strip()]
        best = [r for r in rows if r.get("best")]
        if not out:
            out += ["### Inference against PyTorch, the latest run on each machine", "",
                    "`python benchmarks/inference.py`: each model served under MLPerf's LoadGen (single-stream: "
                    "p90 of one-sample queries; offline: samples/s), gluonperf's best precision rung against "
                    "PyTorch eager, torch.compile and PyTorch's x86 INT8, every system one instance over all the "
                    "cores, interleaved round by round; ratios are geometric means of the per-round ratios with "
                    "their 95% interval (above 1: gluonperf faster).", ""]
        out += ["#### %s, %s" % (MACHINES.get(cpu, cpu), NAME.match(path[0])["date"]), "",
                "[%s](%s%s)" % (path[0], LINK, path[0]), "",
                "| model | scenario | gluonperf's best rung | its figure | %s | rounds | LoadGen |"
                % " | ".join("vs %s" % label for _, label in INFERENCE_VS),
                "| --- | --- | --- | --- | %s | --- | --- |" % " | ".join("---" for _ in INFERENCE_VS)]
        for r in best:
            figure = ("p90 %.3g ms" % (1e3 * r["p90_s"]) if r["scenario"] == "single-stream" else
                      "%.4g samples/s" % r["samples_per_s"])
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                r["model"], r["scenario"], r["precision"], figure,
                " | ".join(_vs_cell(r, key) for key, _ in INFERENCE_VS), r.get("rounds", "-"),
                "valid" if r.get("loadgen_valid") else "INVALID"))
        out.append("")
        out += every_rung_table(rows)
    return out


def _pytorch_best(rows, model, scenario):
    """(vs key, label) of the PyTorch system with the best median figure in `model`'s `scenario`, or None."""
    theirs = [r for r in rows if r.get("model") == model and r.get("scenario") == scenario
              and str(r.get("precision", "")).startswith("pytorch ") and r.get(r.get("primary_metric", "")) is not None]
    if not theirs:
        return None
    lower = scenario != "offline"  # latency: lower is better; samples/s: higher
    best = min(theirs, key=lambda r: r[r["primary_metric"]] * (1 if lower else -1))
    kind = best["precision"].split(" ", 1)[1]
    return "vs_pytorch_" + kind, dict(INFERENCE_VS).get("vs_pytorch_" + kind, best["precision"])


def every_rung_table(rows):
    """Every gluonperf rung of the run against PyTorch's best system of its model and scenario (the
    one with the best median figure): how far each rung is from it, not only the best one."""
    out = []
    for model, scenario in sorted({(r["model"], r["scenario"]) for r in rows if r.get("scenario")},
                                   key=lambda k: (k[0], k[1] != "single-stream")):
        best = _pytorch_best(rows, model, scenario)
        ours = [r for r in rows if r.get("model") == model and r.get("scenario") == scenario
                and best and r.get(best[0]) is not None]
        if not ours:
            continue
        out += ["Every rung of %s %s against PyTorch's best there, %s:" % (model, scenario, best[1]), "",
                "| rung | its figure | vs %s |" % best[1], "| --- | --- | --- |"]
        for r in sorted(ours, key=lambda r: -r[best[0]]):
            figure = ("p90 %.3g ms" % (1e3 * r["p90_s"]) if scenario == "single-stream" else
                      "%.4g samples/s" % r["samples_per_s"])
            out.append("| %s | %s | %s |" % (r["precision"], figure, _vs_cell(r, best[0])))
        out.append("")
    return out


def _vs_cell(r, key):
    if r.get(key) is None:
        return "-"
    return "%.2fx (%.2f-%.2f), %s" % (r[key], r[key + "_ci_low"], r[key + "_ci_high"], r.get(key + "_verdict", "-"))


ADVICE_PAGE = os.path.join(HERE, "faster_script.md")


def advice_tables():
    """The latest benchmarks/advice.py run on each machine: each script's recipe, what was applied
    by hand, and the script as written against the recipe applied."""
    named, _ = files()
    out = []
    for cpu, fs in sorted(named.get("advice", {}).items()):
        path = [f for f in fs if f.endswith(".jsonl")][-1:]
        if not path:
            continue
        rows = [json.loads(l) for l in open(os.path.join(RESULTS, path[0])) if l.strip()]
        checks = [r for r in rows if r.get("bench") == "advice-check"]
        out += ["### %s, %s" % (MACHINES.get(cpu, cpu), NAME.match(path[0])["date"]), "",
                "[%s](%s%s): `python benchmarks/advice.py`; the ratio is the recipe applied against the script "
                "as written, interleaved, over %s rounds" % (path[0], LINK, path[0],
                                                            "/".join(sorted({str(r["rounds"]) for r in checks}))), "",
                "| script | tune's recipe | tune took | applied by hand | as written -> applied (interval) | verdict |",
                "| --- | --- | --- | --- | --- | --- |"]
        for r in checks:
            recipe = [_advice_cell(a) for a in rows if a.get("bench") == "advice-of-" + r["script"]
                      and a.get("lever") != "run"]
            out.append("| `%s` | %s | %s | %s | %.2fx (%.3g%% CI %.2f-%.2f) | %s |" % (
                r["script"], "<br>".join(recipe) or "-", _took(r.get("tune_wall_s"), r.get("tune_runs")),
                ", ".join(r["applied"]) or "nothing", r["ratio"], 100 * r["ratio_level"], r["ratio_ci_low"],
                r["ratio_ci_high"], r["verdict"]))
        slow = [r for r in checks if r.get("exhaustive_recipe") is not None]
        if slow:
            out += ["", "The same scripts tuned with `--rounds exhaustive` (every candidate until its interval is "
                    "within ±5%), once, on the same machine:", "",
                    "| script | default (`--rounds auto`) recommends | exhaustive recommends | exhaustive took | "
                    "same changes |", "| --- | --- | --- | --- | --- |"]
            for r in slow:
                out.append("| `%s` | %s | %s | %s | %s |" % (
                    r["script"], _changes(r.get("recommended")), _changes(r["exhaustive_recipe"]),
                    _took(r.get("exhaustive_wall_s"), r.get("exhaustive_runs")), "yes" if r["same_changes"] else "no"))
        out.append("")
    return "\n".join(out)


def _took(wall_s, runs):
    """'4 min 38 s, 63 runs', or '-' for a run that did not record it."""
    if not wall_s:
        return "-"
    return "%d min %02d s, %s runs" % (wall_s // 60, wall_s % 60, runs)


def _changes(recommended):
    """A recipe's changes ({lever: settings}) in a cell."""
    return "<br>".join("%s: `%s`" % kv for kv in sorted((recommended or {}).items())) or "nothing"


def _advice_cell(a):
    """One advice record of tune's recipe, short: the lever and its measured ratio, or a wait's cost."""
    if a["lever"] == "wait":
        return "wait at `%s`: %.0f%% of the step, to try" % (a["where"].rsplit("/", 1)[-1], 100 * a["blocked_share"])
    if a["lever"] == "none":
        return a["change"].split(":")[0]  # "no change pays here", or "... shown to pay within the budget"
    if a["lever"] == "unreached":
        return "not reached: %s" % ", ".join(a["levers"])
    if a["lever"] == "unsettled":
        return "not settled: %s %.2fx, about %d more rounds" % (a["of"], a["ratio"], a["rounds_needed"] - a["ratio_n"])
    if a.get("ratio") is None:  # kept changes the budget could not confirm together
        return "%s: %s" % (a["lever"], a.get("verdict_text") or a.get("verdict"))
    return "%s: %.2fx (%g%% CI %.2f-%.2f, %s rounds), %s" % (
        a["lever"], a["ratio"], 100 * (a.get("ratio_joint_level") or a.get("ratio_level") or 0.95), a["ratio_ci_low"],
        a["ratio_ci_high"], a.get("rounds"), a["verdict"])


def _rewrite(page_path, marker, text, check):
    """Put `text` between the page's `<!-- marker -->` and `<!-- /marker -->`; with `check`, only
    say whether it is there already. Returns 0, 1 (out of date) or 2 (no such block)."""
    page = open(page_path).read()
    block = re.compile(r"(<!-- %s -->\n).*?(<!-- /%s -->)" % (marker, marker), re.S)
    if not block.search(page):
        print("docs/results_tables.py: %s has no <!-- %s --> block" % (page_path, marker), file=sys.stderr)
        return 2
    new = block.sub(lambda m: m.group(1) + text + "\n" + m.group(2), page)
    if check:
        if new != page:
            print("%s is out of date: run python docs/results_tables.py" % page_path, file=sys.stderr)
            return 1
        return 0
    with open(page_path + ".tmp", "w") as f:
        f.write(new)
    os.replace(page_path + ".tmp", page_path)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="python docs/results_tables.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 if the page's block is not up to date")
    args = p.parse_args(argv)
    return max(_rewrite(PAGE, "results:latest", render(), args.check),
               _rewrite(ADVICE_PAGE, "advice:latest", advice_tables(), args.check))


if __name__ == "__main__":
    sys.exit(main())

"""python -m gluonperf.report: one self-contained HTML page of real results.

The inputs are real outputs of several commands at tiny sizes, made once for the module."""
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser

import pytest

from helpers import ROOT, clean_env, run_module, shared_run
from gluonperf.cli import common as cli
from gluonperf import bench, report
from gluonperf.render import kinds
from gluonperf.render.page import render_page
from gluonperf.records import Result, read_jsonl, write_jsonl

# Every bench subcommand the report draws, as its quick run (gluonperf.bench: QUICK), and the
# other commands whose kinds it draws.
COMMANDS = {m.NAME: ["gluonperf.bench", m.NAME, *m.QUICK] for m in bench.SUBCOMMANDS if hasattr(m, "section")}
COMMANDS.update({
    "train": ["gluonperf.train", "--dataset", "digits", "--model", "lenet", "--epochs", "1", "--limit", "256",
              "--batch-size", "32"],
    "scaling": ["gluonperf.train", "--scaling", "--dataset", "digits", "--model", "lenet", "--ctx", "cpu0,cpu1",
                "--steps", "2", "--batch-size", "32", "--limit", "256"],
    "profile": ["gluonperf.profile", "--model", "mlp", "--batch-size", "16", "--steps", "2", "--warmup", "1",
                "--ceiling", "quick"],
    "predict": ["gluonperf.predict", "--model", "lenet", "--t1", "0.01", "--per-device-batch", "32", "--devices", "1,2",
                "--machines", "1,2", "--link", "pcie3", "--network", "25gbe"],
})
# The runs tests/test_commands.py makes with the same argv (here parallel's also writes a trace,
# and scaling runs on cpu0,cpu1)
SHARED = [name for name in COMMANDS if name not in ("parallel", "scaling", "profile", "predict")]
KINDS = report.kinds()  # what the report command draws with: every command's kinds
# Real suite and tune outputs of this machine, as saved in the repository.
SAVED = ["train-throughput-b64-b128_epyc_2026-11-21.jsonl", "train-throughput-b64-b128_xeon-spr_2026-11-22.jsonl",
         "tune-b128_epyc_2026-11-21.jsonl", "profile-1ctx-b64-bf16_xeon-spr_2026-11-22.jsonl"]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1200,2000", "--enable-logging=stderr", "--v=0"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder: every command's --json output (four commands at a time), the
    parallel run's profiler trace (which the report must skip), and two saved suites. The runs
    tests/test_commands.py makes too (the same argv) are made once in the session (shared_run)."""
    folder = tmp_path_factory.mktemp("results")

    def run(item):
        name, argv = item
        if name in SHARED:
            p, out = shared_run(tmp_path_factory, argv)
            shutil.copy(out, folder / (name + ".json"))
            return name, p
        extra = ["--trace", str(folder / "trace.json")] if name == "parallel" else []
        return name, run_module(*argv, "--json", str(folder / (name + ".json")), *extra, timeout=240)

    with ThreadPoolExecutor(max_workers=4) as pool:  # async mostly waits
        for name, p in pool.map(run, COMMANDS.items()):
            assert p.returncode == 0, "%s: %s" % (name, p.stderr)
    os.makedirs(folder / "suites")
    for f in SAVED:
        shutil.copy(os.path.join(ROOT, "benchmarks", "results", f), folder / "suites" / f)
    return folder


def records_in(folder):
    out = []
    for root, _, files in os.walk(folder):
        for f in sorted(files):
            if f.endswith((".json", ".jsonl")) and f != "trace.json":
                out += [r for r, _ in read_jsonl(os.path.join(root, f))]
    return out


class Page(HTMLParser):
    """What the tests look at: tags, link targets, headings, table cells, readings, and the
    rows of the folded 'every field' tables (one per record)."""

    def __init__(self, text):
        super().__init__()
        self.tags, self.refs, self.h2, self.cells, self.readings, self.row_classes = [], [], [], [], [], []
        self.detail_rows = 0
        self._in, self._details, self._body, self._text = None, 0, False, []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        self.refs += [v for k, v in attrs.items() if k in ("src", "href", "xlink:href", "data", "action") and v]
        if tag == "details":
            self._details += 1
        if tag == "tbody":
            self._body = True
        if tag == "tr" and self._body:
            self.row_classes.append(attrs.get("class", ""))
            if self._details:
                self.detail_rows += 1
        if tag in ("h2", "td") or (tag == "p" and attrs.get("class") == "reading"):
            self._in, self._text = tag, []

    def handle_endtag(self, tag):
        if tag == "details":
            self._details -= 1
        if tag == "tbody":
            self._body = False
        if self._in and tag in ("h2", "td", "p"):
            text = "".join(self._text).strip()
            {"h2": self.h2, "td": self.cells, "p": self.readings}[self._in].append(text)
            self._in = None

    def handle_data(self, data):
        if self._in:
            self._text.append(data)


@pytest.fixture(scope="module")
def made(results, tmp_path_factory):
    """The report of the results folder, made once as users make it: (path, process)."""
    out = tmp_path_factory.mktemp("report") / "report.html"
    return out, run_module("gluonperf.report", str(results), "-o", str(out), timeout=120)


def test_report_of_real_outputs_is_self_contained_and_holds_every_record(results, made):
    out, p = made
    assert p.returncode == 0, p.stderr
    records = records_in(results)
    assert "wrote %s: %d records from %d files" % (out, len(records), len(COMMANDS) + len(SAVED)) in p.stdout
    assert "skipped %s" % (results / "trace.json") in p.stderr  # a profiler trace is not results
    text = out.read_text()
    page = Page(text)
    # the saved bfloat16 profile is held against its own ceiling, the command's float32 one against float32's
    assert "peak bfloat16 FLOP/s" in text and "peak float32 FLOP/s" in text
    # one row per record in the folded tables, and every record's name in a table cell
    assert page.detail_rows == len(records)
    assert {r.name for r in records} <= set(page.cells)
    # nothing fetched: no script, no stylesheet link, no external reference anywhere
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert all(ref.startswith("#") for ref in page.refs), page.refs
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text)
    assert not re.search(r"url\((?!#)|@import", text)  # only the SVGs' own clip paths, url(#id)
    # sections in the order a reader needs them, each kind drawn (an SVG each) and read
    order = ["Machine and environment", "Hybridize", "Asynchronous", "Memory", "Two devices", "Computation and",
             "Allreduce", "Training", "Scaling", "Profile", "Throughput suites", "Memory of a training step",
             "Predicted scaling"]
    positions = [next(i for i, h in enumerate(page.h2) if h.startswith(o)) for o in order]
    assert positions == sorted(positions)
    assert page.tags.count("svg") >= len(order) - 1
    assert not any(h.startswith("Other records") for h in page.h2)
    readings = " | ".join(page.readings)
    with open("/proc/cpuinfo") as f:  # the machine's name, as the commands recorded it (lscpu's Model name)
        model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    assert model in readings and "%d cores" % os.cpu_count() in readings
    # hybridize: the fastest mode's reading (at 5 calls per mode, on a busy machine imperative can win),
    # its speed-up with its interval (one repeat: unknown) and n
    assert re.search(r"(imperative|hybrid|static) against imperative: [0-9.]+x \((1 repeat: too few for an "
                     r"interval|no interval recorded)\) the speed", readings), readings
    # no ratio or speed-up is stated bare: every one is followed by its interval (or says it has none)
    assert not re.search(r"[0-9.]+x (as fast|the speed|the defaults|the images/s|PyTorch|as long)", readings)
    assert "crossover" in readings or "async still gains" in readings  # async
    assert "epoch 1: test top-1" in readings  # train
    assert "on 2 devices:" in readings and "efficiency" in readings  # scaling
    assert "of the copyto ceiling" in readings  # allreduce
    # tune's saved winner, a product of per-lever medians: no interval, and the page says so
    assert "best at batch 128: 1.52x (no interval recorded) the defaults" in readings
    # the suite's fastest run per batch size, against the book loop and, round by round, PyTorch: a
    # saved run of 3 rounds has min..max, labelled with its level as an interval of the median (75%)
    assert "train_throughput b64: gluonperf.train runs 2.26x (min..max 2.15..2.28: 75% for 3 rounds) as fast " \
           "as book loop, 1.24x (min..max 1.15..1.26: 75% for 3 rounds) PyTorch" in readings
    assert "vs pytorch CI" in text and "min..max 1.15..1.26 (75%, n=3)" in page.cells
    assert re.search(r"of the ceiling \([0-9.]+ GFLOP/s", readings)  # profile's verdict
    assert "least memory per sample: " in readings and "the plain step's memory at" in readings  # footprint
    assert re.search(r"largest batch within 2 MiB for hybrid: [0-9]+", readings)  # footprint's QUICK --budget
    assert re.search(r"4 devices \(2x2\): efficiency [0-9.]+", readings) and "at efficiency >= 0.8" in readings
    assert "not drawn" not in text


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render_in_chromium(html, workdir):
    """Load `html` in headless Chromium; (screenshot path, console lines)."""
    shot = os.path.join(str(workdir), "shot.png")
    p = subprocess.run([chromium(), *CHROMIUM_FLAGS, "--user-data-dir=%s" % os.path.join(str(workdir), "profile"),
                        "--screenshot=%s" % shot, "file://%s" % os.path.abspath(str(html))],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert p.returncode == 0, p.stderr[-2000:]
    return shot, [line for line in p.stderr.splitlines() if ":CONSOLE" in line]


def test_only_the_stand_in_experiments_keep_freed_memory(results):
    """gluonperf.runtime.allocator: bench overlap, parallel and allreduce (CPU contexts standing in for
    devices) keep glibc from giving memory back; the commands that measure memory never do."""
    def marks(name):
        return {r["env"]["env"].get("GLUONPERF_MALLOC") for r in map(json.loads, open(results / (name + ".json")))}
    for name in ("overlap", "parallel", "allreduce"):
        assert marks(name) == {"kept"}, name
    for name in ("memory", "footprint", "train", "hybridize", "async"):
        assert marks(name) == {None}, name


def test_chromium_renders_the_report_without_console_errors(made, tmp_path):
    if not chromium():
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium); "
                    "the browser check of the report is skipped")
    out, p = made
    assert p.returncode == 0, p.stderr
    shot, console = render_in_chromium(out, tmp_path / "good")
    assert console == []
    from PIL import Image  # matplotlib's own dependency
    image = Image.open(shot)
    assert image.size == (1200, 2000)
    assert len(image.convert("RGB").getcolors(1 << 20) or []) > 50  # text and plots, not a blank page
    # the console check can fail: a page with a script error is caught
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><title>x</title><script>console.error('broken')</script>")
    assert any("broken" in line for line in render_in_chromium(bad, tmp_path / "bad")[1])


def _scaled(src, dst, field, factor):
    rows = read_jsonl(src)
    write_jsonl([Result(r.bench, r.name, dict(r.metrics, **({field: r.metrics[field] * factor}
                                                           if field in r.metrics else {})))
                 for r, _ in rows], dst, rows[0][1])


def test_compare_marks_regressions_with_compares_matching(results, tmp_path, capsys):
    old = tmp_path / "old"
    old.mkdir()
    # 4x: one run a side is judged with compare's run-to-run noise floor, which hides a 2x change
    _scaled(results / "hybridize.json", old / "hybridize.json", "samples_per_s", 4.0)  # new is 4x slower
    _scaled(results / "train.json", old / "train.json", "train_images_per_s", 0.25)  # new is 4x faster
    out = tmp_path / "report.html"
    with pytest.raises(SystemExit) as exit:
        cli.run(report.main, report.PROG, [str(results / "hybridize.json"), str(results / "train.json"),
                                           "--compare", str(old), "--threshold", "20%", "-o", str(out)])
    assert exit.value.code == 0
    assert "3 regression(s) past 20%% against %s" % old in capsys.readouterr().out
    page = Page(out.read_text())
    assert "Change against %s" % old in page.h2
    assert page.row_classes.count("regression") == 2 * 3  # the comparison table and the hybridize table
    assert page.row_classes.count("improved") == 2
    assert any(c.startswith("+300.0% train_images_per_s (improved)") for c in page.cells)
    assert any(c.startswith("-75.0% samples_per_s (regression)") for c in page.cells)


def test_unknown_kinds_and_unreadable_shapes_fall_to_the_generic_table():
    env = {"mxnet": "1.9.1", "cpu_count": 2, "cpu_model": "Test CPU", "env": {"OMP_NUM_THREADS": "2"}}
    runs = [("a.json", [(Result("profile-breakdown", "forward", {"share": 0.4}), env),
                        (Result("hybridize", "imperative", {"median_s": 1.0}), env),  # no speedup: old shape
                        (Result("hybridize_suite", "book loop", {"model": "mlp", "task": "forward", "batch_size": 1,
                                                                 "median_s": 2e-3, "ratio": 1.0}), env),
                        (Result("hybridize_suite", "gluonperf static", {"model": "mlp", "task": "forward",
                                                                        "batch_size": 1, "median_s": 1e-3,
                                                                        "ratio": 2.0}), env)]
             + [(Result("scratch", "epoch %d" % e, {"epoch": e, "time_s": 0.3, "images_per_s": 1900.0 + e,
                                                      "train_loss": 2.0 / e, "test_acc": 0.2 * e,
                                                      "contexts": "cpu(0),cpu(1)", "method": "book"}), env)
                for e in (1, 2)])]
    html, regressions = render_page(runs, "t", kinds=KINDS)
    page = Page(html)
    assert regressions == 0
    assert page.h2[-1].startswith("Other records") and "forward" in page.cells and "0.4" in page.cells
    assert "imperative" in page.cells and "not drawn: the records do not have the shape" in html
    assert "best against the book's loop (highest lower end of the interval): mlp forward b1: gluonperf static " \
           "2.00x (no interval recorded)" in page.readings
    assert "epoch 2: test accuracy 0.4, 1902 images/s" in page.readings  # scratch, drawn
    assert page.detail_rows == 6 and html.count("<svg") == 2  # the suite's plot and scratch's
    assert any("one machine: Test CPU, 2 cores" in r for r in page.readings)


def test_the_throughput_suites_ceiling_is_a_yardstick_not_its_fastest_run():
    """benchmarks/train_throughput.py's ceiling row has the highest ratio to the book loop; the
    reading names the fastest run, with its share of the ceiling measured round by round."""
    env = {"mxnet": "1.9.1", "cpu_count": 2, "cpu_model": "Test CPU", "env": {}}

    def row(name, rank, ratio, share, runner="gluonperf.train"):
        return (Result("tune", name, {"lever": "train_throughput b64", "batch_size": 64, "rank": rank,
                                      "images_per_s": 40.0 * ratio, "ratio": ratio, "ratio_min": ratio ** 0.9,
                                      "ratio_max": ratio ** 1.1, "of_ceiling": share, "of_ceiling_min": share - 0.05,
                                      "of_ceiling_max": share + 0.05, "runner": runner}), env)
    runs = [("tt.json", [row("ceiling (peak FLOP/s over FLOPs per image)", 1, 3.0, 1.0, "benchmarks/ceiling_probe.py"),
                         row("gluonperf.train", 2, 2.1, 0.7), row("book loop", 3, 1.0, 0.33, "benchmarks/book_loop.py")])]
    html = render_page(runs, "t")[0]
    page = Page(html)
    assert "train_throughput b64: gluonperf.train runs 2.10x (min..max 1.95..2.26: level unknown) as fast as book " \
           "loop, 70% (min..max 65%..75%: level unknown) of the ceiling" in page.readings
    assert "of ceiling CI" in html and "min..max 65%..75% (level unknown)" in page.cells and "33%" in page.cells


def _error(capsys, *argv):
    with pytest.raises(SystemExit) as exit:
        cli.run(report.main, report.PROG, list(argv))
    err = capsys.readouterr().err.strip()
    assert exit.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line_and_writes_nothing(results, tmp_path, capsys):
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(results / "train.json", folder / "train.json")
    (folder / "broken.json").write_text('{"bench": "train", "name": "epoch 1"}\nnot json\n')
    out = tmp_path / "report.html"
    assert "broken.json is not JSON lines" in _error(capsys, str(folder), "-o", str(out))
    assert "does not exist" in _error(capsys, str(tmp_path / "nowhere.json"), "-o", str(out))
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no JSON-lines results" in _error(capsys, str(empty), "-o", str(out))
    assert "is a directory" in _error(capsys, str(results / "train.json"), "-o", str(tmp_path))
    assert "OLD file" in _error(capsys, str(results / "train.json"), "--compare", str(folder / "broken.json"),
                                "-o", str(out))
    assert not out.exists() and not [f for f in os.listdir(tmp_path) if f.startswith(".tmp-")]
    # and as users run it: a subprocess, one line, exit 2, nothing written
    p = run_module("gluonperf.report", str(folder), "-o", str(out), timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "broken.json" in p.stderr
    assert not out.exists()


def test_report_runs_without_mxnet(results, tmp_path):
    out = tmp_path / "r.html"
    code = ("import sys; from gluonperf import report; report.main([%r, '-o', %r]); "
            "assert 'mxnet' not in sys.modules, 'mxnet was imported'" % (str(results / "train.json"), str(out)))
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean_env(), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "train" in {json.loads(line)["bench"] for line in open(results / "train.json")} and out.exists()


def test_predict_checks_alone_are_drawn_as_errors():
    """`predict --validate` writes only checks: the block reads how many came within 25%."""
    env = {"mxnet": "1.9.1", "cpu_count": 2, "cpu_model": "Test CPU", "env": {}}
    checks = [Result("predict-check", "device devices=%d" % d, {
        "scheme": "device", "devices": d, "predicted_step_s": 0.02, "measured_step_s": 0.02 / (1 + e),
        "predicted_images_per_s": 3200.0, "measured_images_per_s": 3200.0 * (1 + e), "error": e,
        "within_25pct": abs(e) <= 0.25, "model": "lenet"}) for d, e in ((1, 0.05), (2, -0.3))]
    html, _ = render_page([("v.json", [(c, env) for c in checks])], "t")
    page = Page(html)
    assert "checked against runs here: within 25% in 1 of 2 (errors -30%..5%; one measured run each, no " \
           "interval)" in " | ".join(page.readings)
    assert html.count("<svg") == 1 and not any(h.startswith("Other records") for h in page.h2)


ENV = {"mxnet": "1.9.1", "cpu_count": 2, "cpu_model": "Test CPU", "env": {}}


def _suite_row(name, rank, ratio, runner="gluonperf.train", **fields):
    m = {"lever": "train_throughput b64", "batch_size": 64, "rank": rank, "images_per_s": 40.0 * ratio,
         "ratio": ratio, "rounds": 5, "runner": runner}
    m.update(fields)
    return Result("tune", name, m)


def test_every_ratio_of_the_suites_and_tune_carries_its_interval_n_and_verdict():
    """New records: each ratio with its interval fields (stats.Interval.fields) and verdict
    (stats.Verdict.fields): the reading and the table state them, never a bare ratio."""
    rows = [_suite_row("gluonperf.train", 1, 2.1, ratio_ci_low=1.95, ratio_ci_high=2.26, ratio_n=5, ratio_level=0.95,
                       verdict="faster", vs_pytorch=1.02, vs_pytorch_ci_low=0.9, vs_pytorch_ci_high=1.16,
                       vs_pytorch_n=5, vs_pytorch_level=0.95, vs_pytorch_verdict="inconclusive",
                       vs_pytorch_rounds_needed=31, vs_torch_compile=0.8, vs_torch_compile_ci_low=0.75,
                       vs_torch_compile_ci_high=0.85, vs_torch_compile_n=5, vs_torch_compile_level=0.95,
                       vs_torch_compile_verdict="slower", of_ceiling=0.7, of_ceiling_ci_low=0.65,
                       of_ceiling_ci_high=0.75, of_ceiling_n=5, of_ceiling_level=0.95),
            _suite_row("book loop", 2, 1.0, "benchmarks/book_loop.py", verdict="baseline")]
    html = render_page([("tt.json", [(r, ENV) for r in rows])], "t")[0]
    page = Page(html)
    assert ("train_throughput b64: gluonperf.train runs 2.10x (95% CI 1.95-2.26, 5 rounds) as fast as book loop "
            "(faster), 1.02x (95% CI 0.90-1.16, 5 rounds) PyTorch (inconclusive; about 31 rounds would settle it), "
            "0.80x (95% CI 0.75-0.85, 5 rounds) torch.compile (slower), 70% (95% CI 65%-75%, 5 rounds) of the "
            "ceiling") in page.readings
    assert {"1.95-2.26 (95%, n=5)", "0.75-0.85 (95%, n=5)", "65%-75% (95%, n=5)", "faster", "slower"} <= set(page.cells)
    assert "min..max" not in html


def test_tunes_confirmed_speedup_and_kept_defaults_are_read_with_their_interval():
    best = Result("tune", "best", {"lever": "all", "batch_size": 64, "speedup": 1.3, "speedup_ci_low": 1.1,
                                   "speedup_ci_high": 1.5, "speedup_n": 6, "speedup_level": 0.95,
                                   "verdict": "faster", "command": "OMP_NUM_THREADS=2 python -m gluonperf.train",
                                   "warnings": []})
    kept = Result("tune", "best", {"lever": "all", "batch_size": 128, "speedup": 1.0, "verdict": "defaults",
                                   "verdict_text": "no lever beat its baseline: the defaults stay", "command": "x",
                                   "warnings": []})
    lever = Result("tune", "OMP_NUM_THREADS=2", {"lever": "threads", "batch_size": 64, "rank": 1, "ratio": 1.2,
                                                 "ratio_ci_low": 0.9, "ratio_ci_high": 1.6, "ratio_n": 3,
                                                 "ratio_level": 0.975, "verdict": "inconclusive"})
    html = render_page([("t.json", [(r, ENV) for r in (lever, best, kept)])], "t")[0]
    readings = " | ".join(Page(html).readings)
    assert ("best at batch 64: 1.30x (95% CI 1.10-1.50, 6 rounds) the defaults (faster) with OMP_NUM_THREADS=2 "
            "python -m gluonperf.train") in readings
    assert "best at batch 128: no lever beat its baseline: the defaults stay" in readings
    assert "0.90-1.60 (97.5%, n=3)" in Page(html).cells  # a level corrected for the candidates, as recorded


def test_hybridize_and_concurrency_speedups_are_read_with_their_interval():
    def timed(name, median, **fields):
        return Result("hybridize", name, dict({"model": "mlp", "task": "forward", "batch_size": 1, "ctx": "cpu(0)",
                                               "median_s": median, "iqr_s": 0.0}, **fields))
    hyb = [timed("imperative", 2e-3, speedup=1.0, verdict="baseline"),
           timed("static", 1e-3, speedup=2.0, speedup_ci_low=1.8, speedup_ci_high=2.2, speedup_n=7,
                 speedup_level=0.95, verdict="faster"),
           timed("hybrid", 0.9e-3, speedup=2.2, speedup_ci_low=0.5, speedup_ci_high=9.0, speedup_n=7,
                 speedup_level=0.95, verdict="inconclusive")]
    both = Result("parallel", "both at once", {"n": 64, "devices": "cpu(0),cpu(1)", "median_s": 1.0, "gain": 1.5,
                                               "gain_ci_low": 1.3, "gain_ci_high": 1.7, "gain_n": 4,
                                               "gain_level": 0.95, "verdict": "faster"})
    alone = [Result("parallel", n, {"median_s": 0.75}) for n in ("cpu(0) alone", "cpu(1) alone")]
    q = Result("async", "dot(x, x).sum() queued", {"size": 64, "median_s": 1e-5, "samples_s": [1e-5, 2e-5, 1e-5]})
    f = Result("async", "then until y is ready", {"size": 64, "median_s": 1e-3, "ratio_to_queued": 100.0,
                                                  "samples_s": [1e-3, 2.2e-3, 0.9e-3]})
    runs = [("h.json", [(r, ENV) for r in hyb]), ("p.json", [(r, ENV) for r in alone + [both]]),
            ("a.json", [(q, ENV), (f, ENV)])]
    readings = " | ".join(Page(render_page(runs, "t", kinds=KINDS)[0]).readings)
    # the fastest is the one whose interval's lower end is highest, not the highest estimate
    assert "static against imperative: 2.00x (95% CI 1.80-2.20, 7 repeats) the speed (faster)" in readings
    assert "both at once: gain 1.50x (95% CI 1.30-1.70, 4 repeats) (faster)" in readings
    # a ratio of medians recorded without an interval is read from the paired per-repeat samples:
    # their geometric mean with its interval
    from gluonperf.measure import stats
    iv = stats.ratio_interval([100.0, 110.0, 90.0])
    assert "finishing y takes %sx (95%% CI %s-%s, 3 repeats) as long as queueing it" % (
        kinds.fixed(iv.estimate), kinds.fixed(iv.low), kinds.fixed(iv.high)) in readings


def test_an_old_record_with_min_max_is_labelled_with_its_level():
    """Files written before intervals: min..max of n rounds is an interval of the median at
    level 1 - 2^(1-n), and the page says which."""
    m = {"ratio": 1.13, "ratio_min": 1.04, "ratio_max": 1.22, "round_ratios": [1.04, 1.13, None, 1.22]}
    assert kinds.with_interval(m, "ratio") == "1.13x (min..max 1.04..1.22: 75% for 3 rounds)"
    m = {"ratio": 1.13, "ratio_min": 1.04, "ratio_max": 1.22, "rounds": 5}
    assert kinds.with_interval(m, "ratio") == "1.13x (min..max 1.04..1.22: 94% for 5 rounds)"
    assert kinds.interval_column("ratio")[1](Result("tune", "x", m)) == "min..max 1.04..1.22 (94%, n=5)"
    assert kinds.with_interval({"ratio": 1.13}, "ratio") == "1.13x (no interval recorded)"
    one = {"ratio": 1.13, "ratio_ci_low": 0.0, "ratio_ci_high": float("inf"), "ratio_n": 1, "ratio_level": 0.95}
    assert kinds.with_interval(one, "ratio") == "1.13x (1 round: too few for an interval)"
    # too wide to read (issue 70, item 5), and a tune candidate's stated at the level its family holds
    wide = dict(one, ratio=0.72, ratio_ci_low=2.27e-16, ratio_ci_high=2.29e15, ratio_n=2, ratio_level=0.9999)
    assert kinds.with_interval(wide, "ratio") == "0.72x (2 rounds: too few for an interval)"
    tuned = dict(one, ratio_ci_low=1.04, ratio_ci_high=1.22, ratio_n=9, ratio_level=0.9987, ratio_joint_level=0.95)
    assert kinds.with_interval(tuned, "ratio") == "1.13x (95% CI 1.04-1.22, 9 rounds)"


@pytest.mark.parametrize("name", [m.NAME for m in bench.SUBCOMMANDS if hasattr(m, "section")])
def test_each_bench_section_shows_its_modules_columns(results, name):
    """The report's block of a bench subcommand shows the COLUMNS its module gives the terminal
    (test_commands checks the terminal's table), an interval in one cell, and a reading."""
    module = bench.BY_NAME[name]
    records = [r for r, _ in read_jsonl(str(results / (name + ".json"))) if r.bench in module.RECORDS]
    block = module.section(records)
    cells = lambda columns: {c if isinstance(c, str) else c[0] for c in columns}  # noqa: E731
    assert cells(kinds.report_columns(module.COLUMNS)) <= cells(block.tables[0].columns)
    assert block.reading

"""Memory over time: is a job leaking? `python -m gluonperf.profile -- python script.py` on three
scripts of tests/user_scripts/ that know nothing of gluonperf, as a user runs it (a subprocess;
no process left), each 400 steps of the same small model:

- epoch_outputs_kept.py keeps every step's output (250 KiB) in a list to score the epoch at its
  end: `grows`, and the line that makes the held outputs is named;
- epoch_correct_on_device.py adds the correct count up on the device instead: `flat`;
- cache_filled_once.py is that twin with 80 MiB put in a cache over 5 steps after the warm-up:
  memory steps up once and stays, which is not a leak.

The verdicts count steps, never seconds: the scripts read their loss every 10 steps, so Python
is never more than 10 steps ahead of the engine, on a machine of any speed.
"""
import json
import os
import sys

import pytest

from helpers import ROOT, run_leaving_nothing

PY = sys.executable
SCRIPTS = os.path.join("tests", "user_scripts")
FAST = ["--depth", "0", "--ceiling", "off"]


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def line_of(script, code):
    """'tests/user_scripts/x.py:36', the line of `code` in the script."""
    path = os.path.join(SCRIPTS, script)
    return "%s:%d" % (path, 1 + open(os.path.join(ROOT, path)).read().splitlines().index(code))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each script profiled with --json: the leak at profile's defaults, the other two without the
    Blocks table and the ceiling (which memory over time does not need)."""
    tmp = tmp_path_factory.mktemp("growth")
    out = {}
    for script, flags in (("epoch_outputs_kept.py", []), ("epoch_correct_on_device.py", FAST),
                          ("cache_filled_once.py", FAST)):
        path = tmp / (script + ".json")
        done = run_leaving_nothing(["-m", "gluonperf.profile", *flags, "--json", str(path), "--",
                                    PY, os.path.join(SCRIPTS, script)])
        out[script] = (done, records(path) if path.exists() else [])
    return out


def growth_of(rows):
    return next(r for r in rows if r["bench"] == "growth" and r["name"] == "memory growth")


def test_outputs_kept_in_a_list_grow_and_the_line_that_makes_them_is_named(runs):
    done, rows = runs["epoch_outputs_kept.py"]
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "epoch done: accuracy" in done.stdout  # the script ran to its end, its output unchanged
    g = growth_of(rows)
    where = line_of("epoch_outputs_kept.py", "        out = net(data)")
    assert g["growth_verdict"] == "grows", g["finding"]
    assert g["growth_bytes_per_step_ci_low"] > g["floor_bytes_per_step"] == 4096
    assert g["growth_bytes_per_step_ci_low"] <= g["growth_bytes_per_step"] <= g["growth_bytes_per_step_ci_high"]
    assert g["steps_run"] == 400 and g["warmup_steps"] >= 80 and g["steps_counted"] >= 300
    assert g["where"] == where and g["held_arrays"] >= g["window_steps"] / 2
    assert 0 < g["steps_to_exhaust"] and g["available_bytes"] > 0
    assert g["finding"] in done.stdout
    advice = [r for r in rows if r["bench"] == "advice" and r["lever"] == "memory"]
    assert len(advice) == 1 and advice[0]["where"] == where and advice[0]["measured"] is False
    finding = next(l for l in done.stdout.splitlines() if l.startswith("finding"))
    assert where in finding and "out = net(data)" in finding  # a finding, not a numbered change


def test_the_correct_count_added_up_on_the_device_is_flat(runs):
    done, rows = runs["epoch_correct_on_device.py"]
    assert done.returncode == 0, done.stderr
    g = growth_of(rows)
    assert g["growth_verdict"] == "flat", g["finding"]
    assert g["growth_bytes_per_step_ci_high"] < 4096
    assert not [r for r in rows if r["bench"] == "advice" and r["lever"] == "memory"]
    assert "finding" not in done.stdout and g["finding"] in done.stdout


def test_a_cache_filled_once_after_the_warm_up_is_not_a_leak(runs):
    done, rows = runs["cache_filled_once.py"]
    assert done.returncode == 0, done.stderr
    assert "80 MiB cached" in done.stdout
    g = growth_of(rows)
    assert g["level_last_bytes"] - g["level_first_bytes"] > 70 * 2 ** 20  # the step is in what was counted
    assert g["growth_verdict"] == "flat", g["finding"]


def test_a_growing_run_names_the_line_and_ends_what_to_change_with_an_unnumbered_finding(tmp_path):
    """The command's side, on what a script's process wrote (no script run): a run whose memory
    grows 250 KiB a step, with a window that saw 20 arrays of a line held; and a flat one."""
    from gluonperf.script import advice as script_advice, parts
    from gluonperf.script.text import advice_lines
    from gluonperf.records import result
    script = tmp_path / "train.py"
    script.write_text("import mxnet\nfor step in range(400):\n    out = net(data)\n")
    held = {"start": 38, "steps": 20, "drain_s": 0.001, "step_s": 0.002,
            "lines": [{"file": str(script), "line": 3, "arrays": 20, "bytes": 5_120_000}],
            "shapes": {"calls": 20, "distinct": 1, "examples": [[[64, 32]]]}}

    def run(per_step):
        steps = list(range(1, 401))
        memory = {"rss": {"steps": steps, "bytes": [300 * 2 ** 20 + per_step * s for s in steps],
                          "available_bytes": 16 * 2 ** 30}}
        return {"memory_steps": {"warmup": 58, "steps_run": 400, "memory": memory}, "held": held}
    grows = parts.growth_rows(run(256_000), cwd=str(tmp_path))[0].metrics
    assert grows["growth_verdict"] == "grows" and grows["where"] == "train.py:3" and grows["code"] == "out = net(data)"
    assert grows["growth_bytes_per_step"] == pytest.approx(256_000) and grows["warmup_steps"] == 80
    assert grows["steps_to_exhaust"] == pytest.approx(16 * 2 ** 30 / 256_000)
    assert "20 arrays (4.88 MiB) made at train.py:3 `out = net(data)`" in grows["finding"]
    flat = parts.growth_rows(run(0), cwd=str(tmp_path))[0].metrics
    assert flat["growth_verdict"] == "flat" and "train.py:3" not in flat["finding"]
    summary = {"growth": parts.growth_rows(run(256_000), cwd=str(tmp_path))}
    advice = script_advice.growth_advice(summary)
    assert [(a.metrics["lever"], a.metrics["measured"], a.metrics["where"]) for a in advice] == [
        ("memory", False, "train.py:3")]
    assert not script_advice.growth_advice({"growth": parts.growth_rows(run(0), cwd=str(tmp_path))})
    measured = result("advice", "hybridize", lever="hybridize", change="call net.hybridize()", where=None,
                      measured=True, verdict="faster")
    lines = advice_lines([measured] + advice)
    assert lines[1].startswith("1. [measured] call net.hybridize()")
    assert lines[-1].startswith("finding (nothing to measure faster): train.py:3: `out = net(data)`: resident "
                                "memory grows 256 MB per 1,000 steps")
    assert advice_lines(advice)[0].startswith("what to change: nothing this run measured")

"""`python -m gluonperf.profile -- COMMAND` ends with what to change (issue 53): records of kind
`advice`, each measured (a ratio with its interval) or to try, with the `tune --` command that
tries it on the whole script. Run as a user runs it, on tests/user_scripts/mlp_script.py (an
imperative nn.Sequential of Dense layers that reads its loss with asscalar every step). No
assertion depends on how fast anything is: the hybridize advice is there, measured, with an
interval that holds its ratio, whichever way it came out.
"""
import json
import os
import sys

import pytest

from helpers import run_leaving_nothing

PY = sys.executable
MLP = os.path.join("tests", "user_scripts", "mlp_script.py")
QUICK = ["--steps", "10", "--warmup", "2", "--operator-steps", "2", "--ceiling", "off", "--depth", "1"]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    path = tmp_path_factory.mktemp("advice") / "mlp.json"
    done = run_leaving_nothing(["-m", "gluonperf.profile", *QUICK, "--json", str(path), "--", PY, MLP,
                                "--steps", "30"])
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return done, rows


def test_a_per_step_asscalar_is_named_by_its_line(mlp):
    done, rows = mlp
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "a hook failed" not in done.stderr
    waits = [r for r in rows if r["bench"] == "script-waits"]
    line = next(i for i, text in enumerate(open(MLP), 1) if "running = " in text)
    wait = next(r for r in waits if r["file"].endswith("mlp_script.py") and r["line"] == line)
    assert wait["what"] == "asnumpy" and wait["calls_per_step"] == 1 and wait["blocked_s_per_step"] >= 0
    advice = next(r for r in rows if r["bench"] == "advice" and r["lever"] == "wait")
    assert advice["where"] == "%s:%d" % (MLP, line) and advice["code"] == "running = loss.mean().asscalar()"
    assert advice["measured"] is False and advice["calls_per_step"] == 1
    assert advice["tune"].startswith("python -m gluonperf.tune -- ") and MLP in advice["tune"]
    assert "fenced" in advice["change"]
    assert "%s:%d" % (MLP, line) in done.stdout and "to try (not measured here):" in done.stdout


def test_an_imperative_sequential_gets_the_hybridize_advice_measured_on_the_model_alone(mlp):
    done, rows = mlp
    timed = next(r for r in rows if r["bench"] == "script" and r["name"] == "hybridize alone")
    assert timed["kind"] == "sequential" and timed["mode"] == "none"
    assert len(timed["as_is_s"]) == len(timed["static_s"]) == timed["ratio_n"] == 5
    advice = next(r for r in rows if r["bench"] == "advice" and r["lever"] == "hybridize")
    assert advice["measured"] is True and advice["measured_on"] == "the model alone"
    assert advice["ratio_ci_low"] <= advice["ratio"] <= advice["ratio_ci_high"] and advice["ratio_n"] == 5
    assert advice["verdict"] in ("faster", "slower", "same", "inconclusive")
    assert "HybridSequential" in advice["change"] and "not of the script" in advice["change"]
    assert advice["tune"].startswith("python -m gluonperf.tune --levers hybridize -- python")
    assert advice["tune"].endswith(" %s --steps 30" % MLP)
    assert advice["tune"] in done.stdout
    # the script's model was put back: the script ran on to its end as a Sequential
    assert done.stdout.index("training finished") < done.stdout.index("what to change")


def test_only_changes_measured_faster_are_numbered():
    """A numbered line reads as an instruction: only a change measured faster gets one; a measurement
    that was not faster (inconclusive, same, slower) and what is only to try are listed apart, each
    with the tune -- line that settles it (issue 60, item 5)."""
    from gluonperf.script.text import advice_lines
    from gluonperf.records import result

    def hybridize(verdict):
        return result("advice", "hybridize", lever="hybridize", measured=True, measured_on="the model alone",
                      verdict=verdict, change="call net.hybridize(...): %s" % verdict, where=None,
                      tune="python -m gluonperf.tune --levers hybridize -- python train.py")
    wait = result("advice", "wait", lever="wait", measured=False, change="to try: read it less often",
                  where="train.py:9", code="loss.asscalar()", tune="python -m gluonperf.tune -- python train.py")
    lines = advice_lines([hybridize("inconclusive"), wait])
    assert lines[0] == "what to change: nothing this run measured was faster"
    assert not any(line[:1].isdigit() for line in lines), lines
    assert "- call net.hybridize(...): inconclusive" in lines and "- train.py:9: `loss.asscalar()`: read it less often" \
        in lines
    assert lines.index("to try (not measured here):") > lines.index("- call net.hybridize(...): inconclusive")
    lines = advice_lines([hybridize("faster"), wait])
    assert lines[:2] == ["what to change (measured faster in this run):",
                         "1. [measured on the model alone] call net.hybridize(...): faster"]
    assert sum(line[:1].isdigit() for line in lines) == 1

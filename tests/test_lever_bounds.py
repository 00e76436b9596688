"""What tune --'s probe measures decides which levers run (issue 60, item 2): a lever whose best
case cannot reach 1 + threshold is named with its bound and not run, unless --levers names it.
Plain data in, no process started."""
import math
import os

import pytest

from gluonperf.measure import stats
from gluonperf.script import bounds as lever_bounds
from gluonperf.script.levers import LEVER_NAMES, script_levers
from gluonperf.tuning import search
from gluonperf.tuning.candidates import Candidate
from gluonperf.tuning.rounds import Rounds

MODEL = {"class": "Sequential", "kind": "sequential", "mode": "none", "file": "/x/train.py", "line": 7}
LOADER = {"file": "/x/train.py", "line": 5, "num_workers": 0, "thread_pool": False, "batch_size": 128}
FOUND = {"contexts": "cpu(0)", "model": MODEL, "loaders": [LOADER]}


def rate(wait_share):
    """A probe's rate record whose timed steps waited `wait_share` of their time for data, in 10 runs."""
    return {"data_rounds": [[0.1, 0.1 * wait_share * (1 + 0.02 * (i % 3 - 1))] for i in range(10)]}


def operators(share_bf16, names=("FullyConnected", "_backward_FullyConnected")):
    """A probe's operators record whose operators bfloat16 could speed take `share_bf16` of 1 s."""
    per = share_bf16 / len(names)
    return {"ops": dict({n: per for n in names}, adam_update=0.05), "seconds": 1.0, "steps": 5}


def test_the_data_bound_is_the_step_without_its_wait():
    iv = lever_bounds.data_bound(rate(0.2))
    assert iv.estimate == pytest.approx(1 / 0.8, rel=0.01) and iv.low < iv.estimate < iv.high
    assert lever_bounds.cannot_pay(lever_bounds.data_bound(rate(0.01)))
    assert not lever_bounds.cannot_pay(iv) and lever_bounds.data_bound({}) is None


def test_the_bf16_bound_counts_the_operators_amp_runs_in_bfloat16():
    assert lever_bounds.bf16_bound(operators(0.5)) == pytest.approx(2.0)
    # a hybridized graph's bulk segment counts whole when it holds one of them
    bulk = {"ops": {"FullyConnected,Activation": 0.3, "SoftmaxOutput": 0.1}, "seconds": 1.0}
    assert lever_bounds.bf16_bound(bulk) == pytest.approx(1 / 0.7)
    assert lever_bounds.bf16_bound({"ops": {"Embedding": 0.9}, "seconds": 1.0}) == pytest.approx(1.0)
    assert lever_bounds.bf16_bound(None) is None and not lever_bounds.cannot_pay(None)
    assert math.isinf(lever_bounds.bf16_bound({"ops": {"Convolution": 2.0}, "seconds": 1.0}))


def levers(measured, only=None, bounds=True, environ=None):
    stages, idle = script_levers(FOUND, 2, only, environ=environ or {}, measured=measured,
                                             bounds=bounds)
    return [s[0] for s in stages], idle


def test_a_lever_that_cannot_pay_is_named_with_its_bound_and_not_run(monkeypatch):
    from gluonperf.runtime import precision
    monkeypatch.setattr(precision, "has_bf16", lambda *a, **k: True)
    monkeypatch.setattr(precision, "why_no_bf16", lambda *a, **k: None)
    names, idle = levers({"rate": rate(0.01), "operators": operators(0.02)})
    assert "data" not in names and "dtype" not in names
    assert idle["data"].startswith("the step waits 1.0% for its data (95% CI ") and "at most 1.01x faster" in idle["data"]
    assert "less than the 5% worth a change" in idle["data"] and "at most 1.02x faster" in idle["dtype"]
    names, idle = levers({"rate": rate(0.3), "operators": operators(0.4)})
    assert "data" in names and "dtype" in names and not {"data", "dtype"} & set(idle)
    # named on the command line (or all): run whatever the bound says
    names, _ = levers({"rate": rate(0.01), "operators": operators(0.02)}, only=["data", "dtype"], bounds=False)
    assert names == ["data", "dtype"]


def test_levers_that_pay_on_many_scripts_go_first_and_the_thread_count_in_use_is_not_tried():
    names, _ = levers({"rate": rate(0.3)})
    assert names[:4] == ["hybridize", "data", "threads", "dtype"] or names[:3] == ["hybridize", "data", "threads"]
    order = list(LEVER_NAMES)
    assert [order.index(n) for n in names] == sorted(order.index(n) for n in names)
    stages, _ = script_levers(FOUND, 2, ["threads"], environ={}, measured={})
    threads = dict((s[0], s[1]) for s in stages)["threads"]
    base = Candidate("as it is")
    # OMP_NUM_THREADS unset: MXNet uses half the 2 processors, 1 thread, already: only 2 is tried
    assert [c.name for c in threads(base)] == ["as it is", "OMP_NUM_THREADS=2"] or os.cpu_count() != 2
    stages, _ = script_levers(FOUND, 2, ["threads"], environ={"OMP_NUM_THREADS": "2"}, measured={})
    assert [c.name for c in dict((s[0], s[1]) for s in stages)["threads"](base)] == ["as it is", "OMP_NUM_THREADS=1"]


def test_bulk_has_nothing_to_try_while_the_model_runs_imperatively():
    stages, _ = script_levers(FOUND, 2, ["bulk"], environ={}, measured={})
    (name, make, why), = stages
    base = Candidate("as it is")
    assert "hybridized graph" in why(base)
    assert why(base.with_flags("hybridize=static", hybridize="static")) is None


def test_tune_script_names_a_lever_left_with_nothing_to_try():
    idle = {}
    stages = [("bulk", lambda b: [b, b.with_env("x", X="1")], lambda b: "nothing here")]
    out, confirm, kept = search.coordinate(None, Candidate("as it is"), stages, Rounds(), idle=idle)[:3]
    assert out == [] and confirm is None and kept == [] and idle == {"bulk": "nothing here"}

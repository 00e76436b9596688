import json

import mxnet as mx
import numpy as np
import pytest

from gluonperf import bench
from gluonperf.cli import common as cli
from gluonperf.experiments.auto_parallel import (concurrency, copy_to, is_stand_in, overlap, pick_pair,
                                pick_source_and_destination, run, size_for)
from gluonperf.measure.timing import Timing
from gluonperf.measure.trace import event_names, load_trace


def test_devices_are_picked_like_the_book_and_labelled():
    assert pick_pair([mx.cpu(0)]) == (mx.cpu(0), mx.cpu(1))
    assert pick_pair([mx.gpu(0)]) == (mx.cpu(0), mx.gpu(0))  # CPU and GPU at once
    assert pick_pair([mx.cpu(0), mx.gpu(1)]) == (mx.cpu(0), mx.gpu(1))
    assert pick_source_and_destination([mx.gpu(0)]) == (mx.gpu(0), mx.cpu(0))  # copy to the CPU
    assert pick_source_and_destination([mx.cpu(2)]) == (mx.cpu(2), mx.cpu(3))
    assert is_stand_in([mx.cpu(0), mx.cpu(1)]) and not is_stand_in([mx.cpu(0), mx.gpu(0)])
    assert size_for(mx.gpu(0), 1000, 6000) == 6000 and size_for(mx.cpu(1), 1000, 6000) == 1000


def test_run_and_copy_to_compute_the_right_values_on_another_context():
    x = mx.nd.array(np.arange(9, dtype="float32").reshape(3, 3), ctx=mx.cpu(0))
    ys = copy_to(run(x, 2), mx.cpu(1))
    assert [y.context for y in ys] == [mx.cpu(1)] * 2
    np.testing.assert_allclose(ys[1].asnumpy(), x.asnumpy() @ x.asnumpy())


def test_concurrency_on_two_cpu_contexts():
    rows = concurrency(mx.cpu(0), mx.cpu(1), 64, 32, n=3, timing=Timing(repeat=2))
    assert [r.name for r in rows] == ["run on cpu(0)", "run on cpu(1)", "both at once"]
    m = [r.metrics for r in rows]
    assert all(r["devices"] == "cpu(0)+cpu(1)" and r["stand_in"] for r in m)
    # the gain is per repeat (the three ran side by side), with its interval, n and verdict
    assert m[2]["gain_n"] == 2 and m[2]["gain_ci_low"] <= m[2]["gain"] <= m[2]["gain_ci_high"]
    assert m[2]["verdict"] in ("faster", "slower", "same", "inconclusive")
    assert "gain" not in m[0] and not any(k.startswith("device_peak") for k in m[2])


def test_overlap_reports_hidden_time_and_ratio():
    rows = overlap(mx.cpu(0), mx.cpu(1), size=64, n=3, inner=8, timing=Timing(repeat=2))
    assert [r.name for r in rows] == ["compute on cpu(0)", "copy to cpu(1)", "compute and copy"]
    m = [r.metrics for r in rows]
    hidden = m[0]["median_s"] + m[1]["median_s"] - m[2]["median_s"]
    assert m[2]["hidden_s"] == pytest.approx(hidden)
    assert m[2]["overlap"] == pytest.approx(hidden / min(m[0]["median_s"], m[1]["median_s"]))
    assert isinstance(m[2]["overlap_lost_in_noise"], bool)
    assert m[2]["devices"] == "cpu(0)->cpu(1)" and m[2]["copy_bytes"] == 3 * 64 * 64 * 4 and m[2]["inner"] == 8


def operator_intervals(data, name):
    """[(device, begin, end)] of every `name` operator in a loaded MXNet trace (B/E pairs per
    thread, or X events), in start order; device is the trace's process name ('cpu/0')."""
    devices = {e["pid"]: e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name"}
    open_, out = {}, []
    for e in data["traceEvents"]:
        if e.get("name") != name or e.get("cat") != "operator":
            continue
        key = (e["pid"], e.get("tid"))
        if e["ph"] == "X":
            out.append((devices.get(e["pid"]), e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] == "B":
            open_.setdefault(key, []).append(e["ts"])
        elif e["ph"] == "E" and open_.get(key):
            out.append((devices.get(e["pid"]), open_[key].pop(), e["ts"]))
    return sorted(out, key=lambda i: i[1])


@pytest.mark.alone
def test_bench_parallel_json_and_trace_name_both_devices(run, tmp_path):
    """The trace runs each variant once, a sync between them: in the 'both at once' pass the
    two contexts' products must be running at the same moment (the point of the section),
    a fact from MXNet's profiler, not from the gain's formula. 512 x 512 products, 6 per
    context: context 0 is busy for milliseconds after Python has queued context 1's work
    (at 256 and below context 0 finished its products before context 1's first began)."""
    out, trace = tmp_path / "p.json", tmp_path / "p-trace.json"
    p = run("gluonperf.bench", "parallel", "--cpu-size", "512", "--products", "6", "--repeat", "2",
            "--json", str(out), "--trace", str(trace))
    assert p.returncode == 0, p.stderr
    assert "two CPU contexts stand in" in p.stdout and "gain" in p.stdout
    rows = [json.loads(line) for line in open(out)]
    assert [r["name"] for r in rows] == ["run on cpu(0)", "run on cpu(1)", "both at once"]
    assert rows[0]["env"]["contexts"] == ["cpu(0)", "cpu(1)"] and rows[2]["stand_in"] is True
    data = load_trace(trace)
    assert "FullyConnected" in event_names(data)  # the product, on oneDNN (gluonperf.runtime.blas)
    devices = {e["args"]["name"] for e in data["traceEvents"] if e.get("name") == "process_name"}
    assert {"cpu/0", "cpu/1"} <= devices
    products = operator_intervals(data, "FullyConnected")
    assert [d for d, _, _ in products[:12]] == ["cpu/0"] * 6 + ["cpu/1"] * 6  # each alone
    both = products[12:]  # the third pass: both at once
    assert len(both) == 12
    zero = [(b, e) for d, b, e in both if d == "cpu/0"]
    one = [(b, e) for d, b, e in both if d == "cpu/1"]
    overlapping = [(a, b) for a in zero for b in one if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, (zero, one)


def test_bench_overlap_json_and_trace_show_the_copies(run, tmp_path):
    out, trace = tmp_path / "o.json", tmp_path / "o-trace.json"
    p = run("gluonperf.bench", "overlap", "--cpu-size", "64", "--products", "3", "--repeat", "2",
            "--json", str(out), "--trace", str(trace))
    assert p.returncode == 0, p.stderr
    assert "copied to cpu(1)" in p.stdout and "overlap" in p.stdout
    rows = [json.loads(line) for line in open(out)]
    assert rows[-1]["name"] == "compute and copy" and "overlap" in rows[-1]
    data = load_trace(trace)
    assert {"FullyConnected", "CopyCPU2CPU"} <= event_names(data)
    # the pipelined pass (the trace's last) issues the copy of y[i-1] before computing y[i]; in
    # which order the engine then runs a copy and a product that do not depend on each other is
    # the engine's choice (it once ran the first copy after the last product), so what is held
    # is the dependency: a copy starts once the product it copies has ended, so the k-th copy to
    # start does so after k products have ended
    products = operator_intervals(data, "FullyConnected")[3:]
    copies = operator_intervals(data, "CopyCPU2CPU")[3:]
    assert len(products) == 3 and len(copies) == 3
    ends = sorted(end for _, _, end in products)
    starts = sorted(begin for _, begin, _ in copies)
    assert all(start >= end for start, end in zip(starts, ends)), (products, copies)


def test_bad_input_is_one_line(capsys, tmp_path):
    for argv in (["parallel", "--ctx", "gpu0"], ["overlap", "--products", "0"],
                 ["overlap", "--json", str(tmp_path)], ["parallel", "--trace", str(tmp_path)]):
        with pytest.raises(SystemExit) as exit:
            cli.run(bench.main, bench.PROG, argv)
        assert exit.value.code == 2
        lines = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
        assert "error:" in lines[-1] and not [l for l in lines[:-1] if "error" in l], lines
    assert not list(tmp_path.iterdir())


def test_trace_helpers(tmp_path):
    from gluonperf.measure.trace import Trace, merge_traces
    off = Trace(None)
    with off:
        pass
    assert not off and off.dump() is None
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(ValueError, match="not a Chrome trace"):
        load_trace(str(bad))
    for i in range(2):
        (tmp_path / ("t%d.json" % i)).write_text(json.dumps(
            {"traceEvents": [{"name": "dot", "ph": "B", "pid": 0, "tid": 1, "ts": i}]}))
    merged = merge_traces([str(tmp_path / "t0.json"), str(tmp_path / "t1.json")], str(tmp_path / "m.json"))
    assert [e["pid"] for e in load_trace(str(tmp_path / "m.json"))["traceEvents"]] == [0, 1000]
    assert event_names(merged) == {"dot"}

"""The deploy line across runtimes (issue 73, item 2): the gate and the confirmation treat the
runtimes' rungs like MXNet's; the line names the runtime, precision and layout in words; the
code it gives serves the rung's kept files and answers what the rung answered in the run;
--keep leaves the files only when the run ends, and a bad DIR is one line. What is computed,
never how fast: constructed records, and LeNet's rungs built once (seconds)."""
import json
import os
import re

import numpy as np
import pytest

from helpers import run_leaving_nothing
from gluonperf.inference import deploy, deploy_code, rounds
from gluonperf.records import Result

# a rung below fp32 whose paired interval clears 99% of static's 0.90 (its lower end 0.895 >= 0.891)
KEEPS = dict(accuracy_ref=0.90, accuracy_change=0.0, accuracy_change_ci_low=-0.005, accuracy_change_ci_high=0.005,
             accuracy_n=5000)


def server(precision, layout, rate, invalid, window=0.0, **fields):
    """A server record of rung `precision` at `layout` ('2x1') whose search found `rate` valid and `invalid` not."""
    instances, threads = map(int, layout.split("x"))
    m = dict({"scenario": "server", "precision": precision, "layout": layout, "instances": instances,
              "threads": threads, "batch_window_s": window, "max_batch": 8 if window else 1, "latency_bound_s": 0.05,
              "rate_at_bound_per_s": rate, "rate_invalid_per_s": invalid, "p99_s": 0.01, "model": "lenet",
              "input_shape": [1, 28, 28]}, **fields)
    return Result("inference", rounds.config_name(precision, layout, m["max_batch"], window), m)


def confirmation(record, p99_ms):
    """The confirmation record of `record`: it held the bound in 3 rounds at 1000/s with these p99s."""
    return rounds.confirm_record(record, 1000.0, [{"p99_s": p / 1e3, "loadgen_valid": True, "log": "x"}
                                                  for p in p99_ms], 0.05)


def test_the_gate_bits_and_tie_break_know_the_runtimes_rungs():
    assert set(deploy.BITS) == set(rounds.LADDER) == set(deploy_code.WORDS)
    for name in ("ort-fp32", "ov-fp32"):
        assert deploy.gate({"precision": name}) == (True, "float32") and deploy.BITS[name] == 32
    for name in ("ort-int8", "ov-int8", "ov-bf16"):
        assert deploy.gate({"precision": name, "accuracy_note": "not measured"})[0] is None
        assert deploy.gate(dict(KEEPS, precision=name))[0] is True
    assert deploy._simpler({"precision": "ort-fp32"}) < deploy._simpler({"precision": "ov-bf16"}) < \
        deploy._simpler({"precision": "ort-int8"})  # more bits first, whatever the runtime


def test_a_runtime_rung_is_chosen_when_it_is_fastest_and_deployable():
    static = server("static", "2x1", 1000.0, 1100.0)
    ort = server("ort-int8", "2x1", 3000.0, 3300.0, window=0.005, **KEEPS)
    advice = deploy.recommend([static, ort], ["--model", "lenet"])
    assert advice.record.name == "ort-int8 2x1 b8 window 5ms" and advice.held is None
    assert "--precision ort-int8 --layouts 2x1" in advice.command
    assert advice.text().startswith("deploy ort-int8 2x1 b8 window 5ms (ONNX Runtime, INT8 (QDQ, U8S8); 2 instances "
                                    "of 1 thread, each pinned to cores of its own; batches of up to 8 gathered within "
                                    "5 ms): 3000/s")
    unmeasured = server("ort-int8", "2x1", 3000.0, 3300.0, accuracy_note="not measured")
    held = deploy.recommend([static, unmeasured, server("ov-fp32", "1x2", 1500.0, 1650.0)])
    assert held.record.name == "ov-fp32 1x2 b1" and held.held.name == "ort-int8 2x1 b1"  # float32: no gate
    assert held.text().startswith("deploy ov-fp32 1x2 b1 (OpenVINO, float32; 1 instance of 2 threads; one request "
                                  "a call)")


def test_a_tie_with_an_mxnet_rung_names_the_simpler():
    """Within the noise of each other: fewer cores first, then more bits, across runtimes."""
    static, ov = server("static", "2x1", 1000.0, 1100.0), server("ov-int8", "2x1", 1050.0, 1150.0, **KEEPS)
    assert [r.name for r in deploy.contenders([static, ov])] == ["ov-int8 2x1 b1", "static 2x1 b1"]
    advice = deploy.recommend([static, ov, confirmation(ov, [10, 11, 10]), confirmation(static, [10.5, 10, 11])])
    chosen, how, _, why = advice.confirmed
    assert (chosen.name, how, why) == ("static 2x1 b1", "tie", "more bits") and advice.record.name == "static 2x1 b1"
    ort = server("ort-fp32", "1x1", 1000.0, 1100.0)  # one core: simpler than static's two
    advice = deploy.recommend([static, ort, confirmation(static, [10, 11, 10]), confirmation(ort, [10.5, 10, 11])])
    assert advice.record.name == "ort-fp32 1x1 b1" and advice.confirmed[3] == "fewer cores"
    assert "named for fewer cores" in advice.text() and "ONNX Runtime, float32" in advice.text()


def test_the_line_says_where_the_files_are_or_how_to_get_them():
    files = {"files": {"onnx": "int8-qdq.onnx"}}
    kept = deploy.recommend([server("ort-int8", "2x1", 3000.0, 3300.0, kept="/srv/lenet", **files, **KEEPS)])
    assert kept.text().endswith("serve it with the code below, its files kept in /srv/lenet")
    assert "InferenceSession('/srv/lenet/int8-qdq.onnx'" in kept.code
    lost = deploy.recommend([server("ort-int8", "2x1", 3000.0, 3300.0, **files, **KEEPS)], ["--model", "lenet"])
    assert lost.text().endswith("which names its files in DIR: they were not kept, add --keep DIR to that command to "
                                "keep them") and "InferenceSession('DIR/int8-qdq.onnx'" in lost.code
    old = deploy.recommend([server("static", "2x1", 1000.0, 1100.0)])  # a record from before --keep: no code
    assert old.code is None and "code below" not in old.text()


def test_the_report_shows_the_code_the_command_prints():
    from gluonperf.render.inference import readings, section
    records = [server("ov-fp32", "1x2", 1500.0, 1650.0, files={"onnx": "static.onnx"}, kept="/srv/x")]
    records = [Result(r.bench, r.name, json.loads(json.dumps(r.metrics))) for r in records]  # through the JSON
    lines = readings(records)
    assert lines[-2].startswith("deploy ov-fp32 1x2 b1") and lines[-1].startswith("    # ov-fp32 as measured")
    code = section(records).code
    assert code == deploy.recommend(records).code and lines[-1] == "\n".join(
        "    " + line if line else "" for line in code.splitlines())
    assert "compile_model('/srv/x/static.onnx', 'CPU', {'INFERENCE_NUM_THREADS': '2', 'NUM_STREAMS': '1', " \
           "'INFERENCE_PRECISION_HINT': 'f32'})" in code


# --- the code runs: LeNet's rungs built, kept, served by the lines ------------------------

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """LeNet's rungs of every runtime this machine has, built as infer builds them and kept
    with deploy_code.keeping: (rungs by name, the records' fields of each, the folder)."""
    import mxnet as mx
    from gluonperf.inference import calibration, ladder
    root = tmp_path_factory.mktemp("deploy")
    calib, _ = calibration.split(calibration.load("digits", (1, 28, 28), 96), 64)
    names = [n for n, why in ladder.available(["fp32", "static", "fused", "bf16", "int8", "ort-fp32", "ort-int8",
                                               "ov-fp32", "ov-int8"]).items() if why is None]
    rungs = ladder.prepare(ladder.model_source("lenet"), names, mx.cpu(), str(root / "work"), calib)
    with deploy_code.keeping(str(root / "kept")) as keep:
        kept = keep(rungs)
        assert not os.path.exists(kept)  # in place only when the block ends
    return {r.name: r for r in rungs if not r.error}, {r.name: deploy_code.fields(r, kept) for r in rungs}, kept


def test_the_kept_folder_holds_each_rungs_files_once(built):
    rungs, fields, kept = built
    names = sorted(os.listdir(kept))
    assert "static-symbol.json" in names and "static-0000.params" in names and "fp32.params" in names
    if "ort-fp32" in rungs:
        assert "static.onnx" in names
    if "ort-int8" in rungs and "ov-int8" in rungs:
        assert fields["ort-int8"]["files"] == fields["ov-int8"]["files"] == {"onnx": "int8-qdq.onnx"}
    assert sorted({n for f in fields.values() for n in f.get("files", {}).values()}) == names
    assert not [n for n in os.listdir(os.path.dirname(kept)) if "partial" in n]
    from gluonperf.runtime.outputs import umask_mode
    assert os.stat(kept).st_mode & 0o777 == umask_mode(0o777)  # as mkdir makes a folder, not private


@pytest.mark.filterwarnings("ignore:Cannot decide type")  # SymbolBlock.imports on a float32 graph
def test_the_code_serves_each_rung_as_the_run_did(built, monkeypatch):
    """Each rung's lines, exec'd on its kept files (as a 1x1 instance: one thread), answer what
    the rung's own forward answers on the same batch: the same runtime, settings and files."""
    import mxnet as mx
    from gluonperf.inference import calibration, ladder
    rungs, fields, kept = built
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the lines set it: restored after the test
    x = np.ascontiguousarray(calibration.load("digits", (1, 28, 28), 5).data, dtype=np.float32)
    runtimes_seen = set()
    for name, rung in rungs.items():
        m = dict(fields[name], precision=name, layout="1x1", instances=1, threads=1, input_shape=[1, 28, 28])
        text = deploy_code.code(m)
        assert kept in text and "DIR/" not in text, name
        scope = {}
        exec(compile(text, "<deploy %s>" % name, "exec"), scope)  # noqa: S102 (the code the line prints)
        got = scope["predict"](x)
        forward = ladder.load(rung, mx.cpu())
        want = forward(x) if getattr(forward, "numpy_in", False) else forward(mx.nd.array(x)).asnumpy()
        assert isinstance(got, np.ndarray) and got.shape == want.shape == (5, 10), name
        assert np.abs(got - want).max() <= 1e-5 * max(1.0, float(np.abs(want).max())), name
        runtimes_seen.add(deploy_code.WORDS[name].split(",")[0])
    assert "MXNet" in runtimes_seen
    from gluonperf.inference import runtimes
    for package, words in (("onnxruntime", "ONNX Runtime"), ("openvino", "OpenVINO")):
        if runtimes.why_not("ort-fp32" if package == "onnxruntime" else "ov-fp32") is None:
            assert words in runtimes_seen, words


def test_the_code_carries_the_rungs_own_settings_at_the_layouts_threads():
    m = {"precision": "ort-fp32", "threads": 2, "instances": 1, "files": {"onnx": "static.onnx"}}
    from gluonperf.inference import runtimes
    text = deploy_code.code(m)
    for attribute, value in runtimes.ort_options(2).items():
        assert "options.%s = %s" % (attribute, "onnxruntime." + value if isinstance(value, str) else value) in text
    assert "intra_op_num_threads = 2" in text
    assert repr(runtimes.ov_properties("ov-int8", 2)) in deploy_code.code(dict(m, precision="ov-int8"))
    mxnet = deploy_code.code(dict(m, precision="fused", files={"symbol": "fused-symbol.json",
                                                                "params": "fused-0000.params"}, input_name="data"))
    assert "os.environ['OMP_NUM_THREADS'] = '2'" in mxnet and "net.hybridize(static_alloc=True, static_shape=True)" \
        in mxnet and "SymbolBlock.imports('DIR/fused-symbol.json', ['data'], 'DIR/fused-0000.params'" in mxnet
    assert deploy_code.code({"precision": "static"}) is None


# --- --keep DIR ------------------------------------------------------------------------------

def test_keep_refuses_a_dir_that_cannot_take_the_files(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a").write_text("x")
    for given, words in (("file", "is a file"), ("full", "is a folder with files in it"),
                         ("no/such", "cannot be made: %s is not a folder" % (tmp_path / "no"))):
        with pytest.raises(ValueError, match="^" + re.escape("--keep %s %s" % (tmp_path / given, words))):
            with deploy_code.keeping(str(tmp_path / given)):
                pass
    (tmp_path / "empty").mkdir()
    with deploy_code.keeping(str(tmp_path / "empty")) as keep:
        assert keep([]) == str(tmp_path / "empty")
    assert os.listdir(tmp_path / "empty") == []


def test_keep_leaves_nothing_when_the_run_fails(tmp_path, built):
    rungs, _, _ = built
    with pytest.raises(RuntimeError):
        with deploy_code.keeping(str(tmp_path / "kept")) as keep:
            keep(list(rungs.values()))
            raise RuntimeError("the run failed")
    assert os.listdir(tmp_path) == []  # neither DIR nor its hidden partial folder


def test_infer_says_a_bad_keep_in_one_line_and_exit_2(tmp_path):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "model.onnx").write_text("x")
    p = run_leaving_nothing(["-m", "gluonperf.infer", "--model", "lenet", "--keep", str(tmp_path / "taken")],
                            timeout=120)
    assert p.returncode == 2 and p.stdout == "", p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--keep %s is a folder with files in it" % (tmp_path / "taken") in lines[0], p.stderr
    assert os.listdir(tmp_path / "taken") == ["model.onnx"]

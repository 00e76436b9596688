import json

import pytest

from helpers import shared_run


def test_hybridize_default_run_writes_json(tmp_path_factory):
    """The quick run test_commands checks the table of (helpers.shared_run: one run for both; what
    is checked here does not depend on how many calls are timed)."""
    from gluonperf.bench import hybridize
    p, out = shared_run(tmp_path_factory, ["gluonperf.bench", "hybridize", *hybridize.QUICK])
    assert p.returncode == 0, p.stderr
    assert "imperative" in p.stdout and "static" in p.stdout and "speedup" in p.stdout
    rows = [json.loads(line) for line in open(out)]
    assert [r["name"] for r in rows] == ["imperative", "hybrid", "static"]
    assert rows[0]["env"]["mxnet"] and rows[0]["env"]["contexts"] == ["cpu(0)"]


def test_help_explains_every_flag(run):
    p = run("gluonperf.bench", "hybridize", "--help")
    assert p.returncode == 0
    for flag in ("--model", "--batch-size", "--ctx", "--repeat", "--number", "--train",
                 "--export", "--list-models", "--json"):
        assert flag in p.stdout


def _one_line_error(p):
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines and "error" in lines[-1]
    return lines[-1]


def test_bad_input_is_one_line_and_nonzero(run, tmp_path):
    assert "unknown model 'nope'" in _one_line_error(run("gluonperf.bench", "hybridize", "--model", "nope"))
    assert "MXNet sees none" in _one_line_error(run("gluonperf.bench", "hybridize", "--ctx", "gpu0"))
    assert "is not a context" in _one_line_error(run("gluonperf.bench", "hybridize", "--ctx", "cpux"))
    assert "at least 1" in _one_line_error(run("gluonperf.bench", "hybridize", "--batch-size", "0"))
    assert "is a directory" in _one_line_error(run("gluonperf.bench", "hybridize", "--json", str(tmp_path)))
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert "is a file" in _one_line_error(run("gluonperf.bench", "hybridize", "--export", str(a_file)))
    p = run("gluonperf.bench", "hybridize", "--export", str(a_file / "model"))
    assert "is not a writable directory" in _one_line_error(p) and p.stdout == ""


@pytest.mark.parametrize("args, words", [
    (["async", "--demo-size", "100000000"], "an n x n product at n = 100000000 needs about"),
    (["async", "--sizes", "10,300000"], "at n = 300000 needs about"),  # 1 TB: more than any machine here
    (["parallel", "--cpu-size", "200000"], "--products 10 of a 200000 x 200000 matrix"),
    (["overlap", "--cpu-size", "200000"], "--products 10 of 200000 x 200000"),
])
def test_sizes_larger_than_the_memory_are_refused_before_any_work(run, args, words):
    """Before: numpy's MemoryError traceback, or minutes of swapping and the OOM killer."""
    p = run("gluonperf.bench", *args, timeout=120)
    assert p.returncode == 2 and words in _one_line_error(p) and "GiB available" in p.stderr
    assert p.stdout == ""


def test_errors_keep_the_line_that_says_what_went_wrong(capsys):
    from gluonperf.cli import common as cli
    from gluonperf import error_line
    mx_error = ('Traceback (most recent call last):\n  File "../src/operator/tensor/init_op.h", line 318\n'
                'MXNetError: Check failed: size < 2^31 : Size of tensor you are trying to allocate is too large')
    assert error_line(RuntimeError(mx_error)) == "Check failed: size < 2^31 : Size of tensor you are trying to " \
                                                 "allocate is too large"
    assert error_line(RuntimeError("Check failed: x\nStack trace:\n  [bt] (0) libmxnet.so")) == "Check failed: x"
    assert error_line(RuntimeError("")) == "RuntimeError"

    def short_of_memory(argv):
        raise MemoryError("Unable to allocate 71.1 PiB for an array with shape (100000000, 100000000)")
    with pytest.raises(SystemExit) as e:
        cli.run(short_of_memory, "python -m gluonperf.bench")
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1 and "out of memory: Unable to allocate" in err


def test_an_mxnet_error_is_its_message_not_its_traceback_line(capsys):
    import mxnet as mx
    from gluonperf.cli import common as cli

    def too_large(argv):
        mx.nd.zeros((50000, 50000)).wait_to_read()  # 2.5e9 elements: past MXNet 1.9.1's 2^31
    with pytest.raises(SystemExit) as e:
        cli.run(too_large, "python -m gluonperf.bench")
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.strip().splitlines()) == 1, err
    assert err.startswith("python -m gluonperf.bench: MXNet error: ") and "Traceback" not in err
    assert "2^31" in err


def test_list_models(run):
    p = run("gluonperf.bench", "hybridize", "--list-models")
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert names[:3] == ["mlp", "lenet", "resnet18"] and "resnet18_v1" in names


def _env_without_threads():
    import os
    from helpers import ROOT
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS")}
    env["PYTHONPATH"] = ROOT
    return env


@pytest.mark.alone
def test_commands_use_every_core_unless_told_otherwise(tmp_path):
    """MXNet alone gives each operator half the processors; as commands, bench and train set
    one OpenMP thread per core (shared among CPU contexts), say so, and record it."""
    import subprocess
    import sys
    from helpers import ROOT
    from gluonperf.runtime.threads import physical_cores
    cores = physical_cores()
    out = tmp_path / "h.json"
    p = subprocess.run([sys.executable, "-m", "gluonperf.bench", "hybridize", "--repeat", "1", "--number", "5",
                        "--json", str(out)], cwd=ROOT, env=_env_without_threads(), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "gluonperf set it to %d" % cores in p.stderr
    assert json.loads(out.read_text().splitlines()[0])["env"]["env"]["OMP_NUM_THREADS"] == str(cores)
    if cores > 1:  # a user's setting that idles cores is kept, with a warning and the fix
        env = dict(_env_without_threads(), OMP_NUM_THREADS="1")
        p = subprocess.run([sys.executable, "-m", "gluonperf.bench", "hybridize", "--repeat", "1",
                            "--number", "5"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert "warning: OMP_NUM_THREADS=1" in p.stderr and "set OMP_NUM_THREADS=%d" % cores in p.stderr
        assert "gluonperf set it" not in p.stderr

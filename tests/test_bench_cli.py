import json


def test_hybridize_default_run_writes_json(run, tmp_path):
    out = tmp_path / "h.json"
    p = run("gluonperf.bench", "hybridize", "--repeat", "2", "--number", "50", "--json", str(out))
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


def test_list_models(run):
    p = run("gluonperf.bench", "hybridize", "--list-models")
    assert p.returncode == 0
    names = [line.split()[0] for line in p.stdout.splitlines()]
    assert names[:3] == ["mlp", "lenet", "resnet18"] and "resnet18_v1" in names

"""The wire between gluonperf and a user's script (gluonperf/script/wire.py): one environment for
profile -- and tune --, one writer in the child, one reader in the parent. No script is run."""
import json
import os

from gluonperf.script import wire


def test_the_hooks_read_the_variables_the_wire_names():
    """The sitecustomize runs before gluonperf can be imported: it loads runtime/wire.py by its
    path and reads the names from it."""
    site = open(os.path.join(wire.SITE, "sitecustomize.py")).read()
    for name in ("SCRIPT_OUT", "SCRIPT_HOOKS", "SCRIPT_ROOT"):
        assert "_wire.%s" % name in site, name
    assert '_runtime_file("wire")' in site


def test_the_childs_environment_puts_the_hooks_first_and_tells_the_entry_point(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", "/mine")
    env = wire.environment(str(tmp_path), wire.TUNE, {"steps": 3}, (("OMP_NUM_THREADS", "2"),))
    assert env["PYTHONPATH"] == os.pathsep.join([wire.SITE, "/mine"])
    assert env[wire.ENV_HOOKS] == "gluonperf.script.listener:install" and env["OMP_NUM_THREADS"] == "2"
    assert json.loads(env[wire.ENV_SETTINGS]) == {"steps": 3} and env[wire.ENV_OUT] == str(tmp_path)
    monkeypatch.setattr(os, "environ", env)
    assert wire.settings() == {"steps": 3}
    module, _, function = wire.PROFILE.partition(":")
    assert module == "gluonperf.script.driver" and function == "install"


def test_what_the_child_writes_the_parent_reads(tmp_path):
    writer = wire.Writer(str(tmp_path))
    writer.write(kind="start", argv=["train.py"])
    writer.write(kind="step", step_s=0.5)
    writer.write(kind="step", step_s=0.25)
    writer.write(kind="rate", images_per_s=__import__("numpy").float32(2.5))  # a numpy scalar, as plain JSON
    (tmp_path / ("%d.site" % os.getpid())).write_text("")
    with open(tmp_path / "7.jsonl", "w") as f:
        f.write(json.dumps({"kind": "exit", "steps_seen": 0}) + "\n" + '{"kind": "err')  # killed mid-line
    runs, sites = wire.read_runs(str(tmp_path))
    assert sites == [os.getpid()]
    mine = next(r for r in runs if r["pid"] == os.getpid())
    assert [s["step_s"] for s in mine["steps"]] == [0.5, 0.25] and mine["rate"] == {"images_per_s": 2.5}
    assert next(r for r in runs if r["pid"] == 7)["exit"] == {"steps_seen": 0}
    assert wire.split_argv(["--steps", "3", "--", "python", "train.py", "--", "x"]) == (
        ["--steps", "3"], ["python", "train.py", "--", "x"])

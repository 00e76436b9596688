"""The wires between gluonperf and the processes it starts.

gluonperf/runtime/wire.py: every GLUONPERF_ variable named once, one reader of a child's answer
(schema-versioned), one worker entry, one warm child's loop; the checks below (AST, no MXNet,
nothing run) fail on a second wire: a GLUONPERF_ name spelled elsewhere, a child's stdout parsed as
JSON elsewhere, a process started outside the launchers the wire names. The two transports behind
one interface (runtime/transport.py: Fresh, Warm) run fake children written in tmp_path (no gluonperf
in them): answering, stalled (a short timeout; killed with their process group), exiting early,
speaking another version of the wire. gluonperf/script/wire.py, the user's script's: one
environment for profile -- and tune --, one writer in the child, one reader in the parent. No
user script is run."""
import ast
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

from gluonperf.runtime import wire as runtime_wire
from gluonperf.script import wire
from helpers import clean_env

ROOT = pathlib.Path(__file__).resolve().parent.parent
WIRE = "gluonperf/runtime/wire.py"
# calls that start a process (after import aliases are resolved)
STARTS = {"subprocess." + n for n in ("Popen", "run", "call", "check_call", "check_output", "getoutput",
                                      "getstatusoutput")}
STARTS |= {"os." + n for n in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp")}
STARTS |= {"multiprocessing." + n for n in ("Process", "Pool", "get_context", "Manager")}
STARTS |= {"multiprocessing.pool.Pool", "multiprocessing.pool.ThreadPool", "multiprocessing.context.Process",
           "concurrent.futures.ProcessPoolExecutor", "pty.spawn", "asyncio.create_subprocess_exec",
           "asyncio.create_subprocess_shell"}


def sources(*folders, root=ROOT):
    """(path relative to the checkout, parsed module) of every .py under `folders`."""
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root).as_posix(), ast.parse(path.read_text())


def imported(tree):
    """{local name: dotted name} of the module's imports (`import a.b as c`, `from a import b`)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                names[a.asname or a.name] = node.module + "." + a.name
    return names


def dotted(node, names):
    """'subprocess.Popen' for `sp.Popen` after `import subprocess as sp` (a name not imported stands
    for itself); None for a call of what is not a name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([names.get(node.id, node.id)] + parts[::-1])
    return None


def gluonperf_names(path, tree):
    """Where a GLUONPERF_ name is spelled: a string that starts with it, or a keyword argument."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("GLUONPERF_"):
            yield "%s:%d %r" % (path, node.lineno, node.value)
        elif isinstance(node, ast.keyword) and (node.arg or "").startswith("GLUONPERF_"):
            yield "%s:%d %s=" % (path, node.value.lineno, node.arg)


def answers_read(path, tree):
    """Where a child's output is parsed as JSON: json.loads of something split into lines, or of a stdout."""
    names = imported(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and dotted(node.func, names) == "json.loads":
            for inner in ast.walk(node):
                if isinstance(inner, ast.Attribute) and inner.attr in ("splitlines", "stdout"):
                    yield "%s:%d json.loads(...%s...)" % (path, node.lineno, inner.attr)
                    break


def process_starts(path, tree):
    """Where a process is started: a call of `STARTS`, or of os.spawn*/os.exec*."""
    names = imported(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = dotted(node.func, names) or ""
            if name in STARTS or name.startswith(("os.spawn", "os.exec")):
                yield "%s:%d %s" % (path, node.lineno, name)


def test_every_gluonperf_variable_is_named_in_the_wire():
    found = [f for path, tree in sources("gluonperf") if path != WIRE for f in gluonperf_names(path, tree)]
    assert found == [], "name it in %s and import the constant" % WIRE


def test_a_childs_answer_is_read_by_the_wire_alone():
    found = [f for path, tree in sources("gluonperf", "benchmarks") if path != WIRE for f in answers_read(path, tree)]
    assert found == [], "read it with gluonperf.runtime.wire.answer (or transport.run_worker)"


def test_only_the_launchers_start_processes():
    """guard (every child of a command, in its own process group) and ps_launcher (launch's job)."""
    assert all((ROOT / p).is_file() for p in runtime_wire.LAUNCHERS)
    found = [f for path, tree in sources("gluonperf") if path not in runtime_wire.LAUNCHERS
             for f in process_starts(path, tree)]
    assert found == [], "start it through gluonperf.runtime.guard (or name a new launcher in %s)" % WIRE


@pytest.mark.parametrize("source, check", [
    ('env = {"GLUONPERF_NEW": "1"}\n', gluonperf_names),
    ("env = dict(os.environ, GLUONPERF_NEW='1')\n", gluonperf_names),
    ("import json\nrow = json.loads(proc.stdout.strip().splitlines()[-1])\n", answers_read),
    ("from json import loads\nrow = loads(out.stdout)\n", answers_read),
    ("import subprocess as sp\nsp.run(['ls'])\n", process_starts),
    ("from subprocess import Popen\nPopen(['ls'])\n", process_starts),
    ("import multiprocessing as mp\nmp.get_context('spawn').Process(target=f).start()\n", process_starts),
    ("import os\nos.execv('/bin/ls', ['ls'])\n", process_starts),
])
def test_each_check_sees_a_second_wire(source, check):
    assert list(check("made_up.py", ast.parse(source)))


@pytest.mark.parametrize("source, check", [
    ('"""Set GLUONPERF_OPERATOR_CACHE=0 to turn it off."""\n', gluonperf_names),  # a docstring that names one
    ("import json\nrow = json.loads(line)\n", answers_read),
    ("import multiprocessing\nskipped = multiprocessing.Value('i', 0)\n", process_starts),
    ("from ..runtime import guard\nguard.run(['ls'])\n", process_starts),
])
def test_the_checks_leave_the_rest_alone(source, check):
    assert not list(check("made_up.py", ast.parse(source)))


def test_the_wire_reads_an_answer_or_says_why_there_is_none():
    said = runtime_wire.say({"images_per_s": 3.5})
    assert json.loads(said) == {"wire": runtime_wire.VERSION, "answer": {"images_per_s": 3.5}}
    assert runtime_wire.answer("loading\n%s\n\n" % said, "w") == {"images_per_s": 3.5}
    assert runtime_wire.hear(runtime_wire.say(None), "w") is None  # any JSON value, null too
    with pytest.raises(runtime_wire.WorkerFailed, match="the worker printed no answer"):
        runtime_wire.answer(" \n", "the worker")
    with pytest.raises(runtime_wire.WorkerFailed, match="the worker gave no answer \\(not JSON"):
        runtime_wire.answer(said + "\nTraceback (most recent call last):", "the worker")
    for line, speaks in (('{"images_per_s": 3.5}', "no wire version"), ('[1, 2]', "no wire version"),
                         ('{"wire": 2, "answer": {}}', "wire version 2"), ('{"wire": 1}', "no wire version")):
        with pytest.raises(runtime_wire.WorkerFailed) as e:
            runtime_wire.answer(line, "the worker")
        assert str(e.value).startswith("the worker speaks %s, this gluonperf wire version 1" % speaks), line
        assert "\n" not in str(e.value)
    assert runtime_wire.command("gluonperf.workers.x", {"a": [1]})[1:] == ["-m", "gluonperf.workers.x", '{"a": [1]}']
    assert json.loads(runtime_wire.request({"steps": 3})) == {"steps": 3} and runtime_wire.request({}).endswith("\n")


def test_a_warm_child_says_it_is_ready_then_answers_each_request_until_its_input_ends():
    import io
    out = io.StringIO()
    runtime_wire.serve(lambda s: {"twice": 2 * s["n"]}, stdin=io.StringIO('{"n": 1}\n{"n": 4}\n'), stdout=out)
    assert [runtime_wire.hear(l, "w") for l in out.getvalue().splitlines()] == [
        runtime_wire.READY, {"twice": 2}, {"twice": 8}]
    out = io.StringIO()
    ready = {"ready": True, "threads": 2}
    runtime_wire.serve(lambda s: 0, ready, io.StringIO('\n{"n": 1}\n'), out)  # a blank line ends it
    assert out.getvalue() == runtime_wire.say(ready) + "\n"


@pytest.mark.parametrize("argv, code", [([], 2), (["--help"], 2), (['{"fail": true}'], 1), (['{"n": 2}'], 0)])
def test_a_worker_takes_its_settings_and_answers_in_one_line(argv, code, capsys):
    def work(settings):
        if settings.get("fail"):
            raise ValueError("no such rung\nmore")
        return {"twice": settings["n"] * 2}
    try:
        runtime_wire.worker_main(work, "gluonperf.workers.x", "python -m gluonperf.infer", argv)
        got = 0
    except SystemExit as e:
        got = e.code
    out, err = capsys.readouterr()
    assert got == code
    if code == 0:
        assert runtime_wire.hear(out, "w") == {"twice": 4} and out.count("\n") == 1 and err == ""
    else:
        assert out == "" and len(err.strip().splitlines()) == 1
        assert ("python -m gluonperf.infer" in err) if code == 2 else err.startswith("ValueError: no such rung")


def test_a_worker_run_by_hand_names_its_command():
    """A moved worker answers through the wire: by hand, one line naming the command (no MXNet loaded)."""
    p = subprocess.run([sys.executable, "-m", "gluonperf.workers.memory"], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=60, env=clean_env())
    assert p.returncode == 2 and "python -m gluonperf.bench memory" in p.stderr and p.stdout == ""


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


# --- the two transports behind one interface (runtime/transport.py: Fresh, Warm) ----------------------

WIRE_FILE = str(ROOT / WIRE)
# A child as the benchmarks' PyTorch loops are (no gluonperf: the wire loaded by its path). argv: the wire's
# file, how it behaves, then --serve (warm) or the settings (fresh). `stalls` starts a grandchild and then
# waits for ever; `exits` leaves at the first request; `speaks 99` answers on another version of the wire.
CHILD = '''
import importlib.util, subprocess, sys, threading
spec = importlib.util.spec_from_file_location("wire", sys.argv[1])
wire = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wire)
how = sys.argv[2]
if how == "speaks 99":
    wire.VERSION = 99

def work(settings):
    if how == "stalls":
        grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(settings["pid_file"], "w") as f:
            f.write(str(grandchild.pid))
        threading.Event().wait()
    if how == "exits":
        sys.exit("fake: gave up on %d steps" % settings["steps"])
    return {"twice": 2 * settings["steps"]}

if sys.argv[3] == "--serve":
    wire.serve(work)
else:
    wire.worker_main(work, "fake", "the test", sys.argv[3:])
'''
STALL_S = 2  # the transports' timeout when a child stalls


def transport(kind, tmp_path, how, timeout=60):
    """A transport.Fresh or transport.Warm (`kind`) of the fake child that behaves as `how`."""
    from gluonperf.runtime.transport import Fresh, Warm
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    head = [sys.executable, str(child), WIRE_FILE, how]
    if kind == "fresh":
        return Fresh(lambda s: head + [json.dumps(s)], "the fake", timeout)
    return Warm(head + ["--serve"], "the fake", timeout)


def alive(pid):
    """Whether process `pid` runs (a zombie waiting to be reaped does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pid, within_s=30.0):
    """Whether process `pid` has stopped running within `within_s`: a SIGKILL sent to its group is
    delivered at once, but on a loaded machine the process may be scheduled once more before it dies."""
    deadline = time.monotonic() + within_s
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize("kind", ["fresh", "warm"])
def test_each_transport_answers_a_call_with_the_childs_answer(kind, tmp_path):
    child = transport(kind, tmp_path, "answers")
    try:
        assert child.call({"steps": 3}) == {"twice": 6}
        assert child.call({"steps": 1}) == {"twice": 2}  # fresh: a second process; warm: the same one, asked again
    finally:
        child.close()
    if kind == "warm":
        assert child.ready == runtime_wire.READY and child.proc.returncode == 0  # its input closed: it ended


@pytest.mark.parametrize("kind", ["fresh", "warm"])
def test_a_stalled_child_is_killed_with_its_group_after_the_timeout(kind, tmp_path):
    child = transport(kind, tmp_path, "stalls", timeout=STALL_S)
    pid_file = tmp_path / "grandchild"
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.call({"steps": 3, "pid_file": str(pid_file)})
        if kind == "warm":
            assert child.proc.poll() is not None
            with pytest.raises(subprocess.TimeoutExpired):  # not asked again
                child.call({"steps": 1})
    finally:
        child.close()
    assert gone(int(pid_file.read_text()))  # the grandchild went with the child's process group


@pytest.mark.parametrize("kind", ["fresh", "warm"])
def test_a_child_that_exits_early_is_one_line_naming_it(kind, tmp_path):
    child = transport(kind, tmp_path, "exits")
    try:
        with pytest.raises(runtime_wire.WorkerFailed) as e:
            child.call({"steps": 3})
        assert str(e.value) == "the fake failed: fake: gave up on 3 steps"
        if kind == "warm":
            assert child.ready == runtime_wire.READY  # it had warmed up
            with pytest.raises(runtime_wire.WorkerFailed, match="gave up on 3 steps"):  # the same failure again
                child.call({"steps": 1})
    finally:
        child.close()


@pytest.mark.parametrize("kind", ["fresh", "warm"])
def test_a_child_on_another_version_of_the_wire_is_one_line(kind, tmp_path):
    child = transport(kind, tmp_path, "speaks 99")
    try:
        with pytest.raises(runtime_wire.WorkerFailed) as e:
            child.call({"steps": 3})
    finally:
        child.close()
    assert str(e.value).startswith("the fake speaks wire version 99, this gluonperf wire version 1")
    assert "\n" not in str(e.value)
    if kind == "warm":
        assert child.ready is None and child.proc.returncode is not None  # refused at its first line, and stopped

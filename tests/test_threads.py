import sys

import pytest

from gluonperf.runtime.threads import idle_warnings, omp_threads
from helpers import run_leaving_nothing


def test_default_threads_leave_half_of_a_no_smt_machine_idle():
    w = idle_warnings(["cpu0"], {}, cores=2, logical=2)
    assert len(w) == 1 and "OMP_NUM_THREADS unset" in w[0] and "set OMP_NUM_THREADS=2" in w[0]
    # with hyper-threading MXNet's halving gives one thread per core: nothing idle
    assert idle_warnings(["cpu0"], {}, cores=4, logical=8) == []


def test_explicit_threads():
    assert "set OMP_NUM_THREADS=8" in idle_warnings(["cpu"], {"OMP_NUM_THREADS": "1"}, cores=8, logical=8)[0]
    assert idle_warnings(["cpu"], {"OMP_NUM_THREADS": "8"}, cores=8, logical=8) == []
    assert omp_threads({"MXNET_OMP_MAX_THREADS": "3", "OMP_NUM_THREADS": "1"}, logical=8) == 3


def test_contexts_times_threads_oversubscribe():
    w = idle_warnings(["cpu0", "cpu1"], {"OMP_NUM_THREADS": "2", "MXNET_CPU_TEMP_COPY": "64"}, cores=2, logical=2)
    assert len(w) == 1 and "oversubscribe" in w[0] and "OMP_NUM_THREADS=1" in w[0]
    assert idle_warnings(["cpu0", "cpu1"], {"OMP_NUM_THREADS": "1", "MXNET_CPU_TEMP_COPY": "64"},
                         cores=2, logical=2) == []


def test_contexts_that_share_few_workspaces_wait_for_each_other():
    w = idle_warnings(["cpu0", "cpu1"], {"OMP_NUM_THREADS": "1"}, cores=2, logical=2)
    assert len(w) == 1 and "MXNET_CPU_TEMP_COPY unset" in w[0] and "MXNET_CPU_TEMP_COPY=64" in w[0]
    assert idle_warnings(["cpu0"], {"OMP_NUM_THREADS": "2"}, cores=2, logical=2) == []
    from gluonperf.runtime.threads import apply_thread_defaults
    import sys
    loaded = sys.modules.pop("mxnet", None)  # pretend MXNet is not loaded yet
    try:
        env = {}
        note = apply_thread_defaults(2, environ=env, taken=0)
        assert env == {"OMP_NUM_THREADS": str(max(1, __import__("gluonperf.runtime.threads").runtime.threads.physical_cores() // 2)),
                       "MXNET_CPU_TEMP_COPY": "64"}
        assert "OMP_NUM_THREADS" in note and "MXNET_CPU_TEMP_COPY" in note and "\n" not in note
        env = {"MXNET_CPU_TEMP_COPY": "8", "OMP_NUM_THREADS": "1"}
        assert apply_thread_defaults(2, environ=env) is None and env["MXNET_CPU_TEMP_COPY"] == "8"
        env = {}
        apply_thread_defaults(1, environ=env, taken=0)
        assert "MXNET_CPU_TEMP_COPY" not in env  # one context needs no more workspaces
    finally:
        if loaded is not None:
            sys.modules["mxnet"] = loaded
    w = idle_warnings(["cpu0", "cpu1", "cpu2"], {"OMP_NUM_THREADS": "1"}, cores=2, logical=2)
    assert any("3 CPU contexts on 2 cores" in line for line in w)


def test_engine_and_onednn_traps():
    env = {"OMP_NUM_THREADS": "2", "MXNET_ENGINE_TYPE": "NaiveEngine", "MXNET_MKLDNN_ENABLED": "0"}
    w = idle_warnings(["cpu0"], env, cores=2, logical=2)
    assert any("NaiveEngine" in line for line in w)
    assert any("MXNET_MKLDNN_ENABLED=0" in line and "unset it" in line for line in w)


def test_gpu_contexts_get_no_cpu_thread_warning():
    assert idle_warnings(["gpu0", "gpu1"], {}, cores=2, logical=2) == []
    assert all("\n" not in line for line in idle_warnings(["cpu0"], {}, cores=16, logical=16))


@pytest.mark.alone  # the default follows the load: another test's process takes a core
def test_apply_thread_defaults_only_fills_an_unset_variable_before_mxnet_loads():
    import os
    import subprocess
    import sys

    import mxnet  # noqa: F401  (loaded: too late to change anything)
    from gluonperf.runtime.threads import apply_thread_defaults, recommended_threads
    assert recommended_threads(2, cores=8) == 4 and recommended_threads(3, cores=2) == 1
    env = {"OMP_NUM_THREADS": "3"}
    assert apply_thread_defaults(environ=env) is None and env["OMP_NUM_THREADS"] == "3"
    env = {}
    assert apply_thread_defaults(environ=env) is None and env == {}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MXNET_OMP_MAX_THREADS")}
    code = ("import os; from gluonperf.runtime.threads import apply_thread_defaults as a, recommended_threads as r; "
            "note = a(); print(os.environ['OMP_NUM_THREADS'] == str(r()), 'OMP_NUM_THREADS' in note)")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=dict(clean, PYTHONPATH=root),
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", "True"], out.stderr
    code = ("import os; from gluonperf.cli import common as cli; "
            "print(cli.thread_defaults(['--epochs', '1', '--help']), 'OMP_NUM_THREADS' in os.environ)")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=dict(clean, PYTHONPATH=root),
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["None", "False"], out.stderr  # --help runs nothing: no default, no load sample


def test_cpu_contexts_in_argv():
    from gluonperf.runtime.threads import cpu_contexts_in_argv
    assert cpu_contexts_in_argv([]) == 1
    assert cpu_contexts_in_argv(["--ctx", "cpu0,cpu1", "--epochs", "1"]) == 2
    assert cpu_contexts_in_argv(["--ctx=gpu0,gpu1"]) == 1


def test_local_dist_workers_count_as_contexts_that_run_at_once():
    env = {"OMP_NUM_THREADS": "1", "GLUONPERF_LOCAL_WORKERS": "2"}
    assert idle_warnings(["cpu0"], env, cores=2, logical=2) == []  # 2 workers x 1 thread: both cores busy
    w = idle_warnings(["cpu0"], dict(env, OMP_NUM_THREADS="2"), cores=2, logical=2)
    assert len(w) == 1 and "oversubscribe" in w[0] and "2 workers on this machine" in w[0]
    w = idle_warnings(["cpu0"], {"OMP_NUM_THREADS": "1"}, cores=2, logical=2)
    assert len(w) == 1 and "keep 1 of 2 cores busy" in w[0]  # alone, one thread idles a core


def test_thread_default_leaves_out_cores_other_processes_hold():
    import sys

    from gluonperf.runtime.threads import TAKEN_VARIABLE, apply_thread_defaults, recommended_threads
    assert recommended_threads(1, cores=4, taken=1) == 3 and recommended_threads(2, cores=4, taken=1) == 1
    assert recommended_threads(1, cores=2, taken=5) == 1
    loaded = sys.modules.pop("mxnet", None)  # pretend MXNet is not loaded yet
    try:
        env = {}
        note = apply_thread_defaults(1, environ=env, taken=1)
        cores = __import__("gluonperf.runtime.threads").runtime.threads.physical_cores()
        if cores > 1:
            assert env == {"OMP_NUM_THREADS": str(cores - 1), TAKEN_VARIABLE: "1"}
            assert "busy with other processes" in note
            # gluonperf's own choice for the free cores is not an idle-core trap
            assert idle_warnings(["cpu0"], env) == []
        env = {}
        apply_thread_defaults(1, environ=env, taken=0)
        assert TAKEN_VARIABLE not in env
    finally:
        if loaded is not None:
            sys.modules["mxnet"] = loaded
    # the same thread count chosen by the user, on an idle machine, is still reported
    assert idle_warnings(["cpu0"], {"OMP_NUM_THREADS": "1"}, cores=2, logical=2)


def test_settings_notes_wait_for_the_work_and_vanish_before_an_error(capsys):
    """cli.note_later: shown before the command's first output (or at its end), dropped
    when it stops on bad input, so that the error is the only line."""
    import pytest
    from gluonperf import UserError
    from gluonperf.cli import common as cli

    def fails(argv):
        cli.note_later("note: threads")
        raise UserError("bad input")

    def works(argv):
        cli.note_later("note: threads")
        cli.note("wrote x")
        return 0

    def quiet(argv):
        cli.note_later("note: threads")

    for main, code, err in ((fails, 2, "prog: error: bad input\n"), (works, 0, "note: threads\nwrote x\n"),
                            (quiet, 0, "note: threads\n")):
        with pytest.raises(SystemExit) as stop:
            cli.run(main, "prog", [])
        assert stop.value.code == code and capsys.readouterr().err == err


def test_busy_note_follows_what_other_processes_take_now_not_the_load_average(monkeypatch):
    """A command started within a minute after heavy work ended found a load average of 2.3 on
    2 cores and called the idle machine busy: the note now follows busy_cores (the machine's
    busy share while this process sleeps), and reuses the thread default's reading."""
    import os

    from gluonperf.runtime import threads
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 8.0, 8.0))  # work that just ended, on 2 cores
    calls = []
    monkeypatch.setattr(threads.psutil, "cpu_percent", lambda interval=None, percpu=False: calls.append(1) or 0.0)
    monkeypatch.setattr(threads, "_last_reading", [], raising=False)
    assert threads.load_warning(cores=2) is None  # nothing else runs now
    threads.cores_taken()  # the thread default's reading at start-up ...
    calls.clear()
    assert threads.load_warning(cores=2) is None and calls == []  # ... is the one judged: no second wait
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    note = threads.load_warning(cores=2, busy=1.6)
    assert note and "1.6 of the 2 cores" in note and "load average" not in note and "\n" not in note
    assert threads.load_warning(cores=2, busy=0.9) is None  # under half the cores


@pytest.mark.alone  # makes load: a busy loop on every processor
def test_busy_note_when_other_processes_take_the_cores(monkeypatch):
    """The reverse, for real: other processes spin on every processor while the load average
    (stale) says the machine is idle. The loops take all the machine's CPU time, twice the
    threshold of half the cores, measured over a whole second."""
    import os
    import subprocess
    import sys
    import time

    import psutil
    from gluonperf.runtime import threads
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setattr(threads, "_last_reading", [], raising=False)
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(threads.logical_cpus())]
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until each loop runs (Python's start-up is over)
            if all(sum(psutil.Process(p.pid).cpu_times()[:2]) > 0.3 for p in loops):
                break
            time.sleep(0.1)
        note = threads.load_warning(interval=1.0)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    assert note and "the machine is busy" in note, note


def test_a_setting_mxnet_cannot_read_is_named():
    """MXNet 1.9.1 aborts as it loads on OMP_NUM_THREADS=abc (dmlc::ParamError, exit 134) and on
    MXNET_MKLDNN_ENABLED=yes; it takes ' 2', '+2' and an empty value, and true/false/1/0."""
    from gluonperf.runtime.threads import unreadable_setting
    for fine in ({}, {"OMP_NUM_THREADS": " 2"}, {"OMP_NUM_THREADS": "+2"}, {"OMP_NUM_THREADS": ""},
                 {"MXNET_MKLDNN_ENABLED": "FALSE"}, {"MXNET_EXEC_BULK_EXEC_TRAIN": "0"}):
        assert unreadable_setting(fine) is None, fine
    assert unreadable_setting({"OMP_NUM_THREADS": "2,1"}).startswith("OMP_NUM_THREADS='2,1': MXNet reads it as a whole")
    assert unreadable_setting({"MXNET_CPU_WORKER_NTHREADS": "1.5"}).startswith("MXNET_CPU_WORKER_NTHREADS='1.5'")
    assert unreadable_setting({"MXNET_MKLDNN_ENABLED": "yes"}).startswith("MXNET_MKLDNN_ENABLED='yes': MXNet reads it as true")


@pytest.mark.parametrize("argv, env", [
    (["gluonperf.train", "--dataset", "digits", "--json", "OUT"], {"OMP_NUM_THREADS": "abc"}),
    (["gluonperf.tune", "--json", "OUT", "--", sys.executable, "tests/user_scripts/newcomer_mlp.py"],
     {"MXNET_MKLDNN_ENABLED": "yes"}),
])
def test_commands_refuse_what_would_abort_mxnet_in_one_line(argv, env, tmp_path):
    """Without the check, MXNet aborted the command (or tune's every run) with a C++ message."""
    out = tmp_path / "out.json"
    done = run_leaving_nothing(["-m", *[str(out) if a == "OUT" else a for a in argv]], 60, **env)
    (name, value), = env.items()
    assert done.returncode == 2, done.stderr
    line, = done.stderr.strip().splitlines()
    assert line.startswith("python -m %s: error: %s=%r: MXNet reads it as " % (argv[0], name, value)), line
    assert not out.exists()


def test_a_command_that_never_loads_mxnet_is_not_refused(tmp_path):
    done = run_leaving_nothing(["-m", "gluonperf.compare", str(tmp_path / "a.json"), str(tmp_path / "b.json")], 60,
                               OMP_NUM_THREADS="abc")
    assert done.returncode == 2 and "OMP_NUM_THREADS" not in done.stderr and "a.json" in done.stderr, done.stderr

"""Every command and subcommand the README shows, run as a user runs it.

Each runs as a subprocess from a clean environment (no OMP_*/MXNET_* preset, so the
command's own thread defaults apply), at small sizes, with a timeout, with `--ctx cpu`
and `--ctx cpu0,cpu1` where the command takes contexts. Checked: exit code, the table's
columns, the JSON records, file modes (the user's umask), and that no process of the
run is left behind. Then the README's sequences that share state (save then resume into
one directory, the launcher's output folder), signals sent mid-run, kill -9 during a
checkpoint save, and the stall guard.
"""
import json
from concurrent.futures import ThreadPoolExecutor
import os
import re
import random
import signal
import subprocess
import sys
import time

import psutil
import pytest

from helpers import HANGING_MXNET, ROOT, marked_env, processes_of, run_leaving_nothing, shared_run
from gluonperf import bench
from gluonperf.records import header_name

PY = sys.executable
TIMEOUT = 240


def command(args, tmp_path, timeout=TIMEOUT, **env):
    """Run `python <args>` from the project root as a user would; check that nothing of
    the run is left running afterwards; returns the CompletedProcess."""
    return run_leaving_nothing(args, timeout, **env)


def header(stdout):
    """The column names of the (first) table: the line above the first line of dashes (two
    spaces apart: an interval's column is 'speedup (95% CI)')."""
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("---") and i:
            return re.split(r"\s{2,}", lines[i - 1].strip())
    raise AssertionError("no table in:\n" + stdout)


def fields(headers, columns):
    """The record fields (among `columns`) that table `headers` show, their units said once:
    'speedup (95% CI)' is speedup, 'images/s' images_per_s, 'median (us)' median_s, 'epoch (s)'
    epoch_s beside 'epoch', 'rss_peak (MiB)' rss_peak_bytes (records.header_name)."""
    out = []
    for h in headers:
        name, _, inside = h.partition(" (")
        unit = inside.rstrip(")").split(", ")[0] in ("s", "ms", "us", "ns", "MiB")  # not an interval's level
        if name in columns and not unit:
            out.append(name)
        else:
            out.append(next((c for c in columns if c != name and header_name(c) == name), name))
    return out


def records(path):
    rows = [json.loads(line) for line in open(path)]
    assert rows, "no records in %s" % path
    for row in rows:
        assert row["bench"] and row["name"] and row["env"]["mxnet"], row
    return rows


def umask():
    value = os.umask(0)
    os.umask(value)
    return value


def assert_user_mode(path):
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask(), oct(os.stat(path).st_mode)


TWO = ["--ctx", "cpu0,cpu1"]

# (id, argv after `python -m`, columns the table must have, bench names the JSON must hold): every
# bench subcommand's quick run (gluonperf.bench: QUICK), whose table shows its COLUMNS but for
# device_peak_bytes (GPU contexts only) and error (a failed variant only); then train's
BENCH = [(m.NAME, ["gluonperf.bench", m.NAME, *m.QUICK],
          [c for c in m.COLUMNS if c not in ("device_peak_bytes", "error")], set(m.RECORDS))
         for m in bench.SUBCOMMANDS if m.QUICK is not None] + [
    ("train", ["gluonperf.train", "--dataset", "digits", "--model", "lenet", "--epochs", "1", "--limit", "256",
               "--batch-size", "32"], ["epoch", "loss", "test_top1", "train_images_per_s"], {"train", "growth"}),
    ("scaling", ["gluonperf.train", "--dataset", "digits", "--model", "lenet", "--scaling", "--steps", "2",
                 "--batch-size", "32", "--limit", "256"], ["devices", "step_s", "t1_s", "t2_s", "speedup"],
     {"scaling"}),
]


# With --ctx cpu0,cpu1 too where that runs other code than the default: hybridize runs on the
# first context of --ctx, parallel and overlap pair cpu0 with cpu1 either way, and scratch and
# scaling run on two contexts elsewhere (test_user_set_threads_do_not_hang_two_contexts,
# tests/test_train.py).
ON_TWO = ("allreduce", "train")


@pytest.mark.parametrize("name,argv,columns,benches,ctx", [
    (*case, ctx) for case in BENCH for ctx in ([[], TWO] if case[0] in ON_TWO else [[]])],
    ids=["%s-%s" % (case[0], label) for case in BENCH
         for label in (["cpu", "cpu0,cpu1"] if case[0] in ON_TWO else ["cpu"])])
def test_readme_command_as_a_user_runs_it(name, argv, columns, benches, ctx, tmp_path_factory):
    # run once in the session: tests/test_report.py draws the same runs' records
    p, out = shared_run(tmp_path_factory, [*argv, *ctx])
    assert p.returncode == 0, p.stderr
    shown = fields(header(p.stdout), columns)  # 'speedup (95% CI)': speedup and its interval; 'median (us)': median_s
    rule = next(line for line in p.stdout.splitlines() if line.startswith("---"))
    assert len(rule) <= 100, p.stdout  # fits a terminal (100 columns under a pipe), what it leaves out named
    if name in bench.BY_NAME:  # bench: its COLUMNS, in their order, the first always
        assert shown[0] == columns[0] and shown == [c for c in columns if c in shown], p.stdout
        assert set(columns) - set(shown) <= set(" ".join(p.stderr.split()).split("not shown: ")[1].split(
            " (--wide")[0].split(", ")) | {c for c in columns if re.search(r"_ci_(low|high)$|_n$", c)} \
            if "not shown: " in p.stderr else set(columns) - set(shown) <= {
                c for c in columns if re.search(r"_ci_(low|high)$|_n$", c)}, p.stderr
    else:
        assert set(columns) <= set(shown), p.stdout
    rows = records(out)
    assert {r["bench"] for r in rows} <= benches | {"export"} and rows[0]["bench"] in benches
    assert_user_mode(out)
    assert "Traceback" not in p.stderr
    if name in ("parallel", "overlap"):  # two contexts run at once: one OpenMP thread each on 2 cores
        assert rows[0]["env"]["contexts"] == ["cpu(0)", "cpu(1)"]
        assert "CPU context(s)" not in p.stderr  # no idle-core warning about one context


@pytest.mark.skipif(psutil.cpu_count(logical=False) is None or psutil.cpu_count(logical=False) < 2,
                    reason="needs a core to take and one to keep")
@pytest.mark.alone
def test_thread_default_leaves_the_core_another_process_holds(tmp_path):
    """2 OpenMP threads on 2 cores ran at 0.47x of 1 thread while one other process was busy:
    the default counts only the cores free when the command starts."""
    # the busy loop says when it spins, and the command starts only then (a sleep here raced its start-up)
    busy = subprocess.Popen([PY, "-c", "print('spinning', flush=True)\nwhile True: pass"], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert busy.stdout.readline() == "spinning\n"
        out = tmp_path / "out.json"
        p = command(["-m", "gluonperf.train", "--dataset", "digits", "--model", "lenet", "--epochs", "1",
                     "--limit", "128", "--json", str(out)], tmp_path)
    finally:
        busy.kill()
        busy.wait()
        busy.stdout.close()
    assert p.returncode == 0, p.stderr
    assert "busy with other processes" in p.stderr
    assert "keep" not in p.stderr  # no idle-core warning about the thread count gluonperf chose
    env = records(out)[0]["env"]["env"]
    taken = int(env["GLUONPERF_CORES_TAKEN"])
    from gluonperf.runtime.threads import physical_cores
    assert taken >= 1 and env["OMP_NUM_THREADS"] == str(max(1, physical_cores() - taken))


@pytest.mark.parametrize("argv", [
    ["gluonperf.bench", "parallel", "--repeat", "2"],
    ["gluonperf.bench", "scratch", "--ctx", "cpu0,cpu1", "--epochs", "1", "--limit", "1024"],
], ids=["parallel", "scratch"])
def test_user_set_threads_do_not_hang_two_contexts(argv, tmp_path):
    """OMP_NUM_THREADS=2 with two CPU contexts at once hung MXNet's OpenBLAS (nd.dot):
    the products go through oneDNN, and the command warns about oversubscription."""
    p = command(["-m", *argv], tmp_path, timeout=120, OMP_NUM_THREADS="2")
    assert p.returncode == 0, p.stderr
    assert "oversubscribe" in p.stderr


@pytest.mark.parametrize("argv", [
    ["gluonperf.bench", "scratch", "--ctx", "cpu0,cpu1", "--batch-size", "1"],
    ["gluonperf.train", "--dataset", "fashion-mnist", "--data-dir", "{empty}"],
    ["gluonperf.profile", "--dataset", "fashion-mnist", "--data-dir", "{empty}"],
], ids=["scratch-batch", "train-no-data", "profile-no-data"])
def test_bad_input_is_the_only_line_even_after_the_thread_default(argv, tmp_path):
    """The commands choose their thread settings (and say so) before they read their input;
    a command that then stops on bad input prints only its one error line. Fashion-MNIST
    is made unreachable (MXNET_GLUON_REPO on a closed local port) whatever the network."""
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [a.replace("{empty}", str(empty)) for a in argv]
    p = command(["-m", *argv], tmp_path, timeout=120, MXNET_GLUON_REPO="https://127.0.0.1:9/")
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "error:" in p.stderr


@pytest.mark.parametrize("argv", [
    ["-m", "gluonperf.train", "--dataset", "digits", "--model", "lenet", "--ctx", "cpu0,cpu1", "--epochs", "1"],
    ["-m", "gluonperf.profile", "--model", "lenet", "--batch-size", "16", "--ceiling", "quick"],
    ["-m", "gluonperf.bench", "footprint", "--model", "lenet", "--batch-sizes", "16"],
    ["benchmarks/train_throughput.py", "--batch-sizes", "16", "--rounds", "1"],
], ids=["train", "profile", "bench-footprint", "train_throughput"])
def test_bfloat16_below_avx512_is_one_line_before_anything_runs(argv, tmp_path):
    """oneDNN 2.4 has no bfloat16 kernels below AVX-512: on an AVX2 AMD EPYC Zen 3, `train
    --dtype bfloat16` died in MXNet ("could not create a primitive descriptor iterator")
    with a traceback from MXNet's exit hook. DNNL_MAX_CPU_ISA=AVX2 holds oneDNN there on any
    x86 CPU, so the refusal is tested on every machine."""
    out = tmp_path / "out.jsonl"
    p = command([*argv, "--dtype", "bfloat16", "--json", str(out)], tmp_path, timeout=120, DNNL_MAX_CPU_ISA="AVX2")
    lines = [l for l in p.stderr.strip().splitlines() if not l.startswith(("note: ", "warning: "))]
    assert p.returncode == 2 and p.stdout == "" and "Traceback" not in p.stderr, p.stderr
    assert len(lines) == 1 and "--dtype bfloat16 needs AVX-512" in lines[0] and "use float32" in lines[0], p.stderr
    assert not out.exists()


@pytest.mark.alone  # beside other tests MXNet 1.9.1 once aborted (free(): invalid next size) as the two errors raced
def test_an_mxnet_error_on_two_contexts_leaves_no_traceback_at_exit(tmp_path):
    """An operator that fails on each of two contexts: the command reports the first in one
    line, and MXNet's exit hook raised the other again, with a traceback (before cli.run
    dropped it). A bfloat16 convolution under DNNL_MAX_CPU_ISA=AVX2 fails on any x86 CPU."""
    code = ("import mxnet as mx\n"
            "from mxnet.contrib.amp.amp import bfloat16\n"
            "from gluonperf.cli import common as cli\n"
            "def main(argv):\n"
            "    outs = []\n"
            "    for i in range(2):\n"
            "        x = mx.nd.amp_cast(mx.nd.ones((2, 3, 8, 8), ctx=mx.cpu(i)), dtype=bfloat16)\n"
            "        w = mx.nd.amp_cast(mx.nd.ones((4, 3, 3, 3), ctx=mx.cpu(i)), dtype=bfloat16)\n"
            "        outs.append(mx.nd.Convolution(x, w, kernel=(3, 3), no_bias=True, num_filter=4))\n"
            "    outs[0].wait_to_read()\n"
            "cli.run(main, 'two-errors')\n")
    p = command(["-c", code], tmp_path, timeout=60, DNNL_MAX_CPU_ISA="AVX2")
    assert p.returncode == 1 and "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, p.stderr
    # MXNet's engine thread logs the other context's failure to stderr while the line is being
    # written, in several writes of its own: the line is one write, so it stays whole (print()'s
    # two writes let MXNet's log in before the newline), though it may follow a piece of MXNet's
    assert p.stderr.count("two-errors") == 1, p.stderr
    assert "two-errors: MXNet error: MXNetError: could not create a primitive descriptor iterator\n" in p.stderr


def test_bench_memory_plot_json_and_trace(tmp_path):
    from gluonperf.measure.trace import event_names, load_trace
    out, png, trace = tmp_path / "m.json", tmp_path / "m.png", tmp_path / "m-trace.json"
    p = command(["-m", "gluonperf.bench", "memory", "--batches", "6", "--every", "1,2", "--batch-size", "64",
                 "--features", "64", "--plot", str(png), "--json", str(out), "--trace", str(trace), "--wide"],
                tmp_path)
    assert p.returncode == 0, p.stderr
    assert {"name", "rss_peak_bytes", "max_in_flight"} <= set(header(p.stdout))
    rows = records(out)
    assert [r["name"] for r in rows] == ["sync every batch", "sync every 2", "no sync"]
    assert all(r["rss_peak_bytes"] > 0 for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "FullyConnected" in event_names(load_trace(trace))
    assert_user_mode(out)
    assert_user_mode(png)


def test_train_plot_save_and_csv_keep_the_users_umask(tmp_path):
    ckpt, png, csv = tmp_path / "ckpt", tmp_path / "t.png", tmp_path / "t.csv"
    p = command(["-m", "gluonperf.train", "--dataset", "digits", "--model", "mlp", "--epochs", "1",
                 "--limit", "128", "--batch-size", "32", "--save", str(ckpt), "--plot", str(png),
                 "--csv", str(csv)], tmp_path)
    assert p.returncode == 0, p.stderr
    for path in (png, csv, ckpt / "latest", ckpt / "epoch-0001" / "params"):
        assert_user_mode(path)


TRAIN = ["-m", "gluonperf.train", "--dataset", "digits", "--model", "lenet", "--batch-size", "32",
         "--limit", "256"]


def test_readme_save_then_resume_sequence(tmp_path):
    """The README's order: save one epoch, resume for more, then a new run may not save
    into the same directory (it would replace or prune the first run's checkpoints)."""
    ckpt = str(tmp_path / "ckpt")
    first = command(TRAIN + ["--epochs", "1", "--save", ckpt], tmp_path)
    assert first.returncode == 0, first.stderr
    resumed = command(TRAIN + ["--epochs", "3", "--resume", ckpt], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stderr
    assert sorted(d for d in os.listdir(ckpt) if d.startswith("epoch-")) == ["epoch-0002", "epoch-0003"]
    before = {d: os.stat(os.path.join(ckpt, d)).st_mtime for d in os.listdir(ckpt)}
    again = command(TRAIN + ["--epochs", "1", "--save", ckpt], tmp_path)
    assert again.returncode == 2
    lines = again.stderr.strip().splitlines()
    assert "already holds checkpoints of another run" in lines[-1] and "--resume" in lines[-1]
    assert "Traceback" not in again.stderr
    assert {d: os.stat(os.path.join(ckpt, d)).st_mtime for d in os.listdir(ckpt)} == before
    assert open(os.path.join(ckpt, "latest")).read().strip() == "epoch-0003"


def test_a_second_writer_of_a_checkpoint_directory_is_refused(tmp_path):
    """The first writer holds the directory's lock until the test lets it go: once its first
    checkpoint is saved it is stopped (SIGSTOP keeps its open lock file, and so the lock),
    the second run tries, and only then is the first one killed. No race with how fast
    the first one trains."""
    ckpt = str(tmp_path / "ckpt")
    env, mark = marked_env()
    first = subprocess.Popen([PY] + TRAIN + ["--epochs", "1000", "--save", ckpt], cwd=ROOT, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(ckpt, "latest")) and time.time() < deadline:
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.2)
        first.send_signal(signal.SIGSTOP)
        assert first.poll() is None
        second = command(TRAIN + ["--epochs", "31", "--resume", ckpt], tmp_path)
        assert second.returncode == 2
        assert "being written by another run (pid %d)" % first.pid in second.stderr.strip().splitlines()[-1]
    finally:
        first.kill()
        first.wait()
        first.stderr.close()


def test_kill_9_while_saving_loses_nothing(tmp_path):
    """kill -9 at random moments of a run that saves every epoch; each time `latest`
    must name a complete checkpoint that resumes, and the run finished by resuming ends
    with the same parameters as an uninterrupted run.

    Equal to the last bit only at one thread count: each run's default follows the load
    when it starts (a core busy with another test under pytest -n 2 gave one run 1 thread,
    another 2, and checksums 1e-10 apart), so every run here is given one.

    20 epochs, so that no run ends before its kill on a machine of any speed: a kill lands at most
    55 ms after a save (the 5 ms poll and the random wait), and the first run, killed after its
    first save, has 19 epochs to go (27 ms each on a 2-core Xeon, 0.5 s; a machine twice as
    fast still needs 0.25 s, and its exit). With 6, the 5 epochs left took 0.14 s here."""
    from gluonperf.training.checkpoints import read_checkpoint
    argv = TRAIN + ["--model", "mlp", "--epochs", "20", "--log-interval", "0"]
    whole = str(tmp_path / "whole")
    p = command(argv + ["--save", whole, "--json", str(tmp_path / "whole.json")], tmp_path, OMP_NUM_THREADS="1")
    assert p.returncode == 0, p.stderr
    expected = records(tmp_path / "whole.json")[-1]["param_checksum"]

    ckpt = str(tmp_path / "ckpt")
    rng = random.Random(0)
    kills = 0
    while kills < 3:
        env, mark = marked_env(OMP_NUM_THREADS="1")
        start = argv + (["--resume", ckpt] if os.path.exists(os.path.join(ckpt, "latest")) else ["--save", ckpt])
        proc = subprocess.Popen([PY, *start], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        saved_before = read_checkpoint(ckpt)[1]["epoch"] if os.path.exists(os.path.join(ckpt, "latest")) else 0
        deadline = time.time() + 120
        # wait for the next save to begin; the first run, until its first save is complete
        # (`latest` written): a kill before any checkpoint exists leaves nothing to check
        while time.time() < deadline and proc.poll() is None:
            names = os.listdir(ckpt) if os.path.isdir(ckpt) else []
            if "latest" in names and (any(n.startswith(".tmp-") for n in names)
                                      or read_checkpoint(ckpt)[1]["epoch"] > saved_before):
                break
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        if proc.poll() is not None:  # finished all epochs before we could kill it
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        kills += 1
        path, meta = read_checkpoint(ckpt)  # raises if `latest` names an incomplete checkpoint
        assert meta["epoch"] >= 1 and os.path.getsize(os.path.join(path, "params")) > 0
    assert kills >= 1
    done = command(argv + ["--resume", ckpt, "--json", str(tmp_path / "resumed.json")], tmp_path,
                   OMP_NUM_THREADS="1")
    assert done.returncode == 0, done.stderr
    assert records(tmp_path / "resumed.json")[-1]["param_checksum"] == expected


def test_launcher_example_creates_the_workers_output_folder(tmp_path):
    """The workers run on the interpreter running the suite (a bare `python` is the PATH's, which
    has no MXNet when the suite is started without the venv activated)."""
    out = tmp_path / "fresh" / "out"
    p = command(["-m", "gluonperf.launch", "-n", "2", "-s", "1", "--timeout", "120", "--", PY,
                 "tests/dist_worker.py", str(out), "--steps", "4"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["params-rank0.npz", "params-rank1.npz"]


def test_compare_two_runs(tmp_path):
    runs = []
    for i in range(2):
        path = tmp_path / ("run%d.json" % i)
        p = command(["-m", "gluonperf.bench", "hybridize", "--repeat", "2", "--number", "20", "--json", str(path)],
                    tmp_path)
        assert p.returncode == 0, p.stderr
        runs.append(str(path))
    p = command(["-m", "gluonperf.compare", *runs, "--fail-above", "500%"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert "imperative" in p.stdout


def _wait_for_children(proc, count=1, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        kids = psutil.Process(proc.pid).children(recursive=True)
        if len(kids) >= count:
            return kids
        assert proc.poll() is None, "exited early"
        time.sleep(0.1)
    raise AssertionError("no child process started")


def _wait_for_runs(proc, count, timeout=200):
    """Wait until `proc` has started `count` different children (one per run: the ones
    before the last have finished)."""
    seen = set()
    deadline = time.time() + timeout
    while len(seen) < count and time.time() < deadline:
        assert proc.poll() is None, proc.communicate()
        seen.update(p.pid for p in psutil.Process(proc.pid).children())
        time.sleep(0.05)
    assert len(seen) >= count, "only %d runs started" % len(seen)


def _signal_when(proc, ready, sig, timeout=60):
    """Call `ready()` (it waits for the moment), send `sig` to `proc`; its (stdout, stderr).
    `proc` is killed if anything fails on the way."""
    try:
        ready()
        proc.send_signal(sig)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()


def _assert_none_left(mark):
    deadline = time.time() + 10
    while processes_of(mark) and time.time() < deadline:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("argv", [
    ["-m", "gluonperf.tune", "--model", "lenet", "--levers", "threads", "--rounds", "2", "--steps", "400"],
    ["-m", "gluonperf.bench", "memory", "--batches", "400", "--every", "1"],
], ids=["tune", "bench-memory"])
def test_a_signal_mid_run_leaves_no_process_and_no_temporary_files(argv, sig, tmp_path, private_tmp):
    tmp = private_tmp
    env, mark = marked_env(TMPDIR=str(tmp))
    proc = subprocess.Popen([PY, *argv], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    # once the child is loading MXNet or running
    out, err = _signal_when(proc, lambda: (_wait_for_children(proc), time.sleep(1.5)), sig, timeout=30)
    assert proc.returncode == 128 + sig, err
    assert "%s received" % signal.Signals(sig).name in err and "Traceback" not in err
    _assert_none_left(mark)
    assert not list(tmp.iterdir())


def test_a_stopped_tune_keeps_the_runs_it_finished(tmp_path, private_tmp, sig=signal.SIGINT):
    """Interrupting a long tune (hours, for a real model) must not lose the runs already
    measured: they go to --json (the unfinished lever's rows marked partial) and their
    table to stdout; exit 128 + signal; no process or temporary file left."""
    tmp = private_tmp
    out = tmp_path / "tune.json"
    env, mark = marked_env(TMPDIR=str(tmp))
    proc = subprocess.Popen([PY, "-m", "gluonperf.tune", "--model", "mlp", "--batch-sizes", "8", "--steps", "2",
                             "--rounds", "4", "--levers", "engine", "--runner", "train",
                             "--json", str(out)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stdout, err = _signal_when(proc, lambda: _wait_for_runs(proc, 4), sig)  # a child a run: three have finished (B c B)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err and "kept the" in err and str(out) in err, err
    rows = records(out)
    assert rows and all(r["bench"] == "tune" and r["lever"] == "engine" and "env" in r for r in rows), rows
    assert all(r["partial"] is True and 1 <= r["rounds"] < 8 for r in rows), rows  # engine: B c B, 4 rounds
    assert not any(r["name"] == "best" for r in rows)
    assert "stopped before the end" in stdout and "partial" in header(stdout)
    _assert_none_left(mark)
    assert not list(tmp.iterdir()) and not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_a_stopped_footprint_sweep_keeps_the_runs_it_finished(tmp_path):
    """bench footprint runs one process per (setting, batch size): SIGTERM after two have
    finished leaves their rows in --json."""
    out = tmp_path / "fp.json"
    env, mark = marked_env()
    proc = subprocess.Popen([PY, "-m", "gluonperf.bench", "footprint", "--model", "mlp", "--batch-sizes",
                             "8,16,32,64,128,256", "--hybridize", "static", "--steps", "2", "--json", str(out)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, err = _signal_when(proc, lambda: _wait_for_runs(proc, 3), signal.SIGTERM)  # two runs have finished
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "kept the" in err and "Traceback" not in err, err
    rows = records(out)
    assert len(rows) >= 2 and [r["batch_size"] for r in rows][:2] == [8, 16], rows
    assert all(r["bench"] == "footprint" and r["peak_above_bytes"] > 0 for r in rows)
    assert "stopped before the end" in stdout
    _assert_none_left(mark)


def test_a_stopped_training_run_keeps_the_epochs_it_finished(tmp_path):
    """Ctrl-C in epoch 3 of a long run: epochs 1 and 2 are in --json, --plot and the table."""
    import queue
    import threading
    out = tmp_path / "train.json"
    env, mark = marked_env()
    proc = subprocess.Popen([PY, "-m", "gluonperf.train", "--model", "mlp", "--dataset", "synthetic", "--limit",
                             "2048", "--batch-size", "32", "--epochs", "1000", "--workers", "0", "--log-interval",
                             "0", "--json", str(out), "--plot", str(tmp_path / "train.png")], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in proc.stderr], daemon=True)
    reader.start()
    err = []
    try:
        deadline = time.time() + 120
        while not any(l.startswith("epoch 2:") for l in err) and time.time() < deadline:
            try:
                err.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, "".join(err)
        proc.send_signal(signal.SIGINT)
        stdout = proc.stdout.read()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=60)  # it ends at the end of stderr: every line is in the queue (a sleep here raced it)
    assert not reader.is_alive(), "stderr still open after the run ended"
    while not lines.empty():
        err.append(lines.get())
    err = "".join(err)
    assert proc.returncode == 130, err
    assert "kept the" in err and str(out) in err and "Traceback" not in err, err
    rows = records(out)
    assert [r["epoch"] for r in rows][:2] == [1, 2] and all(r["train_images_per_s"] > 0 for r in rows)
    assert not any(r.get("partial") for r in rows)  # whole epochs: none was cut short
    assert (tmp_path / "train.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "stopped before the end" in stdout and "loss" in header(stdout)
    _assert_none_left(mark)


def test_the_stall_guard_stops_a_step_that_makes_no_progress(tmp_path):
    """A step that never ends (tests/hang: MXNet's sync points wait for ever, a stall on a
    machine of any speed) is stopped after --stall-timeout: exit 3, one line naming what the
    command was doing, where the main thread waited and the thread settings, no output file.
    With a second's timeout, what it was doing may still be MXNet's start-up, which takes longer
    than that on a loaded machine: the line then says so, and the frames it names are wherever
    the import was (a frame of gluonperf's among them), not always the experiment's."""
    out = tmp_path / "p.json"
    p = command(["-m", "gluonperf.bench", "parallel", "--cpu-size", "64", "--products", "2", "--stall-timeout", "1",
                 "--json", str(out)], tmp_path, **HANGING_MXNET)
    assert p.returncode == 3, p.stderr
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("python -m gluonperf.bench: stalled: no progress for 1 s while "), last
    doing = last.split(" while ", 1)[1].split(";")[0]
    assert doing == "start-up" or "parallel" in doing, last
    assert "OMP_NUM_THREADS=" in last.split("thread settings: ", 1)[1], last
    assert "gluonperf/" in last.split("the main thread waits in ", 1)[1], last  # in MXNet's start-up or the hung sync
    assert not out.exists() and not [f for f in os.listdir(tmp_path) if f.startswith(".tmp")]


def test_help_and_bad_flags_answer_without_loading_mxnet(tmp_path):
    """The parsers are built from gluonperf.config, without MXNet: --help and a flag
    argparse refuses answer in a tenth of a second, not after MXNet's 2 s start. An
    `mxnet` that cannot be imported stands in front of the real one to prove it."""
    fake = tmp_path / "no-mxnet" / "mxnet"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('MXNet was loaded')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(fake.parent), ROOT])}
    helps = [[c, "--help"] for c in ("train", "profile", "bench", "tune", "predict", "infer", "launch", "compare",
                                     "report")]
    helps += [["bench", e, "--help"] for e in ("hybridize", "async", "memory", "parallel", "overlap", "allreduce",
                                               "scratch", "footprint")]
    for argv in helps:
        p = command(["-m", "gluonperf." + argv[0], *argv[1:]], tmp_path, timeout=60, **env)
        assert p.returncode == 0 and "usage:" in p.stdout, (argv, p.stderr)
    for argv, words in [(["train", "--batch-size", "0"], "'0' must be at least 1"),
                        (["profile", "--dataset", "nope"], "invalid choice: 'nope'"),
                        (["bench", "scratch", "--dataset", "nope"], "invalid choice: 'nope'"),
                        (["bench", "footprint", "--hybridize", "fast"], "fast")]:
        p = command(["-m", "gluonperf." + argv[0], *argv[1:]], tmp_path, timeout=60, **env)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and words in lines[-1] and "MXNet was loaded" not in p.stderr, (argv, p.stderr)


def test_the_package_lists_its_commands_and_each_has_help(tmp_path):
    p = command(["-m", "gluonperf"], tmp_path, timeout=60)
    assert p.returncode == 0 and p.stderr == ""
    names = [line.split()[0] for line in p.stdout.split("commands:")[1].strip().splitlines()]
    assert {"bench", "train", "profile", "tune", "predict", "infer", "launch", "compare", "report",
            "dataset"} == set(names)
    with ThreadPoolExecutor(max_workers=2) as pool:  # independent processes: two at a time on two cores
        helps = pool.map(lambda n: (n, command(["-m", "gluonperf.%s" % n, "--help"], tmp_path, timeout=120)), names)
        for name, h in helps:
            assert h.returncode == 0 and "usage:" in h.stdout, (name, h.stderr)
    experiments = p.stdout.split("bench")[1].splitlines()[0]
    bench_help = command(["-m", "gluonperf.bench", "--help"], tmp_path, timeout=120).stdout
    assert all(e.strip() in bench_help for e in experiments.split(":")[1].split(","))
    bad = command(["-m", "gluonperf", "nope"], tmp_path, timeout=60)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "gluonperf.bench --help" in bad.stderr
    # `gluonperf train ...` (the console script) and `python -m gluonperf train ...` run the command
    run_train = command(["-m", "gluonperf", "train", "--help"], tmp_path, timeout=60)
    assert run_train.returncode == 0 and "python -m gluonperf.train" in run_train.stdout, run_train.stderr
    # the modules that are only a command's worker process say which command to run
    with ThreadPoolExecutor(max_workers=2) as pool:
        workers = pool.map(lambda m: (m, command(["-m", "gluonperf." + m[0], "--help"], tmp_path, timeout=120)),
                           [("workers.footprint", "bench footprint"), ("workers.memory", "bench memory"),
                            ("workers.coldstart", "infer"), ("workers.primitives", "infer"), ("workers.serving", "infer")])
        for (module, runs), w in workers:
            assert w.returncode == 2 and w.stdout == "" and "Traceback" not in w.stderr, w.stderr
            assert w.stderr.strip().splitlines() == [
                "python -m gluonperf.%s: error: this module is a worker process of python -m gluonperf.%s; "
                "run that (see its --help)" % (module, runs)]

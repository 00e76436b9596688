"""Horovod beside the parameter server: `train --kvstore horovod` run by `gluonperf.launch
--engine horovod` (horovodrun over Gloo) with 2 processes on this machine's CPU.

Two ranks at 32 images each train as one process at 64 (same seed, same samples per step: the
ranks' parts of the shuffled order interleave), so their weights agree with a single-process run
to float rounding (the reference is one Horovod process: its initialisation, finished before
the first epoch as in every multi-process run, draws other random numbers than a
single-machine kvstore's, which finishes it in the first step); a run stopped after 2 epochs and resumed ends as the 3-epoch run. With the
allreduce removed (tests/no_sync/sitecustomize.py) the ranks train apart and the end-of-epoch
check stops the job. Horovod is built by scripts/install-horovod, which .ci/run runs; without it
these tests are skipped, except on CI (CI=true), where they run and fail.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest

from gluonperf.runtime import horovod_launcher
from gluonperf.runtime.ps_launcher import Host
from gluonperf.training.horovod import device_of
from helpers import ROOT, clean_env, processes_of, run_leaving_nothing

pytestmark = pytest.mark.skipif(not horovod_launcher.available() and os.environ.get("CI") != "true",
                                reason="Horovod is not installed (bash scripts/install-horovod)")

PY = sys.executable
MLP = ["--model", "mlp", "--dataset", "synthetic", "--limit", "512", "--seed", "3", "--log-interval", "0",
       "--lr-decay", "none"]  # the learning rate of an epoch does not depend on how many follow


def launch(*flags, command, **env):
    return run_leaving_nothing(["-m", "gluonperf.launch", "--engine", "horovod", *flags, "--", *command],
                               timeout=240, **env)


def train(*flags):
    return [PY, "-m", "gluonperf.train", *MLP, *flags]


def records(path):
    """The epochs' records (bench 'train'); train writes its memory growth records first."""
    with open(path) as f:
        return [r for r in (json.loads(line) for line in f if line.strip()) if r["bench"] == "train"]


def rank_lines(stderr, epoch):
    """{rank: weights checksum} from each rank's epoch line (Horovod prefixes `[rank]<stderr>:`)."""
    return {int(r): float(w) for r, w in
            re.findall(r"\[(\d)\]<stderr>:epoch %d:.*weights checksum ([0-9.e+-]+)" % epoch, stderr)}


def test_two_ranks_train_as_one_process_at_the_same_global_batch_and_resume(tmp_path):
    one = tmp_path / "one.json"  # one process: Horovod's allreduce has nothing to do (size 1)
    done = launch("-n", "1", command=train("--kvstore", "horovod", "--batch-size", "64", "--epochs", "3",
                                           "--json", str(one)))
    assert done.returncode == 0, done.stderr
    expected = records(one)

    two, ckpt = tmp_path / "two.json", tmp_path / "ckpt"
    done = launch("-n", "2", "--timeout", "200",
                  command=train("--kvstore", "horovod", "--batch-size", "32", "--epochs", "2",
                                "--save", str(ckpt), "--json", str(two)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    # only rank 0 prints the table and writes the file; both ranks log equal weights
    assert done.stdout.count("global batch 64 on cpu0 (2 workers), kvstore horovod") == 1
    for epoch in (1, 2):
        ranks = rank_lines(done.stderr, epoch)
        assert sorted(ranks) == [0, 1] and ranks[0] == ranks[1], done.stderr
    got = records(two)
    assert [(r["name"], r["rank"], r["num_workers"], r["kvstore"], r["batch_size"]) for r in got] == \
        [("epoch 1", 0, 2, "horovod", 32), ("epoch 2", 0, 2, "horovod", 32)]
    assert all(r["weights_max_rel_diff"] == 0 for r in got)
    assert sorted(d for d in os.listdir(ckpt) if d.startswith("epoch-")) == ["epoch-0001", "epoch-0002"]

    resumed = tmp_path / "resumed.json"
    done = launch("-n", "2", "--timeout", "200",
                  command=train("--kvstore", "horovod", "--batch-size", "32", "--epochs", "3",
                                "--resume", str(ckpt), "--json", str(resumed)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resumed from" in done.stderr
    got = records(resumed)
    assert [r["name"] for r in got] == ["epoch 1", "epoch 2", "epoch 3"]
    for mine, theirs in zip(got, expected):  # the same model as one process trained, to rounding
        assert mine["weights_checksum"] == pytest.approx(theirs["weights_checksum"], rel=1e-5)
        assert abs(mine["test_top1"] - theirs["test_top1"]) <= 0.01


def test_ranks_that_train_apart_stop_the_job(tmp_path):
    """The allreduce removed (as MXNet's own kvstore='horovod' does without a word): each rank
    trains on its half alone, and the end-of-epoch check fails on every rank."""
    path = tmp_path / "apart.json"
    done = launch("-n", "2", "--timeout", "200",
                  command=train("--kvstore", "horovod", "--batch-size", "32", "--epochs", "2", "--json", str(path)),
                  PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tests", "no_sync"), ROOT]))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the workers' weights differ after epoch 1: rank 1's differ from rank 0's" in done.stderr
    assert "the gradients were not synchronised" in done.stderr
    assert "Traceback" not in done.stderr and "epoch 2:" not in done.stderr
    assert not path.exists()  # nothing reported of a run that trained two models


def is_rank(p):
    """Whether process `p` is a Horovod rank's gluonperf.train; False for one that ended (or became
    a zombie, as horovodrun's short-lived helpers do) between the listing and this reading."""
    import psutil
    try:
        return "gluonperf.train" in " ".join(p.cmdline()) and "HOROVOD_RANK" in p.environ()
    except (psutil.NoSuchProcess, psutil.AccessDenied):  # ZombieProcess is a NoSuchProcess
        return False


def test_a_dead_rank_stops_the_job_within_seconds_and_leaves_nothing(tmp_path):
    mark = uuid.uuid4().hex
    env = clean_env(GLUONPERF_TEST_RUN=mark)
    proc = subprocess.Popen([PY, "-m", "gluonperf.launch", "--engine", "horovod", "-n", "2", "--timeout", "200", "--",
                             *train("--kvstore", "horovod", "--batch-size", "8", "--epochs", "1000")],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 90
        ranks = []
        while time.monotonic() < end and len(ranks) < 2:  # both ranks started
            ranks = [p for p in processes_of(mark) if is_rank(p)]
            time.sleep(0.2)
        assert len(ranks) == 2, "the two ranks never ran"
        time.sleep(2)  # in hvd.init or training: either way the other rank waits for this one
        victim = next(p for p in ranks if p.environ()["HOROVOD_RANK"] == "1")
        victim.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and took < 30, (took, err)
    assert "launch: horovodrun 0 failed" in err and "Traceback" not in err, err
    end = time.monotonic() + 10
    while processes_of(mark) and time.monotonic() < end:
        time.sleep(0.2)
    assert not processes_of(mark), [p.cmdline() for p in processes_of(mark)]


def test_dry_run_prints_horovodrun_locally_and_for_a_hostfile(tmp_path):
    done = launch("-n", "2", "--dry-run", command=["python", "-m", "gluonperf.train", "--kvstore", "horovod"])
    assert done.returncode == 0, done.stderr
    assert "-m gluonperf.runtime.horovod_launcher -np 2 -H localhost:2 --gloo python -m gluonperf.train" \
        in done.stdout
    assert "OMP_NUM_THREADS=" in done.stdout  # the ranks share this machine's cores
    hosts = tmp_path / "hosts"
    hosts.write_text("node-a\nnode-b\n")
    done = launch("-n", "3", "--hostfile", str(hosts), "--dry-run", command=["python", "train.py"])
    assert done.returncode == 0, done.stderr
    assert "-np 3 -H node-a:2,node-b:1 --gloo python train.py" in done.stdout
    assert "OMP_NUM_THREADS=" not in done.stdout  # each host chooses its own


@pytest.mark.parametrize("flags, hosts, says", [
    (["-s", "2"], None, "-s applies to the parameter server"),
    (["--port", "9000"], None, "--port applies to the parameter server"),
    ([], "me@node-a\n", "host names only"),
    ([], "node-a:22\nnode-b:2222\n", "one ssh port"),
])
def test_launch_refuses_what_horovodrun_cannot_take(tmp_path, flags, hosts, says):
    if hosts:
        (tmp_path / "hosts").write_text(hosts)
        flags = flags + ["--hostfile", str(tmp_path / "hosts")]
    done = launch("-n", "2", *flags, "--dry-run", command=["python", "train.py"])
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and says in done.stderr, done.stderr


def test_without_horovod_train_and_launch_say_how_to_install_it(tmp_path):
    hidden = tmp_path / "hidden"
    (hidden / "horovod").mkdir(parents=True)
    (hidden / "horovod" / "__init__.py").write_text("raise ImportError('No module named horovod (hidden by the test)')\n")
    path = os.pathsep.join([str(hidden), ROOT])
    done = run_leaving_nothing(["-m", "gluonperf.train", *MLP, "--kvstore", "horovod", "--epochs", "1"],
                               PYTHONPATH=path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "Horovod" in done.stderr and "scripts/install-horovod" in done.stderr
    done = launch("-n", "2", command=train("--kvstore", "horovod"), PYTHONPATH=path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "scripts/install-horovod" in done.stderr


def test_one_device_per_process():
    assert device_of(["cpu0"], 1, 2) == "cpu0"
    assert device_of(["gpu0", "gpu1"], 1, 2) == "gpu1"
    with pytest.raises(ValueError, match="one per process on this machine"):
        device_of(["gpu0", "gpu1", "gpu2"], 0, 2)


def test_host_slots_follow_the_launchers_placement():
    hosts = [Host("a"), Host("b"), Host("c")]
    assert horovod_launcher.host_slots(4, hosts) == "a:2,b:1,c:1"
    assert horovod_launcher.host_slots(2, hosts) == "a:1,b:1"


def test_horovodrun_as_horovod_users_run_it(tmp_path):
    """Not through gluonperf.launch: horovodrun (the console script Horovod installs) starts the
    ranks, and each one's thread default shares the cores among the ranks of the machine
    (HOROVOD_LOCAL_SIZE), leaving none for the sibling rank that starts beside it."""
    from gluonperf.runtime.threads import recommended_threads
    path = tmp_path / "run.json"
    done = run_leaving_nothing([os.path.join(os.path.dirname(PY), "horovodrun"), "-np", "2", "-H", "localhost:2",
                                "--gloo", *train("--kvstore", "horovod", "--batch-size", "32", "--epochs", "1",
                                                 "--json", str(path))])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "in the job's 2 processes on this machine" in done.stdout + done.stderr
    got = records(path)
    assert [(r["rank"], r["num_workers"], r["weights_max_rel_diff"]) for r in got] == [(0, 2, 0.0)]
    assert got[0]["env"]["env"]["OMP_NUM_THREADS"] == str(recommended_threads(2, taken=0))

"""python -m gluonperf.train and gluonperf.training.loop: learning, equivalence, resume, errors."""
import math
import os
import re
import time

import mxnet as mx
import numpy as np
import pytest

from gluonperf import UserError
from helpers import needs_bfloat16
from gluonperf.records import read_jsonl
from gluonperf.training.checkpoints import read_checkpoint
from gluonperf.training.device_scaling import scaling
from gluonperf.training.loop import Diverged, TrainConfig, fit
from gluonperf.training.steps import EpochStats, hits
from gluonperf.training.trainers import lr_schedule

TWO = [mx.cpu(0), mx.cpu(1)]


def small(**kw):
    """A tiny, deterministic configuration: LeNet (no BatchNorm, no dropout) on digits."""
    base = dict(model="lenet", dataset="digits", limit=256, batch_size=32, epochs=2, lr=0.05,
                warmup_epochs=0, lr_decay="cosine", workers=0, log_interval=0)
    base.update(kw)
    return TrainConfig(**base)


def params_of(directory):
    path, meta = read_checkpoint(directory)
    return mx.nd.load(os.path.join(path, "params")), meta


# --- the command line ----------------------------------------------------------

def test_digits_on_two_contexts_learns(run, tmp_path):
    out = tmp_path / "train.jsonl"
    began = time.time()
    p = run("gluonperf.train", "--dataset", "digits", "--ctx", "cpu0,cpu1", "--model", "lenet",
            "--epochs", "3", "--batch-size", "64", "--json", str(out), "--log-interval", "5")
    assert p.returncode == 0, p.stderr
    records = [(r, env) for r, env in read_jsonl(str(out)) if r.bench == "train"]  # after the memory growth
    assert [r.name for r, _ in records] == ["epoch 1", "epoch 2", "epoch 3"]
    last, env = records[-1]
    assert last.metrics["test_top1"] > 0.5  # chance is 0.1
    assert last.metrics["test_top5"] >= last.metrics["test_top1"]
    assert last.metrics["contexts"] == "cpu0,cpu1" and last.metrics["devices"] == 2
    assert all(r.metrics["train_images_per_s"] > 0 for r, _ in records)
    # the process's CPU time in the epoch's training: every thread's, so it can pass the wall time, but no
    # more than every core busy throughout
    assert all(0 < r.metrics["train_cpu_s"] <= (os.cpu_count() + 0.5) * r.metrics["train_s"] for r, _ in records)
    # when each epoch's training began, by the system clock: during this run, one after the other
    starts = [r.metrics["train_started_at"] for r, _ in records]
    assert began < starts[0] and all(a + r.metrics["train_s"] <= b for (r, _), a, b in zip(records, starts, starts[1:]))
    assert starts[-1] + last.metrics["train_s"] < time.time()
    assert records[0][0].metrics["loss"] > last.metrics["loss"]
    assert env["contexts"] == ["cpu(0)", "cpu(1)"]
    assert [line.split()[0] for line in p.stdout.splitlines()[3:]] == ["1", "2", "3"]  # the table
    assert "epoch 1 batch 5/" in p.stderr  # the --log-interval line


@needs_bfloat16
def test_bfloat16_mixed_precision_learns_on_two_contexts(run, tmp_path):
    """--dtype bfloat16 (MXNet's AMP): learns as float32 does, reports its top-5 in float32,
    keeps float32 weights, and says on stderr what it set for the CPU."""
    from gluonperf.runtime.precision import cpu_flags
    out, save, deploy = tmp_path / "bf16.jsonl", tmp_path / "ckpt", tmp_path / "deploy" / "lenet"
    p = run("gluonperf.train", "--dataset", "digits", "--ctx", "cpu0,cpu1", "--model", "lenet", "--epochs", "3",
            "--batch-size", "64", "--dtype", "bfloat16", "--json", str(out), "--save", str(save),
            "--export", str(deploy))
    assert p.returncode == 0, p.stderr
    records = read_jsonl(str(out))
    last, env = records[-1]
    assert last.metrics["dtype"] == "bfloat16" and last.metrics["test_top1"] > 0.5  # chance is 0.1
    assert last.metrics["test_top5"] >= last.metrics["test_top1"]  # top-k of bfloat16 outputs was garbage
    assert "note: --dtype bfloat16: " in p.stderr and "mixed precision" in p.stdout.splitlines()[0]
    if {"amx_bf16", "amx_tile"} <= cpu_flags():  # oneDNN may use AMX, in a process allowed to
        assert env["env"]["DNNL_MAX_CPU_ISA"] == "AVX512_CORE_AMX"
    params, meta = params_of(str(save))
    assert meta["config"]["dtype"] == "bfloat16"
    assert {v.dtype for v in params.values()} == {np.float32}  # checkpoints as float32 runs write them
    # --export: a float32 graph (export() drops AMP's casts) and float32 weights
    from gluonperf.inference.exported import graph_ops
    assert "amp_cast" not in graph_ops(str(deploy) + "-symbol.json") and "Convolution" in graph_ops(
        str(deploy) + "-symbol.json")
    assert {v.dtype for v in mx.nd.load(str(deploy) + "-0000.params").values()} == {np.float32}


def test_synthetic_runs_with_limit(run):
    p = run("gluonperf.train", "--dataset", "synthetic", "--ctx", "cpu0,cpu1", "--model", "mlp",
            "--limit", "128", "--epochs", "1", "--batch-size", "32", "--workers", "0")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^epoch .*  train_images/s", p.stdout, re.M), p.stdout  # train_images_per_s
    assert [line.split()[0] for line in p.stdout.splitlines()[3:]] == ["1"]


def test_help_explains_every_flag(run):
    p = run("gluonperf.train", "--help")
    assert p.returncode == 0
    for flag in ("--ctx", "--model", "--hybridize", "--dataset", "--data-dir", "--limit", "--workers",
                 "--batch-size", "--epochs", "--lr", "--lr-scale", "--optimizer", "--momentum", "--wd",
                 "--warmup-epochs", "--lr-decay", "--kvstore", "--seed", "--log-interval", "--json",
                 "--csv", "--plot", "--save", "--resume", "--scaling", "--steps", "--dtype"):
        assert flag in p.stdout


@pytest.mark.parametrize("args, words", [
    (["--ctx", "tpu0"], "not a context"),
    (["--ctx", "gpu0"], "GPU"),
    (["--ctx", "cpu0,cpu1,cpu2", "--batch-size", "2"], "smaller than the number of contexts"),
    (["--model", "no_such_net"], "unknown model"),
    (["--dataset", "fashion-mnist", "--data-dir", "/nonexistent/fmnist"], "--dataset digits"),
    (["--resume", "/nonexistent/ckpt"], "--resume"),
    (["--limit", "512", "--batch-size", "32", "--lr", "1e6"], "loss became nan at epoch 1, batch"),
    (["--save", __file__], "is a file"),
    (["--batch-size", "100"], "larger than this worker's 64 training samples"),
    (["--kvstore", "dist_sync"], "python -m gluonperf.launch"),
    (["--kvstore", "nccl"], "GPUs only"),
    (["--dtype", "float16"], "invalid choice: 'float16'"),
    (["--momentum", "1"], "'1' must be at least 0 and below 1"),
    (["--dtype", "bfloat16", "--checkpoint-segments", "2"], "--checkpoint-segments does not work with --dtype"),
    (["--scaling", "--export", "out/lenet"], "--scaling only times steps"),
    (["--model", os.path.join(os.path.dirname(__file__), "user_models", "nets.py") + ":gated", "--input-shape",
      "1,28,28", "--export", "out/gated"], "cannot be hybridized"),
    (["--export", "/proc/gluonperf/lenet"], "--export /proc/gluonperf/lenet-symbol.json cannot be written"),
])
def test_errors_are_one_line(args, words, capsys, monkeypatch):
    """Run in this process (cli.run, as `python -m gluonperf.train` does) to keep it fast."""
    from gluonperf.cli import common as cli
    from gluonperf.training import data
    from gluonperf import train
    monkeypatch.setattr(data, "_online", lambda url: False)  # as offline as this machine
    for name in ("DMLC_ROLE", "DMLC_PS_ROOT_URI", "DMLC_NUM_WORKER"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(SystemExit) as e:
        cli.run(train.main, train.PROG, ["--dataset", "digits", "--model", "lenet", "--limit", "64",
                                         "--epochs", "1", "--workers", "0", "--log-interval", "0", *args])
    err = capsys.readouterr().err
    assert e.value.code == 2
    # advice about threads or a busy machine may precede the error, on lines of its own
    lines = [l for l in err.strip().splitlines() if not l.startswith(("note: ", "warning: "))]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("python -m gluonperf.train: error: ") and words in lines[0]


def test_a_warmup_longer_than_the_run_is_noted(capsys, monkeypatch):
    from gluonperf.cli import common as cli
    from gluonperf import train
    with pytest.raises(SystemExit) as e:
        cli.run(train.main, train.PROG, ["--dataset", "digits", "--model", "mlp", "--limit", "64", "--epochs", "1",
                                         "--workers", "0", "--log-interval", "0", "--warmup-epochs", "3"])
    err = capsys.readouterr().err
    assert e.value.code == 0, err
    assert "note: --warmup-epochs 3 is longer than the run (1 epoch(s))" in err


def test_an_error_in_a_real_process_is_one_line_and_exit_2(run):
    p = run("gluonperf.train", "--ctx", "cpu0,gpu7", timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and "GPU" in p.stderr


def test_a_save_directory_that_cannot_be_made_is_one_line_before_any_training(run, tmp_path):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    for save, words in ((a_file, "is a file; give a directory"), (a_file / "ckpt", "is not a writable directory")):
        p = run("gluonperf.train", "--dataset", "synthetic", "--model", "lenet", "--limit", "64", "--epochs", "1",
                "--save", str(save), timeout=120)
        assert p.returncode == 2 and p.stdout == "", p.stderr
        lines = [l for l in p.stderr.strip().splitlines() if not l.startswith("note: ")]
        assert len(lines) == 1 and "Traceback" not in p.stderr and words in lines[0], p.stderr
    assert a_file.read_text() == "not a directory"


def test_a_checkpoint_directory_that_fails_to_open_is_a_user_error(tmp_path):
    """The library's own check, for a path that turns bad after the command checked it."""
    from gluonperf.training.checkpoints import CheckpointDir
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    with pytest.raises(UserError, match="cannot be written"):
        CheckpointDir(str(a_file / "ckpt"))


def test_save_resume_and_plot_from_the_command_line(run, tmp_path):
    ckpt, png, out = tmp_path / "ckpt", tmp_path / "acc.png", tmp_path / "r.jsonl"
    args = ["gluonperf.train", "--dataset", "digits", "--ctx", "cpu0,cpu1", "--model", "mlp", "--limit", "128",
            "--batch-size", "32", "--workers", "0"]
    p = run(*args, "--epochs", "1", "--save", str(ckpt))
    assert p.returncode == 0, p.stderr
    assert "note: MXNET_OPTIMIZER_AGGREGATION_SIZE unset, so SGD updates each parameter" in p.stderr
    assert (ckpt / "latest").read_text().strip() == "epoch-0001"
    # resumed with MXNet's multi-tensor update (the override): no note, the states still load
    p = run(*args, "--epochs", "2", "--resume", str(ckpt), "--plot", str(png), "--json", str(out),
            env={"MXNET_OPTIMIZER_AGGREGATION_SIZE": "4"})
    assert p.returncode == 0, p.stderr
    assert "resumed from" in p.stderr and "MXNET_OPTIMIZER_AGGREGATION_SIZE" not in p.stderr
    assert [r.name for r, _ in read_jsonl(str(out))] == ["memory growth", "epoch 1", "epoch 2"]
    assert (ckpt / "latest").read_text().strip() == "epoch-0002"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.filterwarnings("ignore:Cannot decide type")  # SymbolBlock.imports cannot tell the input's dtype
def test_export_writes_the_trained_model_as_deployed(run, tmp_path):
    """train --export PREFIX: the two files HybridBlock.export names, nothing else, and
    SymbolBlock.imports of them gives what the trained weights (the checkpoint of the same run)
    give in the model as written."""
    from mxnet import gluon
    from gluonperf.training.data import digits
    from gluonperf.training.models import get_model
    out, ckpt = tmp_path / "deploy", tmp_path / "ckpt"
    p = run("gluonperf.train", "--dataset", "digits", "--model", "lenet", "--limit", "256", "--epochs", "1",
            "--batch-size", "32", "--save", str(ckpt), "--export", str(out / "lenet"))
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["lenet-0000.params", "lenet-symbol.json"]
    assert "exported %s" % (out / "lenet-symbol.json") in p.stdout
    _, (x, _) = digits()
    x = mx.nd.array(x[:16])
    imported = gluon.SymbolBlock.imports(str(out / "lenet-symbol.json"), ["data"], str(out / "lenet-0000.params"))
    written = get_model("lenet", 10)
    written.load_parameters(os.path.join(read_checkpoint(str(ckpt))[0], "params"))
    want = written(x).asnumpy()
    assert np.abs(imported(x).asnumpy() - want).max() <= 1e-5 * np.abs(want).max()


def test_scaling_from_the_command_line(run):
    p = run("gluonperf.train", "--dataset", "digits", "--ctx", "cpu0,cpu1", "--model", "lenet",
            "--limit", "64", "--batch-size", "16", "--scaling", "--steps", "2")
    assert p.returncode == 0, p.stderr
    rows = [line.split() for line in p.stdout.splitlines()[3:]]
    assert [row[0] for row in rows] == ["1", "2"]
    assert "max(t1,t2)" in p.stdout


# --- the experiment ---------------------------------------------------------------

def losses_of(config, contexts):
    curve = []
    fit(config, contexts, progress=lambda epoch, batch, batches, loss: curve.append(loss))
    return np.array(curve)


def test_one_and_two_contexts_give_the_same_loss_curve():
    """Data parallelism changes where the work runs, not the result: same global batch,
    same seed, a model without BatchNorm -> the same losses batch by batch."""
    one = losses_of(small(), [mx.cpu(0)])
    two = losses_of(small(), TWO)
    assert len(one) == 2 * (256 // 32)
    assert one[-1] < one[0]
    np.testing.assert_allclose(one, two, rtol=0, atol=1e-4)


class Crash(Exception):
    pass


def test_resume_after_a_crash_equals_an_uninterrupted_run(tmp_path):
    whole, broken = str(tmp_path / "whole"), str(tmp_path / "broken")
    expected = fit(small(epochs=3, save=whole), TWO)

    def crash(epoch, batch, batches, loss):
        if epoch == 3 and batch == 4:
            raise Crash()
    with pytest.raises(Crash):
        fit(small(epochs=3, save=broken), TWO, progress=crash)
    _, meta = read_checkpoint(broken)
    assert meta["epoch"] == 2
    resumed = fit(small(epochs=3, resume=broken), TWO)

    assert [r.name for r in resumed] == [r.name for r in expected] == ["epoch 1", "epoch 2", "epoch 3"]
    for a, b in zip(expected, resumed):
        assert abs(a.metrics["loss"] - b.metrics["loss"]) < 1e-6
        assert a.metrics["test_top1"] == b.metrics["test_top1"]
    (p_whole, m_whole), (p_resumed, m_resumed) = params_of(whole), params_of(broken)
    assert m_whole["epoch"] == m_resumed["epoch"] == 3
    assert p_whole.keys() == p_resumed.keys()
    for key in p_whole:
        np.testing.assert_allclose(p_whole[key].asnumpy(), p_resumed[key].asnumpy(), rtol=0, atol=1e-6)
    assert sorted(d for d in os.listdir(broken) if d.startswith("epoch-")) == ["epoch-0002", "epoch-0003"]
    # no temporary leftovers (.lock stays: it marks the directory as one run's while it runs)
    assert not [d for d in os.listdir(broken) if d.startswith(".") and d != ".lock"]


def test_nan_loss_stops_and_keeps_the_last_good_checkpoint(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    fit(small(epochs=1, save=ckpt), TWO)
    good, _ = params_of(ckpt)
    with pytest.raises(Diverged) as e:
        fit(small(epochs=3, lr=1e5, resume=ckpt), TWO)  # a huge lr after a good epoch
    message = str(e.value)
    assert "\n" not in message and "epoch 2, batch" in message and ckpt in message
    after, meta = params_of(ckpt)
    assert meta["epoch"] == 1
    for key in good:
        assert np.array_equal(good[key].asnumpy(), after[key].asnumpy())


def test_resume_refuses_a_different_run(tmp_path):
    ckpt = str(tmp_path / "ckpt")
    fit(small(epochs=1, save=ckpt), [mx.cpu(0)])
    with pytest.raises(UserError, match="--batch-size"):
        fit(small(epochs=2, batch_size=16, resume=ckpt), [mx.cpu(0)])
    with pytest.raises(UserError, match="already finished 1 epochs"):
        fit(small(epochs=1, resume=ckpt), [mx.cpu(0)])
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no checkpoint"):
        fit(small(resume=str(tmp_path / "empty")), [mx.cpu(0)])


def test_hits_count_as_mxnet_metrics_do_over_contexts():
    """train's epoch figures and evaluate count in numpy (an MXNet metric's argmax made
    one CPU context wait for another): the same top-1 and top-5 as MXNet's metrics."""
    rng = np.random.RandomState(0)
    outputs = [mx.nd.array(rng.randn(n, 10), ctx=mx.cpu(i)) for i, n in enumerate((33, 31))]
    labels = [mx.nd.array(rng.randint(0, 10, o.shape[0]), ctx=o.context) for o in outputs]
    top1, top5 = mx.metric.Accuracy(), mx.metric.TopKAccuracy(top_k=5)
    top1.update(labels, outputs)
    top5.update(labels, outputs)
    assert hits(outputs, labels) == (round(top1.get()[1] * 64), round(top5.get()[1] * 64))
    stats = EpochStats()
    losses = [mx.nd.array(rng.rand(o.shape[0]), ctx=o.context) for o in outputs]
    assert stats.add(64, losses, outputs, labels) == pytest.approx(sum(l.sum().asscalar() for l in losses) / 64)
    assert (stats.top1, stats.top5) == (top1.get()[1], top5.get()[1])
    stats.add(64, [mx.nd.array([np.nan])], outputs, labels)  # a NaN batch is not counted
    assert stats.images == 64


def test_warmup_then_cosine_schedule():
    schedule = lr_schedule(small(epochs=4, warmup_epochs=1, lr=0.4), 0.4, iters_per_epoch=10)
    rates = [schedule(i) for i in range(40)]
    assert rates[0] == 0 and abs(rates[9] - 0.4) < 1e-9  # linear warm-up over the first epoch
    assert abs(rates[10] - 0.4) < 1e-9 and rates[39] < 1e-9  # cosine down to 0
    assert all(a >= b for a, b in zip(rates[10:], rates[11:]))
    step = lr_schedule(small(epochs=4, warmup_epochs=0, lr_decay="step", lr=1.0), 1.0, iters_per_epoch=10)
    assert [step(i) for i in (0, 19, 20, 29, 30, 39)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01])


def test_the_schedule_is_gluoncvs_without_loading_the_whole_package():
    """In a fresh process: the schedule's classes come from GluonCV's lr_scheduler module, read
    without GluonCV's package (model zoo, data sets); a later `import gluoncv` reuses them, and a
    pickled schedule (what a dist kvstore sends its servers) is read back as GluonCV's."""
    import subprocess
    import sys
    from helpers import ROOT, clean_env
    code = ("import pickle, sys, gluonperf\n"
            "from gluonperf.training.loop import TrainConfig\n"
            "from gluonperf.training.trainers import lr_schedule\n"
            "schedule = lr_schedule(TrainConfig(model='mlp', epochs=2, lr=0.5), 0.5, iters_per_epoch=4)\n"
            "assert 'gluoncv' not in sys.modules and 'gluoncv.model_zoo' not in sys.modules\n"
            "saved = pickle.dumps(schedule)\n"
            "from gluoncv.utils import LRSequential, LRScheduler\n"
            "assert type(schedule) is LRSequential and type(pickle.loads(saved)) is LRSequential\n"
            "assert all(type(s) is LRScheduler for s in schedule.schedulers)\n"
            "print('ok')\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=clean_env())
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


@pytest.mark.alone
def test_scaling_reports_t1_t2_speedup_and_efficiency():
    """Besides the record's arithmetic, two facts from outside it: every timed region lies
    inside the call (with 2 steps a median is the mean, so steps x (step + t1 + t2 + update)
    per row is time the call spent), and gradients are communicated only when two contexts
    hold them: t2 with one context is Python alone (about 10 us), with two a reduction over
    LeNet's gradients (about 0.7 ms on a 2-core EPYC): a 'two devices' row that ran on one
    context fails it."""
    import time
    start = time.perf_counter()
    results = scaling(small(batch_size=16), TWO, steps=2)
    wall = time.perf_counter() - start
    assert [r.metrics["devices"] for r in results] == [1, 2]
    one, two = (r.metrics for r in results)
    assert one["per_device_batch"] == two["per_device_batch"] == 8
    assert one["batch_size"] == 8 and two["batch_size"] == 16 and two["contexts"] == "cpu0,cpu1"
    assert one["speedup"] == 1.0 and two["efficiency"] == pytest.approx(two["speedup"] / 2)
    for m in (one, two):
        assert m["t1_s"] > 0 and m["t2_s"] >= 0 and m["step_s"] > 0
        assert m["overlap_model_s"] <= m["serial_model_s"]
        assert m["images_per_s"] == pytest.approx(m["batch_size"] / m["step_s"])
        assert 0 < m["cpu_s"] <= 4 * m["step_s"]  # the step's CPU time, every thread of the process
    timed = sum(2 * (m["step_s"] + m["t1_s"] + m["t2_s"] + m["update_s"]) for m in (one, two))
    assert timed < wall, (timed, wall)
    assert two["t2_s"] > 5 * one["t2_s"], (one["t2_s"], two["t2_s"])


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dist_sync_workers_train_equal_parts_and_only_rank_0_reports(tmp_path):
    """Scheduler, one server and two workers on loopback with the DMLC_* environment that
    gluonperf.launch sets: both workers finish (equal batch counts, or dist_sync would
    hang), end with the same parameters (same checksum), and only rank 0 writes."""
    import re
    import subprocess
    import sys
    from helpers import ROOT
    env = dict(os.environ, PYTHONPATH=ROOT, COLUMNS="100", DMLC_PS_ROOT_URI="127.0.0.1", DMLC_PS_ROOT_PORT=str(free_port()),
               DMLC_NUM_SERVER="1", DMLC_NUM_WORKER="2")
    # --limit 203: an odd number of samples, split into two equal parts of 101
    train = [sys.executable, "-m", "gluonperf.train", "--kvstore", "dist_sync", "--dataset", "digits",
             "--model", "lenet", "--limit", "203", "--batch-size", "10", "--epochs", "2", "--workers", "0",
             "--log-interval", "0"]
    procs = [subprocess.Popen([sys.executable, "-c", "import gluonperf, mxnet"], env=dict(env, DMLC_ROLE=role),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for role in ("scheduler", "server")]
    outs = [str(tmp_path / ("out%d.jsonl" % i)) for i in range(2)]
    workers = [subprocess.Popen(train + ["--json", outs[i], "--save", str(tmp_path / ("ckpt%d" % i))],
                                env=dict(env, DMLC_ROLE="worker"), cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(2)]
    try:
        results = [w.communicate(timeout=120) for w in workers]
        for p in procs:
            p.wait(timeout=30)
    finally:
        for p in procs + workers:
            if p.poll() is None:
                p.kill()
    logs = "\n".join("worker %d (exit %s):\n%s%s" % (i, w.returncode, out, err)
                     for i, (w, (out, err)) in enumerate(zip(workers, results)))
    assert [w.returncode for w in workers] == [0, 0], logs
    written = [i for i in range(2) if os.path.exists(outs[i])]
    assert len(written) == 1, logs  # rank 0 only (which process gets rank 0 is the scheduler's choice)
    assert os.path.isdir(str(tmp_path / ("ckpt%d" % written[0])))
    assert not os.path.exists(str(tmp_path / ("ckpt%d" % (1 - written[0]))))
    assert sum("train_images/s" in out for out, _ in results) == 1, logs
    records = read_jsonl(outs[written[0]])
    assert [r.metrics["num_workers"] for r, _ in records if r.bench == "train"] == [2, 2]
    checksums = [re.findall(r"param checksum ([0-9.e+-]+)", err) for _, err in results]
    assert len(checksums[0]) == 2 and checksums[0] == checksums[1], logs  # the same weights
    assert checksums[0][0] != checksums[0][1]  # which did change in epoch 2


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt = str(tmp_path / "ckpt")
    real, calls = mx.gluon.Trainer.save_states, []

    def save_states(trainer, fname):
        calls.append(fname)
        if len(calls) == 2:  # the second epoch's checkpoint dies half-way
            open(fname, "wb").write(b"half")
            raise OSError("disk full")
        real(trainer, fname)
    monkeypatch.setattr(mx.gluon.Trainer, "save_states", save_states)
    with pytest.raises(OSError, match="disk full"):
        fit(small(epochs=2, save=ckpt), [mx.cpu(0)])
    path, meta = read_checkpoint(ckpt)
    assert meta["epoch"] == 1 and path.endswith("epoch-0001")
    assert sorted(os.listdir(ckpt)) == [".lock", "epoch-0001", "latest"]  # nothing half-written left behind
    monkeypatch.setattr(mx.gluon.Trainer, "save_states", real)
    assert [r.name for r in fit(small(epochs=2, resume=ckpt), [mx.cpu(0)])] == ["epoch 1", "epoch 2"]


def test_linear_lr_scale_nag_and_imperative_mode():
    records = fit(small(epochs=1, limit=64, lr_scale="linear", lr_decay="none", optimizer="nag",
                        hybridize="none"), TWO)
    assert records[0].metrics["lr"] == pytest.approx(0.05 * 2)  # x the number of devices
    assert records[0].metrics["hybridize"] == "none" and math.isfinite(records[0].metrics["loss"])


def test_resume_with_other_epochs_says_that_the_schedule_is_replanned(tmp_path):
    """A 2-epoch cosine run, resumed with --epochs 3: its schedule had reached 0, the resumed
    epoch follows the 3-epoch plan, and the result is neither run; the note says so. With
    --lr-decay none the rate after the warm-up does not depend on the total: no note. An old
    checkpoint whose config lacks `epochs` still resumes, without the note."""
    import json
    import shutil
    from concurrent.futures import ThreadPoolExecutor

    from helpers import run_leaving_nothing
    ckpt, other, old = tmp_path / "ckpt", tmp_path / "other", tmp_path / "old"
    args = ["-m", "gluonperf.train", "--dataset", "digits", "--model", "mlp", "--limit", "256", "--batch-size", "32",
            "--workers", "0", "--optimizer", "adam"]
    p = run_leaving_nothing([*args, "--epochs", "2", "--save", str(ckpt)])
    assert p.returncode == 0, p.stderr
    shutil.copytree(ckpt, other, ignore=shutil.ignore_patterns(".lock"))
    shutil.copytree(ckpt, old, ignore=shutil.ignore_patterns(".lock"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        cosine, none = pool.map(run_leaving_nothing, ([*args, "--epochs", "3", "--resume", str(ckpt)],
                                                      [*args, "--epochs", "3", "--resume", str(other),
                                                       "--lr-decay", "none"]))
    assert cosine.returncode == 0 and none.returncode == 0, (cosine.stderr, none.stderr)
    notes = [l for l in cosine.stderr.splitlines() if "planned for" in l]
    assert len(notes) == 1 and notes[0].startswith("note: %s was saved by a run planned for 2 epochs" % ckpt), \
        cosine.stderr
    assert "re-planned for 3, epoch 3 starts at lr " in notes[0] and "--lr-decay cosine" in notes[0]
    assert "resumed from" in none.stderr and "planned for" not in none.stderr
    assert (ckpt / "latest").read_text().strip() == (other / "latest").read_text().strip() == "epoch-0003"
    assert read_checkpoint(str(ckpt))[1]["config"]["epochs"] == 3  # the checkpoint carries the plan it followed
    # a checkpoint written before the config carried the epochs
    path, meta = read_checkpoint(str(old))
    saved = dict(meta["config"])
    del meta["config"]["epochs"]
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f)
    lines = []
    config = TrainConfig(**dict(saved, epochs=3, save=None, resume=str(old), log_interval=0))
    assert [r.name for r in fit(config, [mx.cpu(0)], log=lines.append)] == ["epoch 1", "epoch 2", "epoch 3"]
    assert any(l.startswith("resumed from") for l in lines) and not any("planned for" in l for l in lines), lines

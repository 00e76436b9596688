"""python -m gluonperf.train and gluonperf.training: learning, equivalence, resume, errors."""
import json
import os

import mxnet as mx
import numpy as np
import pytest

from gluonperf import UserError
from gluonperf.report import read_jsonl
from gluonperf.training import Diverged, TrainConfig, fit, lr_schedule, read_checkpoint, scaling

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
    p = run("gluonperf.train", "--dataset", "digits", "--ctx", "cpu0,cpu1", "--model", "lenet",
            "--epochs", "3", "--batch-size", "64", "--json", str(out), "--log-interval", "5")
    assert p.returncode == 0, p.stderr
    records = read_jsonl(str(out))
    assert [r.name for r, _ in records] == ["epoch 1", "epoch 2", "epoch 3"]
    last, env = records[-1]
    assert last.metrics["test_top1"] > 0.5  # chance is 0.1
    assert last.metrics["test_top5"] >= last.metrics["test_top1"]
    assert last.metrics["contexts"] == "cpu0,cpu1" and last.metrics["devices"] == 2
    assert all(r.metrics["train_images_per_s"] > 0 for r, _ in records)
    assert records[0][0].metrics["loss"] > last.metrics["loss"]
    assert env["contexts"] == ["cpu(0)", "cpu(1)"]
    assert [line.split()[0] for line in p.stdout.splitlines()[3:]] == ["1", "2", "3"]  # the table
    assert "epoch 1 batch 5/" in p.stderr  # the --log-interval line


def test_synthetic_runs_with_limit(run):
    p = run("gluonperf.train", "--dataset", "synthetic", "--ctx", "cpu0,cpu1", "--model", "mlp",
            "--limit", "128", "--epochs", "1", "--batch-size", "32", "--workers", "0")
    assert p.returncode == 0, p.stderr
    assert "train_images_per_s" in p.stdout
    assert [line.split()[0] for line in p.stdout.splitlines()[3:]] == ["1"]


def test_help_explains_every_flag(run):
    p = run("gluonperf.train", "--help")
    assert p.returncode == 0
    for flag in ("--ctx", "--model", "--hybridize", "--dataset", "--data-dir", "--limit", "--workers",
                 "--batch-size", "--epochs", "--lr", "--lr-scale", "--optimizer", "--momentum", "--wd",
                 "--warmup-epochs", "--lr-decay", "--kvstore", "--seed", "--log-interval", "--json",
                 "--csv", "--plot", "--save", "--resume", "--scaling", "--steps"):
        assert flag in p.stdout


@pytest.mark.parametrize("args, words", [
    (["--ctx", "tpu0"], "not a context"),
    (["--ctx", "gpu0"], "GPU"),
    (["--ctx", "cpu0,cpu1,cpu2", "--batch-size", "2"], "smaller than the number of contexts"),
    (["--model", "no_such_net"], "unknown model"),
    (["--dataset", "fashion-mnist", "--data-dir", "/nonexistent/fmnist"], "--dataset digits"),
    (["--resume", "/nonexistent/ckpt"], "--resume"),
])
def test_errors_are_one_line(run, args, words):
    p = run("gluonperf.train", "--dataset", "digits", "--model", "lenet", "--limit", "64",
            "--epochs", "1", *args, timeout=60)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert words in lines[0]

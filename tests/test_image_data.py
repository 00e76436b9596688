"""Real image data (--dataset PATH): a folder of class subfolders, a .rec through a DataLoader or
MXNet's ImageRecordIter; the data set command; bad data as one line with no worker left behind.

The data set is made by the command (python -m gluonperf.dataset make, 4 classes x 6 JPEGs of
32x32, and its .rec) once per module; every command runs as a subprocess from a clean
environment, and no process of a run (DataLoader workers included) may outlive it.
"""
import json
import os
import shutil
import sys

import numpy as np
import pytest

from helpers import run_leaving_nothing

PY = sys.executable
TIMEOUT = 300
CLASSES, PER_CLASS = 4, 6


def run_marked(args, timeout=TIMEOUT, **env):
    """`python -m <args>` as a user runs it; afterwards, no process of the run (found by a
    unique marker in the environment, which forked workers inherit) may be left."""
    return run_leaving_nothing(["-m", *args], timeout, **env)


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith('{"environment"')]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """DIR (4 class folders of 6 JPEGs, 32x32) and DIR.rec/DIR.idx, written by the command."""
    root = tmp_path_factory.mktemp("images")
    folder = str(root / "tiny")
    p = run_marked(["gluonperf.dataset", "make", folder, "--images-per-class", str(PER_CLASS), "--classes",
                    str(CLASSES), "--size", "32", "--rec"])
    assert p.returncode == 0, p.stderr
    return folder


def test_the_command_writes_class_folders_and_a_rec_that_hold_the_same_images(images):
    import mxnet as mx
    classes = sorted(os.listdir(images))
    assert classes == ["class%02d" % c for c in range(CLASSES)]
    assert all(len(os.listdir(os.path.join(images, c))) == PER_CLASS for c in classes)
    rec = mx.recordio.MXIndexedRecordIO(images + ".idx", images + ".rec", "r")
    assert len(rec.keys) == CLASSES * PER_CLASS
    header, img = mx.recordio.unpack_img(rec.read_idx(PER_CLASS + 1))  # the second image of class 1
    assert header.label == 1 and img.shape == (32, 32, 3)
    # the record is the folder's image, re-encoded as JPEG: nearly the same pixels
    import cv2
    original = cv2.imread(os.path.join(images, "class01", "0001.jpg"))
    assert np.abs(original.astype(int) - img.astype(int)).mean() < 8


def test_load_gives_model_sized_normalised_samples_and_holds_out_a_tenth(images):
    from gluonperf.training import image_data
    for path in (images, images + ".rec"):
        train, test = image_data.load_images(path, "resnet18_v1")
        assert (len(train), len(test)) == (22, 2)  # every 10th of 24 held out
        assert train.classes == CLASSES
        x, y = train[0]
        assert x.shape == (3, 224, 224) and x.dtype == np.float32 and 0 <= int(y) < CLASSES
        # normalised with ImageNet's mean and std: values well outside [0, 1]
        assert x.min().asscalar() < 0 and x.max().asscalar() <= (1 - 0.406) / 0.225 + 1e-3
        assert test[0][0].shape == (3, 224, 224)
    # the book's models take their own 28x28, in colour
    train, _ = image_data.load_images(images, "lenet")
    assert train[0][0].shape == (3, 28, 28)
    from gluonperf.training.data import sample_shape
    assert sample_shape(images, "resnet18_v1") == (3, 224, 224) and sample_shape("digits", "lenet") == (1, 28, 28)


@pytest.mark.parametrize("source, loader, batches", [("folder", "dataloader", 5), ("rec", "dataloader", 5),
                                                     ("rec", "recorditer", 5)])
def test_each_source_trains_an_epoch_as_a_command(images, tmp_path, source, loader, batches, private_tmp):
    """... and its DataLoader's worker processes leave nothing in the temporary directory (a
    private one): no pymp-* folder of a worker the pool killed while it worked."""
    path = images if source == "folder" else images + ".rec"
    out = str(tmp_path / "train.json")
    tmp = private_tmp
    p = run_marked(["gluonperf.train", "--dataset", path, "--loader", loader, "--model", "lenet", "--epochs", "1",
                    "--batch-size", "4", "--workers", "2", "--json", out], TMPDIR=str(tmp))
    assert p.returncode == 0, p.stderr
    assert not list(tmp.iterdir())
    epoch = records(out)[-1]
    # 22 training images in full batches of 4 (ImageRecordIter draws them from all 24 records)
    assert epoch["images"] == 4 * batches and epoch["dataset"] == path
    assert np.isfinite(epoch["loss"]) and 0 <= epoch["test_top1"] <= 1 and epoch["train_images_per_s"] > 0


def test_a_zoo_model_trains_at_its_own_input_size(images, tmp_path):
    out = str(tmp_path / "train.json")
    p = run_marked(["gluonperf.train", "--dataset", images, "--model", "resnet18_v1", "--epochs", "1", "--batch-size",
                    "2", "--limit", "4", "--workers", "0", "--hybridize", "hybrid", "--json", out])
    assert p.returncode == 0, p.stderr
    assert records(out)[-1]["images"] == 4


def _one_line(p, *words):
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and len([l for l in lines if "error" in l]) == 1, p.stderr
    assert all(w in lines[-1] for w in words), lines[-1]


def test_bad_data_is_one_line_naming_it(images, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    flat = tmp_path / "flat"
    flat.mkdir()
    shutil.copy(os.path.join(images, "class00", "0000.jpg"), str(flat / "a.jpg"))
    lone = tmp_path / "lone.rec"
    shutil.copy(images + ".rec", str(lone))
    cases = [(str(empty), "empty folder"), (str(flat), "no class subfolders"), (str(lone), "lone.idx"),
             (str(tmp_path / "absent"), "invalid choice")]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=2) as pool:  # they mostly wait for MXNet to load: two at a time
        runs = pool.map(lambda case: (case, run_marked(["gluonperf.train", "--dataset", case[0], "--model", "lenet",
                                                        "--epochs", "1"])), cases)
        for (path, words), p in runs:
            _one_line(p, path if words != "invalid choice" else "absent", words)
    p = run_marked(["gluonperf.train", "--dataset", images, "--loader", "recorditer", "--model", "lenet"])
    _one_line(p, "--loader recorditer reads a .rec")
    p = run_marked(["gluonperf.train", "--dataset", images, "--model", "mlp"])
    _one_line(p, "mlp", "not images")


@pytest.fixture
def corrupt(images, tmp_path):
    """A copy of the folder whose class01/0000.jpg (a training image) is not an image."""
    copy = str(tmp_path / "corrupt")
    shutil.copytree(images, copy)
    with open(os.path.join(copy, "class01", "0000.jpg"), "wb") as f:
        f.write(b"this is not a JPEG")
    return copy


@pytest.mark.parametrize("workers", ["0", "2"])
def test_a_corrupt_image_stops_with_its_name_and_no_worker_left(corrupt, workers):
    p = run_marked(["gluonperf.train", "--dataset", corrupt, "--model", "lenet", "--epochs", "1", "--batch-size", "4",
                    "--workers", workers], timeout=120)
    _one_line(p, "corrupt image", os.path.join(corrupt, "class01", "0000.jpg"), "--bad-images skip")


def test_skip_counts_the_corrupt_image_and_trains_on(corrupt, tmp_path):
    out = str(tmp_path / "train.json")
    p = run_marked(["gluonperf.train", "--dataset", corrupt, "--model", "lenet", "--epochs", "1", "--batch-size", "4",
                    "--workers", "2", "--bad-images", "skip", "--json", out])
    assert p.returncode == 0, p.stderr
    epoch = records(out)[-1]
    assert epoch["skipped_images"] == 1 and epoch["images"] == 20


def test_the_data_set_command_refuses_a_used_folder_and_leaves_nothing_half_written(images, tmp_path):
    p = run_marked(["gluonperf.dataset", "make", images])
    _one_line(p, images, "not an empty folder")
    p = run_marked(["gluonperf.dataset", "make", str(tmp_path / "x"), "--classes", "11"])
    _one_line(p, "at most 10")
    assert not os.path.exists(str(tmp_path / "x"))


def test_profile_answers_input_bound_on_each_source(images, tmp_path):
    for path, loader in ((images, "dataloader"), (images + ".rec", "recorditer")):
        out = str(tmp_path / "profile.json")
        p = run_marked(["gluonperf.profile", "--dataset", path, "--loader", loader, "--model", "lenet", "--batch-size",
                        "4", "--workers", "1", "--input-only", "--steps", "3", "--rounds", "3", "--warmup", "1",
                        "--json", out])
        assert p.returncode == 0, p.stderr
        rows = {r["name"]: r for r in records(out)}
        verdict = rows["verdict"]
        assert verdict["share_n"] == 3 and verdict["share_ci_low"] <= verdict["share"] <= verdict["share_ci_high"]
        assert verdict["verdict"] in ("input-bound", "same", "faster on real data", "inconclusive")
        assert len(verdict["real_samples_s"]) == len(verdict["memory_samples_s"]) == 3
        assert p.stdout.strip().splitlines()[-1] == verdict["finding"]
        for name in ("real data", "batch in memory", "loader alone"):
            r = rows[name]
            assert r["images_per_s_ci_low"] <= r["images_per_s"] <= r["images_per_s_ci_high"]


def test_the_full_profile_has_the_input_section_and_counts_colour_images(images, tmp_path):
    out = str(tmp_path / "profile.json")
    p = run_marked(["gluonperf.profile", "--dataset", images, "--model", "lenet", "--batch-size", "4", "--workers", "1",
                    "--ceiling", "quick", "--steps", "3", "--warmup", "1", "--rounds", "2", "--json", out])
    assert p.returncode == 0, p.stderr
    rows = records(out)
    assert any(r["bench"] == "input-bound" and r["name"] == "verdict" for r in rows)
    total = next(r for r in rows if r["bench"] == "work" and r["name"] == "total")
    assert total["input"] == "3x28x28"
    assert "input: is the step waiting for its input?" in p.stdout


def test_a_corrupt_record_is_one_line_from_either_reader_of_a_rec(images, tmp_path):
    import mxnet as mx
    src = mx.recordio.MXIndexedRecordIO(images + ".idx", images + ".rec", "r")
    bad = str(tmp_path / "bad")
    out = mx.recordio.MXIndexedRecordIO(bad + ".idx", bad + ".rec", "w")
    for key in src.keys:
        record = src.read_idx(key)
        if key == 3:
            header, _ = mx.recordio.unpack(record)
            record = mx.recordio.pack(header, b"not a JPEG")
        out.write_idx(key, record)
    out.close()
    p = run_marked(["gluonperf.train", "--dataset", bad + ".rec", "--model", "lenet", "--epochs", "1", "--batch-size",
                    "4", "--workers", "2"], timeout=120)
    _one_line(p, "corrupt image record 3 of %s.rec" % bad)
    p = run_marked(["gluonperf.train", "--dataset", bad + ".rec", "--loader", "recorditer", "--model", "lenet",
                    "--epochs", "1", "--batch-size", "4", "--workers", "2"], timeout=120)
    _one_line(p, "ImageRecordIter cannot read an image of %s.rec" % bad, "--loader dataloader")


def test_scaling_and_two_contexts_take_image_data(images, tmp_path):
    out = str(tmp_path / "scaling.json")
    p = run_marked(["gluonperf.train", "--dataset", images + ".rec", "--model", "lenet", "--ctx", "cpu0,cpu1",
                    "--scaling", "--steps", "2", "--batch-size", "4", "--json", out])
    assert p.returncode == 0, p.stderr
    assert [r["devices"] for r in records(out)] == [1, 2]

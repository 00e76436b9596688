"""The commands as most users run them: only the arguments they require, on each kind of data
they take, every other flag at its default (the other tests of image data pass --workers, --model and
--batch-size, which hid a crash of `profile --dataset FOLDER` without --workers).

Here: train on each kind of data (synthetic, digits, an image folder, its .rec); profile, tune,
bench input and bench time-to-accuracy on the folder and the .rec (tune on the .rec, whose
data lever tries the folder's candidates and more); compare and report on what those runs
wrote. The named data sets run through those other commands in other tests (profile, bench
scratch and tune on synthetic in test_commands, profile on digits in test_profile, bench
time-to-accuracy on digits, its default, in test_bench_optimizers).

A flag beyond the required ones is here only where the default run would be too long for the
suite (each says why), or to keep the results that compare and report read. The image data set
is tiny, made once in process: 80 JPEGs of 32x32 in 10 classes, so that the default
--batch-size of 64 fits the 72 training images (a tenth is held out) in one batch per epoch.
Each command runs as a subprocess from a clean environment (helpers.run_leaving_nothing: no
process of the run may outlive it), two at a time (they mostly wait for MXNet to load).
Nothing here depends on how fast the machine is: only exit codes, tables and records are
checked.
"""
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import run_leaving_nothing

TIMEOUT = 300
CLASSES, PER_CLASS = 10, 8  # 80 images: 72 to train on, one batch of the default 64
LENET = ["--model", "lenet"]  # the default ResNet-18's step is many times LeNet's, over the many steps below
SHORT_STEPS = ["--steps", "2", "--warmup", "1",  # 10 and 3 steps per measurement, of several measurements
               "--rounds", "2"]  # 5 rounds of the real loader, a batch in memory and the loader alone
SHORT_INPUT = ["--repeat", "2", "--batches", "1", "--sample", "4"]  # 5 x 4 batches per source and worker count


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """DIR (10 class folders of 8 JPEGs, 32x32) and DIR.rec/DIR.idx, made in this process by
    the library (the command that makes them is tested in test_image_data)."""
    from gluonperf.training.image_data import make_folder, pack_rec
    folder = str(tmp_path_factory.mktemp("images") / "tiny")
    make_folder(folder, images_per_class=PER_CLASS, size=32, classes=CLASSES)
    pack_rec(folder, folder)
    return folder


@pytest.fixture(scope="module")
def ran(images, tmp_path_factory):
    """Every data-taking command on the folder and on the .rec, two at a time: {name:
    CompletedProcess}; the results that compare and report read go to a folder of --json files."""
    out = tmp_path_factory.mktemp("results")
    rec = images + ".rec"
    runs = {
        # first: its 14 fresh runs of gluonperf.train take as long as the others together, which run beside it
        # --levers data --rounds 1 --steps 2 --model lenet: each candidate is a fresh gluonperf.train, and the
        # defaults try every lever over at least 5 rounds; the data lever is the one image data brings
        # (DataLoader workers, and for a .rec MXNet's ImageRecordIter: the folder's candidates and more)
        "tune rec": ["gluonperf.tune", "--dataset", rec, "--levers", "data", "--rounds", "1", "--steps", "2",
                     "--model", "lenet", "--json", str(out / "tune.json")],
        # --epochs 1: the default 4 epochs would train the same batch 4 times over
        "train folder": ["gluonperf.train", "--dataset", images, "--epochs", "1"],
        "train rec": ["gluonperf.train", "--dataset", rec, "--epochs", "1"],
        # --limit 64 (1 step): a whole epoch of the 898 digits (6000 synthetic images) is 14 (93) steps
        "train synthetic": ["gluonperf.train", "--dataset", "synthetic", "--epochs", "1", "--limit", "64"],
        "train digits": ["gluonperf.train", "--dataset", "digits", "--epochs", "1", "--limit", "64"],
        # without --workers the input section's title once crashed, in the full run and with --input-only;
        # --ceiling quick: the full peak measurement multiplies 1536^3 matrices, twice
        "profile folder": ["gluonperf.profile", "--dataset", images, *LENET, "--ceiling", "quick", *SHORT_STEPS,
                           "--json", str(out / "profile.json")],
        # --input-only: the input section alone, without the ceiling, the breakdown and the second process
        # of the operator table, which the folder's full run has
        "profile rec": ["gluonperf.profile", "--dataset", rec, "--input-only", *LENET, *SHORT_STEPS,
                        "--json", str(out / "input-bound.json")],
        # --model lenet: the default resnet18_v1's 224x224 step is timed against the loaders
        "input folder": ["gluonperf.bench", "input", "--dataset", images, *LENET, *SHORT_INPUT],
        "input rec": ["gluonperf.bench", "input", "--dataset", rec, *LENET, *SHORT_INPUT,
                      "--json", str(out / "input.json")],
        # --seeds 1 --optimizers sgd --epochs 1: the default 6 optimizers x 3 seeds x up to 10 epochs
        "time-to-accuracy folder": ["gluonperf.bench", "time-to-accuracy", "--dataset", images, "--seeds", "1",
                                    "--optimizers", "sgd", "--epochs", "1"],
        "time-to-accuracy rec": ["gluonperf.bench", "time-to-accuracy", "--dataset", rec, "--seeds", "1",
                                 "--optimizers", "sgd", "--epochs", "1", "--json", str(out / "tta.json")],
    }
    with ThreadPoolExecutor(max_workers=2) as pool:  # they mostly wait for MXNet to load
        done = dict(zip(runs, pool.map(lambda argv: run_leaving_nothing(["-m", *argv], TIMEOUT), runs.values())))
    done["results"] = out
    return done


def ok(p):
    assert p.returncode == 0, (p.args, p.stderr[-3000:])
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return p.stdout.splitlines()


def records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip() and not line.startswith('{"environment"')]


def rows_after(lines, header):
    """The rows of the table whose header line starts with `header` (after its rule), up to a blank line."""
    start = next(i for i, l in enumerate(lines) if l.startswith(header))
    rows = []
    for line in lines[start + 2:]:
        if not line.strip():
            break
        rows.append(line.split())
    return rows


@pytest.mark.parametrize("source", ["folder", "rec", "synthetic", "digits"])
def test_train_runs_an_epoch_of_the_default_model_and_batch(ran, images, source):
    lines = ok(ran["train " + source])
    path = {"folder": images, "rec": images + ".rec"}.get(source, source)
    assert lines[0].startswith("resnet18 on %s, global batch 64 on cpu0" % path), lines[0]
    row, = rows_after(lines, "epoch  loss")
    assert row[0] == "1"


def test_profile_on_a_folder_says_which_workers_it_used(ran, images):
    """The input section's title formatted --workers, None when not given: it crashed."""
    lines = ok(ran["profile folder"])
    title = next(l for l in lines if l.startswith("input: is the step waiting for its input?"))
    assert "lenet on %s, batch 64 on cpu0, --loader dataloader, --workers 0 (the default on CPU contexts)" % images \
        in title
    assert any(l.startswith("ceiling: peak") for l in lines) and any(l.startswith("verdict") for l in lines)
    found = {(r["bench"], r["name"]) for r in records(ran["results"] / "profile.json")}
    assert {("breakdown", "fenced step"), ("breakdown", "hidden by overlap"), ("input-bound", "verdict")} <= found
    assert lines[-1] == records(ran["results"] / "profile.json")[-1]["finding"]


def test_profile_input_only_on_a_rec(ran, images):
    lines = ok(ran["profile rec"])
    assert lines[0].startswith("input: is the step waiting for its input? lenet on %s.rec, batch 64" % images)
    assert "--workers 0 (the default on CPU contexts)" in lines[0]
    names = [r["name"] for r in records(ran["results"] / "input-bound.json")]
    assert names == ["real data", "batch in memory", "loader alone", "verdict"]


@pytest.mark.parametrize("source, loaders", [
    ("folder", ["folder, workers 0", "folder, workers 1", "folder, workers 2"]),
    ("rec", ["rec, workers 0", "rec, workers 1", "rec, workers 2", "recorditer, workers 1", "recorditer, workers 2"]),
])
def test_bench_input_times_every_source_at_the_default_workers(ran, source, loaders):
    lines = ok(ran["input " + source])
    assert lines[0].startswith("input pipeline of "), lines[0]
    rows = rows_after(lines, "name  ")
    assert [" ".join(r[:3]) for r in rows] == loaders


@pytest.mark.parametrize("source", ["folder", "rec"])
def test_time_to_accuracy_trains_the_default_lenet(ran, images, source):
    lines = ok(ran["time-to-accuracy " + source])
    path = images if source == "folder" else images + ".rec"
    assert lines[0].startswith("time to test top-1 0.9: lenet on %s, batch 64" % path), lines[0]
    row, = rows_after(lines, "name  reached")
    assert row[0] == "sgd" and row[-1] == "baseline"


def test_tune_tries_the_loaders_of_a_rec(ran):
    lines = ok(ran["tune rec"])
    names = {r["name"] for r in records(ran["results"] / "tune.json") if r.get("bench") == "tune"}
    # workers 0, 1 and one per core; ImageRecordIter's threads 1 and one per core
    assert {"workers=0", "workers=1", "loader=recorditer workers=1"} <= names, names
    assert any(l.startswith("best at batch 64") for l in lines)


def test_compare_and_report_read_what_the_image_runs_wrote(ran, tmp_path):
    """compare OLD NEW on profile results where NEW's 'hidden by overlap' (fenced - unfenced) is
    negative, as a run whose unfenced steps were slower writes it: the ratio of a signed
    difference crashed compare; now the row has no common metric and the others compare."""
    ok(ran["profile folder"])
    results = ran["results"]
    old = str(results / "profile.json")
    new = str(tmp_path / "profile-new.json")
    with open(old) as f, open(new, "w") as g:
        for line in f:
            r = json.loads(line)
            if r.get("name") == "hidden by overlap":
                r["time_s"], r["share"] = -abs(r["time_s"]) - 1e-3, -abs(r["share"]) - 0.01
            g.write(json.dumps(r) + "\n")
    page = str(tmp_path / "report.html")
    with ThreadPoolExecutor(max_workers=2) as pool:
        compared, reported = pool.map(lambda argv: run_leaving_nothing(["-m", *argv], TIMEOUT), [
            ["gluonperf.compare", old, new, "--wide"],
            # -o: the default, report.html in the working directory, would be the project's root here
            ["gluonperf.report", str(results), "-o", page]])
    lines = ok(compared)
    hidden = next(l for l in lines if l.startswith("breakdown/hidden by overlap"))
    assert hidden.split()[-3:] == ["no", "common", "metric"]
    fenced = next(l for l in lines if l.startswith("breakdown/fenced step"))
    assert "images_per_s" in fenced.split() and fenced.split()[-1] in ("same", "inconclusive")  # equal values
    files = sorted(os.listdir(results))
    assert ok(reported)[-1] == "wrote %s: %d records from %d files" % (
        page, sum(len(records(results / f)) for f in files), len(files))
    html = open(page).read()
    assert all(f in html for f in files)
    for section in ("Profile: where a training step", "Throughput suites and tune",
                    "Other records (no renderer for their kind yet)"):  # input-bound, input, time-to-accuracy
        assert section in html

"""A model of one's own, given as file.py:factory or module:factory, through the commands as a
user runs them (subprocesses, clean environment), and every bad spec as one line."""
import json
import os

import pytest

from helpers import ROOT, run_leaving_nothing

NETS = os.path.join(ROOT, "tests", "user_models", "nets.py")
TRAIN = ["-m", "gluonperf.train", "--dataset", "synthetic", "--epochs", "1", "--limit", "128", "--batch-size", "32"]


def _records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_train_runs_a_model_from_a_file(tmp_path):
    out = tmp_path / "train.jsonl"
    p = run_leaving_nothing(TRAIN + ["--model", NETS + ":branchy", "--model-args", "width=4",
                                     "--input-shape", "3,12,12", "--json", str(out)])
    assert p.returncode == 0, p.stderr
    assert "nets.py:branchy(width=4) 3x12x12 on synthetic" in p.stdout  # the title names it shortly
    record = _records(out)[-1]
    spec = json.loads(record["model"])  # the record keeps the whole spec, machine-readable
    assert spec["model"] == NETS + ":branchy" and spec["input_shape"] == [3, 12, 12] and spec["args"] == {"width": 4}


def test_train_runs_a_model_from_a_module_on_token_ids(tmp_path):
    """module:factory from the user's PYTHONPATH; int32 token ids for an Embedding + LSTM; on two
    contexts, as any model."""
    env = {"PYTHONPATH": os.pathsep.join([os.path.join(ROOT, "tests", "user_models"), ROOT])}
    p = run_leaving_nothing(TRAIN + ["--model", "nets:lstm", "--input-shape", "6", "--input-dtype", "int32",
                                     "--vocab-size", "50", "--hybridize", "none", "--ctx", "cpu0,cpu1"], **env)
    assert p.returncode == 0, p.stderr
    assert "nets:lstm 6 int32<50 on synthetic, global batch 32 on cpu0,cpu1" in p.stdout


def test_a_model_that_cannot_be_hybridized_runs_imperatively():
    p = run_leaving_nothing(TRAIN + ["--model", NETS + ":gated", "--input-shape", "20", "--hybridize", "static"])
    assert p.returncode == 0, p.stderr
    assert "cannot be hybridized" in p.stderr and "measured imperatively" in p.stderr


def test_bench_hybridize_marks_the_modes_of_a_model_that_cannot_be_hybridized(tmp_path):
    out = tmp_path / "h.jsonl"
    p = run_leaving_nothing(["-m", "gluonperf.bench", "hybridize", "--model", NETS + ":gated", "--input-shape", "20",
                             "--repeat", "2", "--number", "5", "--json", str(out)])
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in _records(out)}
    assert "note" not in rows["imperative"] and "ran imperatively" in rows["static"]["note"]


def test_bench_hybridize_and_footprint_run_a_model_from_a_file(tmp_path):
    p = run_leaving_nothing(["-m", "gluonperf.bench", "hybridize", "--model", NETS + ":branchy",
                             "--input-shape", "3,12,12", "--repeat", "2", "--number", "5"])
    assert p.returncode == 0, p.stderr
    assert "nets.py:branchy" in p.stdout
    out = tmp_path / "f.jsonl"
    p = run_leaving_nothing(["-m", "gluonperf.bench", "footprint", "--model", NETS + ":branchy",
                             "--input-shape", "3,12,12", "--batch-sizes", "2,4", "--hybridize", "hybrid",
                             "--steps", "1", "--json", str(out)])
    assert p.returncode == 0, p.stderr
    assert [r["batch_size"] for r in _records(out) if "batch_size" in r][:2] == [2, 4]


BAD_SPECS = [
    (["--model", "no/such/file.py:net", "--input-shape", "3,8,8"], "no/such/file.py:net: no file"),
    (["--model", NETS + ":nothing_here", "--input-shape", "3,8,8"], "has no callable 'nothing_here'"),
    (["--model", NETS + ":not_a_block", "--input-shape", "3,8,8"], "returned str, not a gluon Block"),
    (["--model", os.path.join(ROOT, "tests", "user_models", "broken.py") + ":net", "--input-shape", "3,8,8"],
     "does not import: RuntimeError: this file is broken on purpose"),
    (["--model", "no_such_module_anywhere:net", "--input-shape", "3,8,8"], "module no_such_module_anywhere does not import"),
    (["--model", NETS + ":branchy"], "give the shape of one sample it takes with --input-shape"),
    (["--model", NETS + ":branchy", "--input-shape", "12"], "with input 12: the first forward fails"),
    (["--model", NETS + ":two_inputs", "--input-shape", "4"], "--input-shape once per input"),
    (["--model", NETS + ":branchy", "--input-shape", "3,x,8"], "--input-shape 3,x,8: give one sample's shape"),
    (["--model", NETS + ":branchy", "--input-shape", "3,8,8", "--model-args", "width"], "is not key=value"),
    (["--model", NETS + ":branchy", "--input-shape", "3,8,8", "--model-args", "depth=3"], "branchy(depth=3, classes=10) failed"),
    (["--model", NETS + ":lstm", "--input-shape", "6", "--input-dtype", "int32"], "needs --vocab-size"),
    (["--model", NETS + ":regression", "--input-shape", "4", "--loss", NETS + ":nope"], "has no callable 'nope'"),
    (["--model", "resnet18", "--model-args", "width=3"], "the built-in resnet18 takes none"),
]


@pytest.mark.parametrize("flags, says", BAD_SPECS)
def test_a_bad_model_spec_is_refused_with_what_is_wrong(flags, says, monkeypatch):
    """Each bad spec through the flags' own parsing and check (cli.resolve_model), in this process."""
    import argparse
    from gluonperf import UserError
    from gluonperf.cli import common
    monkeypatch.chdir(ROOT)
    parser = argparse.ArgumentParser()
    common.add_model_flags(parser, "resnet18")
    args = parser.parse_args(flags)
    with pytest.raises(UserError) as refused:
        common.resolve_model(args)
    assert says in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("flags, says", [BAD_SPECS[0], BAD_SPECS[6], (
    ["--model", NETS + ":branchy", "--input-shape", "3,12,12", "--dataset", "digits"], "--dataset digits holds 1x28x28")])
def test_a_bad_model_spec_is_one_line_and_writes_nothing(tmp_path, flags, says):
    """As users meet it: one line on stderr, exit code 2, no traceback, nothing written."""
    out = tmp_path / "out.jsonl"
    argv = ["-m", "gluonperf.train", "--epochs", "1", "--limit", "64", "--json", str(out)]
    if "--dataset" not in flags:
        argv += ["--dataset", "synthetic"]
    p = run_leaving_nothing(argv + flags)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("python -m gluonperf.train: error: ") and says in lines[0], lines[0]
    assert not out.exists()


def test_a_loss_of_ones_own_trains_a_regression(tmp_path):
    p = run_leaving_nothing(TRAIN + ["--model", NETS + ":regression", "--input-shape", "4", "--loss", NETS + ":l2"])
    assert p.returncode == 0, p.stderr


def test_profile_names_the_blocks_of_a_model_from_a_file(tmp_path):
    """The issue's line: a model from a file gluonperf has never seen, with --input-shape, through
    profile, whose per-Block rows name its own sub-blocks."""
    out = tmp_path / "p.jsonl"
    p = run_leaving_nothing(["-m", "gluonperf.profile", "--model", NETS + ":branchy", "--input-shape", "3,12,12",
                             "--ceiling", "quick", "--steps", "3", "--warmup", "1", "--batch-size", "16",
                             "--json", str(out)])
    assert p.returncode == 0, p.stderr
    blocks = [r for r in _records(out) if r.get("bench") == "blocks"]
    names = " ".join(r["name"] for r in blocks)
    for child in ("left", "right", "pool", "head"):
        assert child in names, names
    assert "nets.py:branchy 3x12x12" in p.stdout


def test_tune_starts_train_with_the_flags_a_user_types():
    """tune's candidates (and the winning command line it prints) give a model of one's own as
    --model, --model-args and --input-shape, not as the spec's JSON."""
    import shlex
    from gluonperf.training.runners import TRAIN
    from gluonperf.tuning.candidates import Candidate
    from gluonperf.training.models import resolve_model
    spec, _ = resolve_model(NETS + ":branchy", {"width": 4}, (3, 8, 8))
    line = TRAIN.command_line(Candidate("baseline", flags=(("model", spec), ("batch_size", "8"))), 2)
    argv = shlex.split(line)
    at = argv.index("--model")
    assert argv[at:at + 6] == ["--model", NETS + ":branchy", "--model-args", '{"width":4}', "--input-shape", "3,8,8"]


def test_a_model_with_two_inputs_trains_and_is_timed(tmp_path):
    """--input-shape once per input: the model gets its two inputs (sliced from one flat batch
    by models.SeveralInputs), in train and in bench hybridize, whose records name both shapes."""
    two = ["--model", NETS + ":two_inputs", "--input-shape", "4", "--input-shape", "2,3"]
    p = run_leaving_nothing(TRAIN + two)
    assert p.returncode == 0, p.stderr
    assert "nets.py:two_inputs 4+2x3 on synthetic" in p.stdout
    out = tmp_path / "h.jsonl"
    p = run_leaving_nothing(["-m", "gluonperf.bench", "hybridize", *two, "--repeat", "2", "--number", "5",
                             "--json", str(out)])
    assert p.returncode == 0, p.stderr
    assert json.loads(_records(out)[0]["model"])["input_shape"] == [[4], [2, 3]]


def test_several_inputs_reach_the_model_as_given():
    """The flat batch is cut back into the inputs the model was given, each sample its own."""
    import mxnet as mx
    import numpy as np
    from gluonperf.training.models import SeveralInputs

    class Echo(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, a, b):
            return F.concat(F.flatten(a), F.flatten(b) * 10, dim=1)
    net = SeveralInputs(Echo(), [(2,), (1, 3)])
    flat = mx.nd.array(np.arange(10).reshape(2, 5))
    for hybridized in (False, True):
        if hybridized:
            net.hybridize()
        assert net(flat).asnumpy().tolist() == [[0, 1, 20, 30, 40], [5, 6, 70, 80, 90]]


def test_predict_validate_checks_a_model_of_ones_own_first():
    """--validate-model takes a spec with the model flags and checks it before any run."""
    p = run_leaving_nothing(["-m", "gluonperf.predict", "--validate", "--validate-model", NETS + ":branchy"])
    assert p.returncode == 2 and "give the shape of one sample it takes with --input-shape" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_a_model_with_two_outputs_trains_with_its_own_loss(tmp_path):
    """Two heads: refused without a loss that takes both, trained and timed with one (the outputs
    travel as one through models.SeveralOutputs and come apart again for the loss)."""
    heads = ["--model", NETS + ":two_heads", "--input-shape", "12"]
    p = run_leaving_nothing(TRAIN + heads)
    assert p.returncode == 2 and "it returns 2 outputs; give the loss that takes them" in p.stderr, p.stderr
    p = run_leaving_nothing(TRAIN + heads + ["--loss", NETS + ":main_and_aux"])
    assert p.returncode == 0, p.stderr
    p = run_leaving_nothing(["-m", "gluonperf.bench", "hybridize", "--train", *heads, "--loss", NETS + ":main_and_aux",
                             "--repeat", "2", "--number", "3"])
    assert p.returncode == 0, p.stderr


def test_the_loss_gets_the_outputs_back_apart():
    import mxnet as mx
    from gluonperf.training.models import LabelLike, SeveralOutputs

    class Two(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x * 2, F.reshape(x, shape=(0, 1, -1))
    seen = []
    loss = LabelLike(lambda a, b, label: seen.append((a.asnumpy().tolist(), b.asnumpy().tolist(), label.dtype)) or a,
                     [(3,), (1, 3)])
    x = mx.nd.array([[1, 2, 3]])
    loss(SeveralOutputs(Two())(x), mx.nd.array([1], dtype="int32"))
    assert seen == [([[2, 4, 6]], [[[1, 2, 3]]], x.dtype)]


def test_as_spec_passes_a_spec_on_and_parses_text_once():
    """as_spec: a ModelSpec is itself, text is parsed, anything else is a ValueError; the spec
    carries its own text (records, child processes), flags and label."""
    from gluonperf.training.model_spec import ModelSpec, as_spec, label, parse_spec, spec_flags, spec_text
    spec = ModelSpec(NETS + ":branchy", {"depth": 2}, (3, 8, 8))
    assert as_spec(spec) is spec
    assert as_spec(spec.text) == spec and as_spec("lenet") == ModelSpec("lenet")
    assert spec.text == spec_text(spec) and parse_spec(spec.text) == spec and ModelSpec("lenet").text == "lenet"
    assert spec.flags == spec_flags(spec.text) and spec.label == label(spec.text) == "nets.py:branchy(depth=2) 3x8x8"
    for wrong in (None, 3, ["lenet"]):
        with pytest.raises(ValueError, match="give a ModelSpec or a spec's text"):
            as_spec(wrong)


@pytest.fixture
def parsed(monkeypatch):
    """The texts parse_spec is given from now on (a ModelSpec passed through is not a parse)."""
    from gluonperf.training import model_spec
    texts, real = [], model_spec.parse_spec

    def counting(text):
        if not isinstance(text, model_spec.ModelSpec):
            texts.append(text)
        return real(text)
    monkeypatch.setattr(model_spec, "parse_spec", counting)
    return texts


def test_a_spec_resolved_by_the_command_is_not_parsed_again(parsed, tmp_path):
    """The command parses --model once (cli.resolve_model); the library functions it hands the
    ModelSpec to never parse a spec's text again (infer's ladder built and judged in its parent
    too), and their records carry the same text."""
    import argparse
    import mxnet as mx
    import numpy as np
    from gluonperf.cli import common
    from gluonperf.experiments.hybridize import compare_modes
    from gluonperf.measure.timing import Timing
    from gluonperf.inference import accuracy, calibration, ladder
    from gluonperf.training import data, models, steprate
    parser = argparse.ArgumentParser()
    common.add_model_flags(parser, "resnet18")
    args = parser.parse_args(["--model", NETS + ":branchy", "--input-shape", "3,8,8"])
    spec = common.resolve_model(args)
    assert len(parsed) == 1 and args.model == NETS + ":branchy" and not hasattr(args, "spec")  # args as parsed
    del parsed[:]
    models.get_model(spec), models.loss_of(spec), models.random_input(spec, 2, np.random.RandomState(0))
    assert data.sample_shape("synthetic", spec) == (3, 8, 8)
    data.check_available("synthetic", None, spec)
    source = ladder.model_source(spec)
    assert source.spec == spec.text and source.model_spec().text == spec.text
    rungs = ladder.prepare(source, ["fp32", "static"], mx.cpu(), str(tmp_path))
    held = calibration.Samples(np.zeros((4, 3, 8, 8), dtype="float32"), None, "zeros")
    rungs, fields = accuracy.evaluate_rungs(rungs, mx.cpu(), held, spec=source.model_spec())
    assert [r.error for r in rungs] == [None, None] and fields["fp32"]["evaluated_n"] == 4
    records = compare_modes(spec, batch_size=2, ctx=mx.cpu(), timing=Timing(repeat=2, number=1, warmup=0))
    figures = steprate.step_rate(steprate.Setting(spec, batch_size=2), steps=1, warmup=0)
    assert parsed == []
    assert {r.metrics["model"] for r in records} == {figures["model"]} == {spec.text}


def test_a_whole_train_run_parses_the_spec_once(parsed, tmp_path, monkeypatch, capsys):
    """train in this process, a model of one's own on synthetic data shaped for it: the command
    parses --model once, and the training loop (data, model, loss, checkpoints) takes the
    ModelSpec from the config; records and checkpoints keep the spec's text, and a run resumed
    from that text parses it once too, as do --scaling and a library caller's text config."""
    import mxnet as mx
    from gluonperf import train
    from gluonperf.cli import common
    from gluonperf.config import TrainConfig
    from gluonperf.records import read_jsonl
    from gluonperf.training.checkpoints import read_checkpoint
    from gluonperf.training.loop import fit
    from gluonperf.training.model_spec import ModelSpec
    monkeypatch.setattr(common, "_AS_COMMAND", False)  # main alone: no signal handlers, no stall guard here
    model = ["--model", NETS + ":branchy", "--model-args", "width=4", "--input-shape", "3,8,8"]
    flags = [*model, "--dataset", "synthetic", "--limit", "64", "--batch-size", "32", "--workers", "0",
             "--log-interval", "0", "--warmup-epochs", "0"]
    text = ModelSpec(NETS + ":branchy", {"width": 4}, (3, 8, 8)).text
    out, ckpt = tmp_path / "train.jsonl", tmp_path / "ckpt"
    runs = {"saved": [*flags, "--epochs", "1", "--save", str(ckpt), "--json", str(out)],
            "resumed": [*flags, "--epochs", "2", "--resume", str(ckpt)],
            "scaling": [*flags, "--scaling", "--steps", "1"]}
    for name, argv in runs.items():
        del parsed[:]
        assert train.main(argv) == 0, name
        assert len(parsed) == 1, (name, parsed)  # cli.resolve_model's, of the command line's text
    capsys.readouterr()
    assert {r.metrics["model"] for r, _ in read_jsonl(str(out))} == {text}
    path, meta = read_checkpoint(str(ckpt))
    assert meta["epoch"] == 2 and meta["config"]["model"] == text  # text, as checkpoints of every version
    del parsed[:]
    config = TrainConfig(**dict(meta["config"], epochs=3, save=None, resume=str(ckpt)))
    assert [r.metrics["model"] for r in fit(config, [mx.cpu()])] == [text] * 3
    assert parsed == [text]  # the checkpoint's text, parsed once where the run starts


def test_tune_gives_its_candidates_the_flags_of_the_spec_it_resolved(parsed):
    """tune --model resolves the spec once and hands the runner the ModelSpec (`for_model`): every
    candidate's command line gets the object's flags, the candidates' text is not parsed again."""
    from gluonperf import tune
    from gluonperf.tuning.candidates import Candidate
    _, checked = tune.parse_args(["--model", NETS + ":branchy", "--model-args", "width=4", "--input-shape", "3,8,8",
                                  "--runner", "train", "--batch-sizes", "32", "--ctx", "cpu0"])
    spec = checked.spec
    assert len(parsed) == 1 and checked.runner.spec is spec
    del parsed[:]
    candidate = Candidate("c", (), (("batch_size", "32"), ("ctx", "cpu0"), ("model", spec.text)))
    argv = checked.runner.argv(candidate, 5, "out.json")
    line = checked.runner.command_line(candidate, 5)
    assert parsed == []
    start = argv.index("--model")
    assert argv[start:start + len(spec.flags)] == spec.flags == [
        "--model", NETS + ":branchy", "--model-args", '{"width":4}', "--input-shape", "3,8,8"]
    assert "--model-args '{\"width\":4}' --input-shape 3,8,8" in line

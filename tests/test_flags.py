"""Every documented flag that no other test runs, run once through the command line, as a user
runs it, with its effect checked (not only that it parses).

Each test starts the commands as subprocesses from a clean environment (helpers.clean_env),
at tiny sizes, with a timeout, and checks that nothing of the run is left running. Flags
whose effects can be told apart share one run; runs that do not depend on each other go two
at a time (they mostly wait for MXNet to load).
"""
import json
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from helpers import HANGING_MXNET, ROOT, run_leaving_nothing

TIMEOUT = 240


def command(*args, timeout=TIMEOUT, **env):
    """`python <args>` from the project root in a clean environment (plus `env`); fails the
    test if any process of the run is still there 10 s after it returned."""
    return run_leaving_nothing(args, timeout, **env)


def two_at_a_time(*argvs, **env):
    """Run each argv with `command`, two at once; CompletedProcesses in order."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda argv: command(*argv, **env), argvs))


def records(path, bench=None):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    return [r for r in rows if bench is None or r.get("bench") == bench]


def ok(p):
    assert p.returncode == 0, (p.args, p.stderr[-3000:])
    return p


# --- predict ---------------------------------------------------------------------------

def test_predict_links_network_servers_placement_overlap_allreduce_and_measure(tmp_path):
    """Answers worked by hand. The MLP's gradients: 662056 bytes in 6 arrays.
    --allreduce: a ring measured at 2 GB/s on 4 MiB, 100 us on 4 KiB, so a per-message cost
    of (100 us - 4096 B / 2 GB/s) / 2 = 48.976 us. Two devices in a ring move 1/2 x 2 of the
    bytes, 331.028 us, in 2 steps per array, 587.712 us: t2 within the machine 918.740 us.
    --network-GBps 1 --servers 1 --placement dedicated, 2 machines: the one server's link
    carries both machines' gradients, 2 x 662056 B at 1 GB/s = 1324.112 us, plus 2 messages
    per array at the network's 30 us = 360 us: 1684.112 us.
    --measure: the step is measured now (on the first --ctx context), so t1 comes from this
    machine: positive, and the same in every row (per-device batch fixed).
    --t1 1 ms --update 10 ms, --overlap yes: the step is max(t1, t2) + update = 12.602852 ms
    against 11 ms on one device: efficiency 11 / 12.602852 = 0.8728, below --min-efficiency
    0.9, so no device count qualifies; --lr 0.1 --lr-batch 64 at a global batch of 2 x 2 x 32
    = 128: lr 0.2.
    --list-links: every named link, with its source, and nothing else."""
    allreduce = tmp_path / "allreduce.json"
    allreduce.write_text("".join(json.dumps(r) + "\n" for r in [
        {"bench": "allreduce", "name": "ring", "bus_GBps": 2.0, "tensor_bytes": 4 << 20, "contexts": 2,
         "median_s": 0.004},
        {"bench": "allreduce", "name": "ring", "bus_GBps": 0.1, "tensor_bytes": 4096, "contexts": 2,
         "median_s": 1e-4}]))
    links, given, measured = two_at_a_time(
        ["-m", "gluonperf.predict", "--list-links"],
        ["-m", "gluonperf.predict", "--model", "mlp", "--t1", "0.001", "--update", "0.01", "--per-device-batch", "32",
         "--lr", "0.1", "--lr-batch", "64", "--min-efficiency", "0.9",
         "--devices", "2", "--machines", "2", "--allreduce", str(allreduce), "--network-GBps", "1",
         "--servers", "1", "--placement", "dedicated", "--overlap", "yes", "--json", str(tmp_path / "given.json")],
        ["-m", "gluonperf.predict", "--model", "mlp", "--measure", "--per-device-batch", "8", "--devices", "1,2",
         "--machines", "1", "--json", str(tmp_path / "measured.json")])
    from gluonperf.scaling.model import LINKS
    lines = ok(links).stdout.strip().splitlines()
    assert [l.split()[0] for l in lines] == list(LINKS) and all(LINKS[n].source in l for n, l in zip(LINKS, lines))

    row, = records(tmp_path / "given.json", "predict")
    assert (row["devices"], row["machines"], row["servers"], row["placement"]) == (2, 2, 1, "dedicated")
    assert row["t2_machine_s"] == pytest.approx(918.740e-6, rel=1e-5)
    assert row["t2_network_s"] == pytest.approx(1684.112e-6, rel=1e-5)
    assert row["t2_s"] == pytest.approx(918.740e-6 + 1684.112e-6, rel=1e-5)
    t2 = 918.740e-6 + 1684.112e-6
    assert row["step_s"] == pytest.approx(t2 + 0.01, rel=1e-5) and row["comm_bound"]  # max(t1, t2) + update
    assert row["efficiency"] == pytest.approx(0.011 / (t2 + 0.01), rel=1e-5) and not row["efficient"]
    assert row["global_batch"] == 128 and row["lr"] == pytest.approx(0.2)
    best, = records(tmp_path / "given.json", "predict-best")
    assert best["machines"] == 2 and best["devices"] is None and best["min_efficiency"] == 0.9
    assert "1 GB/s" in ok(given).stdout and "dedicated" in given.stdout

    rows = records(tmp_path / "measured.json", "predict")
    assert [r["devices"] for r in rows] == [1, 2]
    assert rows[0]["t1_s"] > 0 and rows[0]["t1_s"] == rows[1]["t1_s"] and rows[0]["per_device_batch"] == 8
    assert ok(measured).stdout.count(", t1 ") == 1  # in the title once, not a column


@pytest.mark.alone
def test_predict_validate_dist_compares_launched_jobs_with_their_prediction(tmp_path):
    """--validate dist: every job of --validate-jobs (two of the default four, which differ in
    their servers and share one thread count, so one single-worker run serves both) runs as a
    real dist_sync job through the launcher on loopback and is set against its prediction,
    each measured over --validate-repeats epochs of --validate-launches runs."""
    out = tmp_path / "vd.json"
    ok(command("-m", "gluonperf.predict", "--validate", "dist", "--validate-model", "mlp",
               "--validate-batch", "16", "--validate-steps", "2", "--validate-jobs", "2x1,2x2",
               "--validate-repeats", "2", "--validate-launches", "1", "--json", str(out), timeout=600))
    rows = records(out, "predict-check")
    assert [(r["workers"], r["servers"]) for r in rows] == [(2, 1), (2, 2)]
    # one run of each job (tests/test_predict_validate.py pools several), 2 timed epochs
    assert all(r["launches"] == 1 and r["measured_n"] == 2 and len(r["measured_samples_s"]) == 2 for r in rows)
    for r in rows:
        assert r["scheme"] == "dist_sync" and r["measured_step_s"] > 0 and r["predicted_step_s"] > 0
        assert 0.1 < r["predicted_step_s"] / r["measured_step_s"] < 10, r


# --- train ---------------------------------------------------------------------------------

TRAIN = ["-m", "gluonperf.train", "--dataset", "digits", "--model", "mlp", "--limit", "256", "--batch-size", "32",
         "--epochs", "1", "--warmup-epochs", "0", "--workers", "0", "--log-interval", "0", "--ctx", "cpu0,cpu1"]


def test_train_seed_wd_kvstore_lr_scale_optimizer_and_lr_decay(tmp_path):
    """One configuration with every flag set: --optimizer adam, --lr-scale linear, --lr-decay
    step, --kvstore local, --wd 0 on two contexts, twice with --seed 1, once with --seed 2,
    once with --wd 0.5.
    - --optimizer adam with --lr-scale linear: the learning rate is Adam's default 0.001 (not
      SGD's 0.1) times the 2 contexts, 0.002; --lr-decay step: x0.1 at half and at three
      quarters of the run, so the (one) epoch ends at 0.01 of that (cosine would end near 0,
      none at 0.002).
    - --seed: the same seed gives the same losses and parameters to the last digit (one OpenMP
      thread, a fixed reduction order), another seed other ones.
    - --wd 0.5: weight decay pulls the weights towards 0: a smaller sum of squared weights."""
    common = TRAIN + ["--optimizer", "adam", "--lr-scale", "linear", "--lr-decay", "step", "--kvstore", "local"]
    runs = {"a": ["--seed", "1", "--wd", "0"], "b": ["--seed", "1", "--wd", "0"],
            "other seed": ["--seed", "2", "--wd", "0"],
            "decay": ["--seed", "1", "--wd", "0.5"]}
    done = two_at_a_time(*[common + extra + ["--json", str(tmp_path / (name + ".json")),
                                             "--save", str(tmp_path / (name + "-ckpt"))]
                           for name, extra in runs.items()], OMP_NUM_THREADS="1")
    for p in done:
        ok(p)
    rows = {name: records(tmp_path / (name + ".json"), "train") for name in runs}
    first = rows["a"]
    assert [r["epoch"] for r in first] == [1]
    assert all(r["optimizer"] == "adam" and r["kvstore"] == "local" and r["contexts"] == "cpu0,cpu1" for r in first)
    assert first[0]["lr"] == pytest.approx(0.001 * 2 * 0.01)
    assert "kvstore local" in done[0].stdout and "optimizer adam" in done[0].stdout
    same = [(r["loss"], r["param_checksum"]) for r in rows["b"]]
    assert [(r["loss"], r["param_checksum"]) for r in first] == same
    assert all(r["loss"] != o["loss"] for r, o in zip(first, rows["other seed"]))

    def squared_weights(name):
        from gluonperf.training.checkpoints import read_checkpoint
        import mxnet as mx
        path, _ = read_checkpoint(str(tmp_path / (name + "-ckpt")))
        params = mx.nd.load(os.path.join(path, "params"))
        return sum(float((v ** 2).sum().asscalar()) for k, v in params.items() if k.endswith("weight"))
    assert squared_weights("decay") < squared_weights("a")


def test_stall_timeout_stops_train_and_bench_scratch(tmp_path):
    """--stall-timeout on commands other than bench parallel (tested in test_commands): when
    MXNet never finishes (tests/hang makes every sync point wait for ever, so the stall is
    real on a machine of any speed), the guard stops the command with exit code 3, one line
    saying what it waited on, and no output file."""
    train, scratch = two_at_a_time(
        TRAIN + ["--stall-timeout", "3", "--json", str(tmp_path / "t.json")],
        ["-m", "gluonperf.bench", "scratch", "--epochs", "1", "--limit", "256", "--dataset", "digits",
         "--stall-timeout", "3", "--json", str(tmp_path / "s.json")], **HANGING_MXNET)
    for p, prog in ((train, "gluonperf.train"), (scratch, "gluonperf.bench")):
        assert p.returncode == 3, (p.returncode, p.stderr[-2000:])
        last = p.stderr.strip().splitlines()[-1]
        assert last.startswith("python -m %s: stalled: no progress" % prog) and "OMP_NUM_THREADS=" in last, last
        assert "Traceback" not in p.stderr
    assert not list(tmp_path.iterdir())


# --- bench subcommands ---------------------------------------------------------------

def test_bench_hybridize_train_and_export(tmp_path):
    """--train times training steps (task 'train_step', 3 calls a repeat as --number says);
    --export writes the hybridized model, which SymbolBlock.imports loads back: loaded here
    too, it gives the outputs the command compared."""
    out, export = tmp_path / "h.json", tmp_path / "exported"
    p = ok(command("-m", "gluonperf.bench", "hybridize", "--model", "mlp", "--train", "--repeat", "2", "--number", "3",
                   "--export", str(export), "--json", str(out)))
    rows = {r["name"]: r for r in records(out, "hybridize")}
    assert set(rows) == {"imperative", "hybrid", "static"}
    assert all(r["task"] == "train_step" and r["number"] == 3 and r["repeats"] == 2 for r in rows.values())
    assert "train steps" in p.stdout and "SymbolBlock.imports matches" in p.stdout
    assert sorted(os.listdir(export)) == ["mlp-0000.params", "mlp-symbol.json"]
    import mxnet as mx
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        net = mx.gluon.SymbolBlock.imports(str(export / "mlp-symbol.json"), ["data"], str(export / "mlp-0000.params"))
    assert net(mx.nd.ones((1, 512))).shape == (1, 2)


def test_bench_async_op_overlap_inner_memory_data(tmp_path):
    """async --op dot: the swept loop is the product; overlap --inner 8: each y is (n x 8)
    times (8 x n), the copy the same n x n; memory --data engine: batches made by the engine."""
    a, o, m = tmp_path / "a.json", tmp_path / "o.json", tmp_path / "m.json"
    pa, po, pm = two_at_a_time(
        ["-m", "gluonperf.bench", "async", "--op", "dot", "--demo-size", "64", "--sizes", "8,16", "--iterations", "20",
         "--repeat", "2", "--json", str(a)],
        ["-m", "gluonperf.bench", "overlap", "--inner", "8", "--cpu-size", "64", "--products", "3", "--repeat", "2",
         "--json", str(o)],
        ["-m", "gluonperf.bench", "memory", "--data", "engine", "--batches", "4", "--every", "2", "--batch-size", "32",
         "--features", "16", "--json", str(m)])
    sweep = [r for r in records(ok(pa) and a) if r["name"] in ("8x8", "16x16")]
    assert [r["op"] for r in sweep] == ["y = nd.dot(x, x)"] * 2 and "y = nd.dot(x, x) per iteration" in pa.stdout
    rows = records(ok(po) and o)
    assert all(r["inner"] == 8 and r["size"] == 64 and r["copy_bytes"] == 3 * 64 * 64 * 4 for r in rows)
    assert "(64x8) times w (8x64)" in po.stdout
    rows = records(ok(pm) and m)
    assert [r["data"] for r in rows] == ["engine", "engine"] and "(engine data)" in pm.stdout


def test_bench_scratch_init_scale(tmp_path):
    """--init-scale 1e-6: every logit starts at about 0, the softmax is uniform over the 10
    classes and the loss is ln 10 = 2.3026, and stays within 0.002 of it for the 4 steps of
    the epoch (only the last bias learns: every other gradient scales with the weights;
    2.3022 seen); at the default 0.1 the epoch's loss is 2.247."""
    tiny, default = tmp_path / "tiny.json", tmp_path / "default.json"
    argv = ["-m", "gluonperf.bench", "scratch", "--epochs", "1", "--limit", "256", "--dataset", "digits",
            "--batch-size", "64"]
    for p in two_at_a_time(argv + ["--init-scale", "1e-6", "--json", str(tiny)], argv + ["--json", str(default)]):
        ok(p)
    assert records(tiny)[0]["train_loss"] == pytest.approx(math.log(10), abs=2e-3)
    assert math.log(10) - records(default)[0]["train_loss"] > 0.02


# --- compare, report, tune, launch ---------------------------------------------------------

def _two_runs(tmp_path):
    """Two saved runs of the same four records, the second 1.5x the first's throughput (and
    so 1/1.5 its time per call): median_s is what compare and report pick by default."""
    paths = []
    for name, rates in (("old", [100, 102, 98, 101]), ("new", [150, 148, 152, 151])):
        path = tmp_path / (name + ".json")
        path.write_text("".join(json.dumps({"bench": "train", "name": "epoch %d" % (i + 1), "images_per_s": r,
                                            "median_s": 1.0 / r}) + "\n" for i, r in enumerate(rates)))
        paths.append(str(path))
    return paths


def test_compare_metric_and_report_metric_and_title(tmp_path):
    """compare --metric images_per_s and report --compare --metric images_per_s judge the
    named metric (the records also hold median_s, the default); report --title titles the
    page, --output names it; compare --noise-floor widens a one-run-a-side interval."""
    old, new = _two_runs(tmp_path)
    html = tmp_path / "r.html"
    compared, floor, reported = two_at_a_time(
        ["-m", "gluonperf.compare", old, new, "--metric", "images_per_s"],
        ["-m", "gluonperf.compare", old, new, "--metric", "images_per_s", "--noise-floor", "30"],
        ["-m", "gluonperf.report", new, "--compare", old, "--metric", "images_per_s", "--title", "Flags <checked>",
         "--output", str(html)])
    rows = [l for l in ok(compared).stdout.splitlines() if l.startswith("train/epoch")]
    assert len(rows) == 4 and all("images_per_s" in l and "median_s" not in l for l in rows), compared.stdout
    # --noise-floor 30: one run a side, so the interval is the floor's alone, 1.5x
    # exp(+-1.96 x sqrt(2) x 0.30): 0.65-3.45 (by default, the floor for the shorter side's call,
    # median_s 1/150 s: stats.noise_floor)
    epoch1 = next(l for l in ok(floor).stdout.splitlines() if l.startswith("train/epoch 1 "))
    assert "0.65-3.45" in epoch1, epoch1
    from gluonperf.measure.stats import noise_floor
    half = 1.96 * math.sqrt(2) * noise_floor(1.0 / 150)
    assert "%.2f-%.2f" % (1.5 * math.exp(-half), 1.5 * math.exp(half)) in rows[0], rows[0]
    page = (ok(reported) and html).read_text()
    assert "<title>Flags &lt;checked&gt;</title>" in page and "Flags <checked>" not in page
    assert "images_per_s" in page


def test_tune_timeout_kvstore_and_two_contexts(tmp_path):
    """tune --ctx cpu0,cpu1 --kvstore device,local: the contexts lever tries the two contexts
    with each of the two kvstores named (and no other). --timeout 1 where MXNet never
    finishes (tests/hang, in tune's children too): every candidate is abandoned and says so."""
    kv, slow = tmp_path / "kv.json", tmp_path / "timeout.json"
    base = ["-m", "gluonperf.tune", "--model", "mlp", "--batch-sizes", "8", "--steps", "2", "--rounds", "2",
            "--runner", "steprate"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        kv_run = pool.submit(command, *base, "--ctx", "cpu0,cpu1", "--kvstore", "device,local", "--levers",
                             "contexts", "--json", str(kv))
        p_slow = command(*base, "--levers", "engine", "--timeout", "1", "--json", str(slow), **HANGING_MXNET)
        p_kv = kv_run.result()
    ok(p_kv)
    tried = [r["name"] for r in records(kv) if r.get("lever") == "contexts"]
    both = [n for n in tried if "cpu0,cpu1" in n]
    assert both and {n.split("kvstore=")[1].split()[0] for n in both} == {"device", "local"}, tried
    # every run timed out: tune says that nothing was compared and exits 1, not "best: the defaults"
    assert p_slow.returncode == 1 and "no run of the baseline finished" in p_slow.stdout, p_slow.stderr[-2000:]
    rows = [r for r in records(slow) if r.get("lever") == "engine"]
    assert rows and all("timed out after 1s" in (r.get("error") or "") for r in rows), rows


def test_launch_python_runs_the_scheduler_and_servers(tmp_path):
    """--python: the scheduler and the server start with the Python given (a wrapper that
    notes its role, then runs this Python); the worker, the command after --, as given."""
    wrapper, roles, out = tmp_path / "python", tmp_path / "roles", tmp_path / "out"
    wrapper.write_text("#!/bin/sh\necho \"$DMLC_ROLE\" >> %s\nexec %s \"$@\"\n" % (roles, sys.executable))
    wrapper.chmod(0o755)
    ok(command("-m", "gluonperf.launch", "-n", "1", "-s", "1", "--python", str(wrapper), "--timeout", "120", "--",
               sys.executable, os.path.join(ROOT, "tests", "dist_worker.py"), str(out), "--steps", "2"))
    assert sorted(roles.read_text().split()) == ["scheduler", "server"]
    assert os.path.exists(out / "params-rank0.npz")


def test_levers_script_only_steps_rounds_batch_size(tmp_path):
    """benchmarks/levers.py beyond bad input (test_suites): --only 0 runs the book's loop
    alone (no lever), --rounds 2 rounds of --steps 1 step at --batch-size 8, as its record
    and the command it ran say. (A lever beside it costs ResNet-18 steps: about 45 s here.)"""
    out = tmp_path / "levers.json"
    p = ok(command(os.path.join(ROOT, "benchmarks", "levers.py"), "--only", "0", "--steps", "1", "--rounds", "2",
                   "--batch-size", "8", "--json", str(out)))
    row, = records(out)
    assert (row["name"], row["batch_size"], row["rounds"], row["verdict"]) == ("book loop", 8, 2, "baseline")
    assert "--batch-size 8" in row["command"] and "--steps 1" in row["command"] and row["images_per_s"] > 0
    assert "levers round 2: book loop" in p.stderr  # progress, round by round

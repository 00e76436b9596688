import json
import os
import re

import mxnet as mx
import numpy as np
import pytest

from gluonperf import UserError
from gluonperf.experiments import allreduce_bandwidth as bandwidth, from_scratch as dp
from gluonperf.measure.timing import Timing
from gluonperf.runtime import horovod_launcher
from gluonperf.training.data import synthetic
from helpers import HANGING_MXNET, ROOT, run_leaving_nothing

# The Horovod tests (bench allreduce --methods horovod): skipped without Horovod (bash
# scripts/install-horovod), except on CI (CI=true), where they run and fail.
needs_horovod = pytest.mark.skipif(not horovod_launcher.available() and os.environ.get("CI") != "true",
                                   reason="Horovod is not installed (bash scripts/install-horovod)")


def _synthetic(num_train, num_test, seed):
    return tuple(mx.gluon.data.ArrayDataset(x, y.astype("int32"))
                 for x, y in synthetic(num_train, num_test, seed=seed))

SHAPES = [(1,), (7,), (3, 5), (2, 3, 5), (1001,)]


def _arrays(k, shape, seed=0):
    """Integer-valued float32 arrays on cpu(0..k-1): their sum is exact in any order."""
    rng = np.random.RandomState(seed + k)
    values = [rng.randint(-1000, 1000, size=shape).astype("float32") for _ in range(k)]
    return values, [mx.nd.array(v, ctx=mx.cpu(i)) for i, v in enumerate(values)]


@pytest.mark.parametrize("method", dp.METHODS)
@pytest.mark.parametrize("k", [2, 3, 4])
def test_allreduce_exact_sum_on_every_context(method, k):
    buffers = {}  # reused across shapes (growing and sliced), as with --reuse-buffers
    for shape in SHAPES:
        for reuse in (None, buffers):
            values, arrays = _arrays(k, shape)
            out = dp.allreduce(arrays, method=method, buffers=reuse)
            assert out is arrays
            expected = np.sum(values, axis=0)
            for i, a in enumerate(arrays):
                assert a.context == mx.cpu(i) and a.shape == shape
                np.testing.assert_array_equal(a.asnumpy(), expected,
                                              err_msg="%s k=%d %s buffers=%s" % (method, k, shape, reuse is not None))
    assert {ctx for ctx, _ in buffers} <= {mx.cpu(i) for i in range(k)} and buffers


def test_allreduce_gradients_in_place_and_one_context():
    params = [dp.get_params(dp.init_params(), mx.cpu(i)) for i in range(3)]
    grads = [p[0].grad for p in params]
    for i, g in enumerate(grads):
        g[:] = i + 1
    dp.allreduce(grads, method="ring")
    assert all((p[0].grad.asnumpy() == 6).all() for p in params)  # the attached gradients themselves
    _, single = _arrays(1, (4,))
    before = single[0].asnumpy()
    np.testing.assert_array_equal(dp.allreduce(single)[0].asnumpy(), before)


def test_allreduce_errors():
    _, arrays = _arrays(2, (3,))
    with pytest.raises(UserError, match="unknown allreduce method 'nope'"):
        dp.allreduce(arrays, method="nope")
    with pytest.raises(UserError, match="one shape"):
        dp.allreduce([arrays[0], mx.nd.zeros(4, ctx=mx.cpu(1))])
    with pytest.raises(UserError, match="at least one"):
        dp.allreduce([])


def test_received_bytes_per_schedule():
    n = 1200
    assert dp.received_bytes("book", 4, n) == [3 * n, n, n, n]  # the first context takes everything
    assert dp.received_bytes("ring", 4, n) == [2 * 3 * n // 4] * 4  # 2(k-1)/k N each, the minimum
    assert dp.received_bytes("ring", 3, n) == [1600] * 3
    assert max(dp.received_bytes("tree", 4, n)) == 2 * n  # log2(4) rounds of reduce at the root
    assert sum(dp.received_bytes("tree", 5, n)) == 2 * 4 * n  # k-1 adds and k-1 copies


def test_split_and_load_uneven_shards():
    data = mx.nd.arange(7 * 2).reshape((7, 2))
    ctx = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    shards = dp.split_and_load(data, ctx, even_split=False)
    assert [s.shape[0] for s in shards] == [2, 2, 3]
    assert [s.context for s in shards] == ctx
    np.testing.assert_array_equal(np.concatenate([s.asnumpy() for s in shards]), data.asnumpy())
    sizes = [s.shape[0] for s in dp.split_and_load(mx.nd.zeros(10), ctx + [mx.cpu(3)], even_split=False)]
    assert sizes == [2, 3, 2, 3]  # differ by at most one (gluon's own split gives 2, 2, 2, 4)
    assert [s.shape[0] for s in dp.split_and_load(mx.nd.zeros((6, 3)), ctx[:2])] == [3, 3]
    assert [s.shape[0] for s in dp.split_and_load(mx.nd.zeros(3), ctx, even_split=False)] == [1, 1, 1]


def test_split_and_load_errors():
    ctx = [mx.cpu(0), mx.cpu(1), mx.cpu(2)]
    with pytest.raises(UserError, match="7 samples does not divide evenly over 3 contexts"):
        dp.split_and_load(mx.nd.zeros(7), ctx)
    for even in (True, False):
        with pytest.raises(UserError, match="2 samples cannot be split over 3 contexts"):
            dp.split_and_load(mx.nd.zeros(2), ctx, even_split=even)
    with pytest.raises(UserError, match="at least one context"):
        dp.split_and_load(mx.nd.zeros(2), [])


def test_get_params_and_lenet():
    params = dp.init_params(scale=0.01)
    new = dp.get_params(params, mx.cpu(1))
    assert all(p.context == mx.cpu(1) for p in new)
    assert all((p.grad.asnumpy() == 0).all() and p.grad.context == mx.cpu(1) for p in new)
    np.testing.assert_array_equal(new[0].asnumpy(), params[0].asnumpy())
    assert dp.lenet(mx.nd.zeros((3, 1, 28, 28), ctx=mx.cpu(1)), new).shape == (3, 10)


def _one_step(ctx, X, y, method):
    device_params = [dp.get_params(dp.init_params(scale=0.1, seed=3), c) for c in ctx]
    dp.train_batch(X, y, device_params, ctx, lr=0.5, method=method)
    return device_params


@pytest.mark.parametrize("method", dp.METHODS)
def test_data_parallel_step_equals_single_context_step(method):
    rng = np.random.RandomState(1)
    for batch, k in ((8, 2), (7, 3)):  # even, and uneven shards
        X = mx.nd.array(rng.uniform(size=(batch, 1, 28, 28)))
        y = mx.nd.array(rng.randint(0, 10, size=batch))
        single = _one_step([mx.cpu(0)], X, y, method)[0]
        start = dp.init_params(scale=0.1, seed=3)
        multi = _one_step([mx.cpu(i) for i in range(k)], X, y, method)
        moved = 0.0
        for i, p in enumerate(single):
            moved = max(moved, float(np.abs(p.asnumpy() - start[i].asnumpy()).max()))
            for c in range(k):
                np.testing.assert_allclose(multi[c][i].asnumpy(), p.asnumpy(), rtol=0, atol=1e-5)
        assert moved > 1e-3  # the step did change the parameters


def test_train_learns_synthetic_data_on_two_contexts():
    train_set, test_set = _synthetic(1200, 300, seed=0)
    x, label = train_set[0]
    assert x.shape == (1, 28, 28) and x.dtype == np.float32 and 0 <= x.min() and x.max() <= 1
    train_iter, test_iter = dp.loaders(train_set, test_set, 64, 2)
    records = dp.train([mx.cpu(0), mx.cpu(1)], train_iter, test_iter, epochs=3, lr=0.2, method="ring",
                       params=dp.init_params(scale=0.1))
    assert [r.name for r in records] == ["epoch 1", "epoch 2", "epoch 3"]
    for r in records:
        assert r.metrics["time_s"] > 0 and r.metrics["images"] == 1200
        assert r.metrics["images_per_s"] == pytest.approx(1200 / r.metrics["time_s"])
    assert records[-1].metrics["test_acc"] > 0.5  # chance is 0.1
    assert records[-1].metrics["train_loss"] < records[0].metrics["train_loss"]


def test_allreduce_bandwidth_records():
    results = bandwidth.allreduce_bandwidth([mx.cpu(i) for i in range(3)], [4096, 1000], counts=(2, 3),
                                            timing=Timing(repeat=2, number=2))
    names = dp.METHODS + bandwidth.KVSTORES + ["copyto"]
    assert [r.name for r in results] == names * 4
    for r in results:
        m = r.metrics
        assert m["max_abs_err"] == 0 and m["bus_GBps"] > 0 and m["repeats"] == 2
        k = m["contexts"]
        assert m["bus_GBps"] == pytest.approx(2 * (k - 1) / k * m["tensor_bytes"] / m["median_s"] / 1e9) \
            or r.name == "copyto"
    assert all(r.metrics["of_ceiling"] == 1 for r in results if r.name == "copyto")
    assert results[1].metrics["max_recv"] == 1 and results[13].metrics["max_recv"] == pytest.approx(4 / 3, abs=0.01)
    with pytest.raises(UserError, match="cannot allreduce over 4 contexts"):
        bandwidth.allreduce_bandwidth([mx.cpu(0), mx.cpu(1)], [4096], counts=(4,))


# --- command line ------------------------------------------------------------

def _one_line_error(p):
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert lines and "error" in lines[-1], p.stderr  # argparse puts its usage line first
    return lines[-1]


def test_bench_allreduce_cli(run, tmp_path):
    out = tmp_path / "a.json"
    p = run("gluonperf.bench", "allreduce", "--sizes", "4K,64K", "--num-ctx", "2,3", "--repeat", "2",
            "--number", "2", "--reuse-buffers", "--methods", "book,ring,tree,kv-device,kv-local", "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert "share one memory system" in p.stdout and "kv-device" in p.stdout and "copyto" in p.stdout
    rows = [json.loads(line) for line in open(out)]
    assert len(rows) == 2 * 2 * 6
    assert {r["size"] for r in rows} == {"4 KiB", "64 KiB"} and {r["contexts"] for r in rows} == {2, 3}
    assert rows[0]["env"]["contexts"] == ["cpu(0)", "cpu(1)", "cpu(2)"]
    assert rows[0]["reuse_buffers"] is True and all(r["max_abs_err"] == 0 for r in rows)


def test_bench_scratch_cli(run):
    p = run("gluonperf.bench", "scratch", "--ctx", "cpu0,cpu1", "--epochs", "1", "--limit", "300", "--batch-size", "50", "--method", "tree")
    assert p.returncode == 0, p.stderr
    assert re.search(r"^epoch .*  images/s  .*test_acc", p.stdout, re.M), p.stdout  # images_per_s: the unit once
    assert "cpu(0),cpu(1)" in p.stdout


def _in_process_error(capsys, *argv):
    """Run the CLI in this process (MXNet is already imported, so it is fast)."""
    from gluonperf import bench
    from gluonperf.cli import common as cli
    with pytest.raises(SystemExit) as exit:
        cli.run(bench.main, bench.PROG, list(argv))
    err = capsys.readouterr().err
    assert exit.value.code != 0 and "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert lines and "error" in lines[-1], err
    return lines[-1]


def test_bench_cli_bad_input(run, tmp_path, capsys):
    assert "unknown --methods item 'nope'" in _one_line_error(
        run("gluonperf.bench", "allreduce", "--methods", "book,nope"))
    assert "more than the 2 contexts" in _in_process_error(
        capsys, "allreduce", "--ctx", "cpu0,cpu1", "--num-ctx", "3")
    assert "needs at least 2" in _in_process_error(capsys, "allreduce", "--ctx", "cpu1")
    assert "is not a size" in _in_process_error(capsys, "allreduce", "--sizes", "4X")
    assert "at least 2 contexts" in _in_process_error(capsys, "allreduce", "--num-ctx", "1,2")
    assert "unknown allreduce method 'nope'" in _in_process_error(capsys, "scratch", "--method", "nope")
    assert "smaller than the 2 contexts" in _in_process_error(
        capsys, "scratch", "--ctx", "cpu0,cpu1", "--batch-size", "1")
    assert "larger than the 10 training images" in _in_process_error(capsys, "scratch", "--limit", "10")
    assert "is a directory" in _in_process_error(capsys, "scratch", "--json", str(tmp_path))
    # a learning rate that diverges ends in one line, not a table of nan losses
    assert "loss became nan in epoch" in _in_process_error(
        capsys, "scratch", "--dataset", "synthetic", "--limit", "256", "--epochs", "4", "--lr", "1e30")


def test_train_rejects_a_learning_rate_that_is_not_a_positive_number():
    for lr in (0, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="lr must be a positive number"):
            dp.train([mx.cpu()], [], [], lr=lr)


def test_loaders_give_every_context_a_sample_and_repeat_with_a_seed():
    train_set, test_set = _synthetic(10, 5, seed=1)
    short, _ = dp.loaders(train_set, test_set, 4, num_contexts=3)  # 4 + 4 + a last batch of 2 < 3
    assert [x.shape[0] for x, _ in short] == [4, 4]
    kept, _ = dp.loaders(train_set, test_set, 4, num_contexts=2)
    assert [x.shape[0] for x, _ in kept] == [4, 4, 2]
    first = [y.asnumpy().tolist() for _, y in dp.loaders(train_set, test_set, 4, seed=7)[0]]
    again = [y.asnumpy().tolist() for _, y in dp.loaders(train_set, test_set, 4, seed=7)[0]]
    assert first == again
    assert sorted(sum(first, [])) == sorted(int(train_set[i][1]) for i in range(10))


# --- Horovod's allreduce beside the others ---------------------------------------

def _rows(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


@needs_horovod
def test_bench_allreduce_horovod_beside_kv_device(tmp_path):
    from gluonperf.bench.allreduce import COLUMNS
    out = tmp_path / "a.json"
    done = run_leaving_nothing(["-m", "gluonperf.bench", "allreduce", "--sizes", "4K,64K", "--num-ctx", "2",
                                "--repeat", "3", "--methods", "kv-device,horovod", "--json", str(out)], timeout=120)
    assert done.returncode == 0, done.stderr
    assert "horovod" in done.stdout and "Traceback" not in done.stderr
    assert "horovod ran in k processes of its own" in done.stderr
    rows = _rows(out)
    assert [(r["size"], r["name"]) for r in rows] == [
        (size, name) for size in ("4 KiB", "64 KiB") for name in ("kv-device", "horovod", "copyto")]
    for r in rows:  # the same columns and statistics in every row
        assert r["contexts"] == 2 and r["repeats"] == 3 and len(r["samples_s"]) == 3 and r["max_abs_err"] == 0
        assert r["bus_GBps"] > 0 and 0 <= r["iqr_s"] and r["min_s"] <= r["median_s"] <= r["max_s"]
        assert set(COLUMNS) <= set(r) and set(r) == set(rows[0])
    for r in (r for r in rows if r["name"] == "horovod"):
        assert r["bus_GBps"] == pytest.approx(2 * (2 - 1) / 2 * r["tensor_bytes"] / r["median_s"] / 1e9)
        assert r["of_ceiling"] > 0 and r["max_recv"] is None and r["number"] >= 1


@needs_horovod
def test_a_hung_horovod_allreduce_is_stopped_leaving_nothing():
    """The ranks' MXNet never finishes (tests/hang): the command's stall guard stops the job
    (exit 3), and the library's own timeout does when no guard runs; run_leaving_nothing checks
    that no process of either is left."""
    done = run_leaving_nothing(["-m", "gluonperf.bench", "allreduce", "--sizes", "4K", "--num-ctx", "2",
                                "--repeat", "2", "--methods", "horovod", "--stall-timeout", "4"],
                               timeout=120, **HANGING_MXNET)
    assert done.returncode == 3 and "stalled: no progress" in done.stderr, done.stderr
    code = ("import mxnet as mx\nfrom gluonperf.experiments.allreduce_bandwidth import horovod_allreduce\n"
            "from gluonperf.measure.timing import Timing\n"
            "horovod_allreduce([mx.cpu(0), mx.cpu(1)], [4096], Timing(repeat=2, number=None), timeout=4)\n")
    done = run_leaving_nothing(["-c", code], timeout=120, **HANGING_MXNET)
    assert done.returncode == 1 and "made no progress for 4 s" in done.stderr and "stopped it" in done.stderr


def test_without_horovod_allreduce_refuses_it_or_leaves_it_out(tmp_path):
    hidden = tmp_path / "hidden"
    (hidden / "horovod").mkdir(parents=True)
    (hidden / "horovod" / "__init__.py").write_text("raise ImportError('No module named horovod (hidden by the test)')\n")
    path = os.pathsep.join([str(hidden), ROOT])
    quick = ["-m", "gluonperf.bench", "allreduce", "--sizes", "4K", "--num-ctx", "2", "--repeat", "1", "--number", "1"]
    done = run_leaving_nothing([*quick, "--methods", "kv-device,horovod"], PYTHONPATH=path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--methods horovod needs Horovod" in done.stderr and "bash scripts/install-horovod" in done.stderr
    out = tmp_path / "a.json"
    done = run_leaving_nothing([*quick, "--json", str(out)], PYTHONPATH=path)
    assert done.returncode == 0, done.stderr
    assert "--methods leaves out horovod: Horovod is not installed" in done.stderr
    assert [r["name"] for r in _rows(out)] == dp.METHODS + bandwidth.KVSTORES + ["copyto"]


def test_default_methods_take_horovod_when_it_is_installed():
    from gluonperf.bench import allreduce, shared
    methods = allreduce.methods_of(shared.namespace(allreduce.add_parser))
    assert methods == dp.METHODS + bandwidth.KVSTORES + ([bandwidth.HOROVOD] if horovod_launcher.available() else [])


def test_a_failed_horovod_job_is_told_by_its_ranks_error():
    lines = ["[1]<stderr>:python -m gluonperf.workers.allreduce: error: out of memory",
             "horovodrun: Horovod detected that one or more processes exited with non-zero status"]
    assert bandwidth._job_error(lines) == "python -m gluonperf.workers.allreduce: error: out of memory"
    assert bandwidth._job_error(lines[1:]) == lines[1]
    assert bandwidth._job_error(["[0]<stdout>:something"]) == "[0]<stdout>:something" and bandwidth._job_error([]) == "no output"
    with pytest.raises(UserError, match="at least 2 processes"):
        bandwidth.horovod_allreduce([mx.cpu(0)], [4096])

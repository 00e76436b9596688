"""gluonperf.training.data: the three data sets and the per-part, per-epoch-seeded loader."""
import gzip
import hashlib
import os
import struct
import time

import mxnet as mx
import numpy as np
import pytest

from gluonperf import UserError
from gluonperf.training import data


def write_idx(root, part, images, labels):
    """Write images (N,28,28) uint8 and labels (N,) as the standard gzipped IDX files."""
    with gzip.open(os.path.join(root, "%s-images-idx3-ubyte.gz" % part), "wb") as f:
        f.write(struct.pack(">IIII", 2051, len(images), 28, 28) + images.astype(np.uint8).tobytes())
    with gzip.open(os.path.join(root, "%s-labels-idx1-ubyte.gz" % part), "wb") as f:
        f.write(struct.pack(">II", 2049, len(labels)) + labels.astype(np.uint8).tobytes())


@pytest.fixture
def idx_dir(tmp_path):
    rng = np.random.RandomState(0)
    sets = {}
    for part, n in (("train", 12), ("t10k", 5)):
        images = rng.randint(0, 256, size=(n, 28, 28))
        labels = rng.randint(0, 10, size=n)
        write_idx(str(tmp_path), part, images, labels)
        sets[part] = images, labels
    return tmp_path, sets


def test_digits_are_28x28_in_unit_range_with_a_fixed_split():
    (xa, ya), (xb, yb) = data.digits()
    assert xa.shape == (898, 1, 28, 28) and xb.shape == (899, 1, 28, 28)
    assert xa.min() >= 0 and xa.max() <= 1 and xa.max() > 0.9
    assert set(ya) == set(range(10)) and set(yb) == set(range(10))
    (xc, _), _ = data.digits()
    assert np.array_equal(xa, xc)  # the split does not change between runs


def test_the_stratified_split_is_a_partition_with_each_class_in_its_share():
    labels = np.repeat(np.arange(4), [50, 30, 15, 5])
    train, test = data.stratified_split(labels, 0.2, seed=3)
    assert len(test) == 20 and sorted(np.concatenate([train, test])) == list(range(100))
    assert list(np.bincount(labels[test], minlength=4)) == [10, 6, 3, 1]
    assert len(set(labels[test[:6]])) > 1  # in random order, not class by class
    other, _ = data.stratified_split(labels, 0.2, seed=4)
    assert not np.array_equal(np.sort(train), np.sort(other))  # the seed chooses the samples


def test_load_gives_datasets_of_samples_and_honours_limit():
    train, test = data.load_dataset("digits", limit=100)
    assert len(train) == 100 and len(test) == 100
    x, y = train[0]
    assert x.shape == (1, 28, 28) and x.dtype == np.float32 and 0 <= int(y) < 10
    train, test = data.load_dataset("synthetic", limit=50)
    assert len(train) == 50 and train[0][0].shape == (1, 28, 28)
    with pytest.raises(UserError, match="--dataset cifar: no such file or folder; give a named set"):
        data.load_dataset("cifar")


def test_fashion_mnist_reads_a_local_copy_of_the_idx_files(idx_dir, monkeypatch):
    root, sets = idx_dir
    monkeypatch.setattr(data, "_online", lambda url: pytest.fail("must not try to download"))
    train, test = data.load_dataset("fashion-mnist", data_dir=str(root))
    assert len(train) == 12 and len(test) == 5
    x, y = train[3]
    assert x.shape == (1, 28, 28)
    assert np.allclose(x[0], sets["train"][0][3] / 255.0) and int(y) == sets["train"][1][3]


def test_official_files_go_through_mxnets_fashion_mnist_class(idx_dir, monkeypatch):
    """When the checksums match, MXNet's own FashionMNIST reads the files; here a
    subclass accepts the test files' checksums instead of the official ones."""
    root, sets = idx_dir
    sums = {name: hashlib.sha1(open(os.path.join(str(root), name), "rb").read()).hexdigest()
            for name in data.FASHION_FILES}
    monkeypatch.setattr(data, "FASHION_FILES", sums)
    used = []

    class TestFashion(mx.gluon.data.vision.FashionMNIST):
        def __init__(self, root, train=True):
            used.append(train)
            self._train = train
            self._train_data = ("train-images-idx3-ubyte.gz", sums["train-images-idx3-ubyte.gz"])
            self._train_label = ("train-labels-idx1-ubyte.gz", sums["train-labels-idx1-ubyte.gz"])
            self._test_data = ("t10k-images-idx3-ubyte.gz", sums["t10k-images-idx3-ubyte.gz"])
            self._test_label = ("t10k-labels-idx1-ubyte.gz", sums["t10k-labels-idx1-ubyte.gz"])
            self._namespace = "fashion-mnist"
            mx.gluon.data.dataset._DownloadedDataset.__init__(self, root, None)
    monkeypatch.setattr(mx.gluon.data.vision, "FashionMNIST", TestFashion)
    train, test = data.load_dataset("fashion-mnist", data_dir=str(root))
    assert used == [True, False]
    x, y = test[4]
    assert x.shape == (1, 28, 28) and np.allclose(x[0], sets["t10k"][0][4] / 255.0)
    assert int(y) == sets["t10k"][1][4]


def test_missing_fashion_mnist_offline_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "_online", lambda url: False)
    with pytest.raises(UserError) as e:
        data.load_dataset("fashion-mnist", data_dir=str(tmp_path / "none"))
    message = str(e.value)
    assert "\n" not in message and str(tmp_path / "none") in message
    assert "train-images-idx3-ubyte.gz" in message and "--dataset digits" in message
    assert message.count("train-images-idx3-ubyte.gz") == 1  # each file named once
    assert "--data-dir" not in message  # it was given


def test_offline_check_fails_fast():
    start = time.perf_counter()
    assert not data._online("https://127.0.0.1:9/", timeout=2)  # nothing listens on port 9
    assert time.perf_counter() - start < 5


def test_a_corrupt_idx_file_is_refused(idx_dir):
    root, _ = idx_dir
    with gzip.open(os.path.join(str(root), "train-labels-idx1-ubyte.gz"), "wb") as f:
        f.write(struct.pack(">II", 1234, 12) + bytes(12))
    with pytest.raises(UserError, match="not an IDX label file"):
        data.load_dataset("fashion-mnist", data_dir=str(root))


def test_a_truncated_gzip_file_is_refused_in_one_line(idx_dir):
    root, _ = idx_dir
    path = os.path.join(str(root), "t10k-images-idx3-ubyte.gz")
    blob = open(path, "rb").read()
    open(path, "wb").write(blob[:len(blob) // 2])
    with pytest.raises(UserError, match="cannot read .*t10k-images-idx3-ubyte.gz") as e:
        data.load_dataset("fashion-mnist", data_dir=str(root))
    assert "\n" not in str(e.value)


def test_parts_are_disjoint_equal_and_reshuffled_per_epoch():
    dataset = mx.gluon.data.ArrayDataset(np.arange(101, dtype=np.float32), np.arange(101))
    parts = [data.loader(dataset, 10, shuffle=True, part=data.Part(i, 3), last_batch="discard")
             for i in range(3)]
    seen = []
    for part in parts:
        part.sampler.set_epoch(0)
        batches = [x.asnumpy() for x, _ in part]
        assert len(batches) == len(parts[0]) == 3  # 33 samples each -> 3 full batches
        seen.extend(np.concatenate(batches).tolist())
    assert len(seen) == len(set(seen))  # no sample in two parts
    one = parts[0]
    one.sampler.set_epoch(1)
    epoch1 = np.concatenate([x.asnumpy() for x, _ in one])
    one.sampler.set_epoch(1)
    again = np.concatenate([x.asnumpy() for x, _ in one])
    one.sampler.set_epoch(2)
    epoch2 = np.concatenate([x.asnumpy() for x, _ in one])
    assert np.array_equal(epoch1, again) and not np.array_equal(epoch1, epoch2)


def test_loader_with_worker_threads_gives_the_same_batches():
    train, _ = data.load_dataset("digits", limit=64)
    plain = [(x.asnumpy(), y.asnumpy()) for x, y in data.loader(train, 16, shuffle=True, workers=0)]
    pooled = [(x.asnumpy(), y.asnumpy()) for x, y in data.loader(train, 16, shuffle=True, workers=2)]
    assert len(plain) == len(pooled) == 4  # 64 samples in batches of 16; zip() would stop at the shorter
    for (xa, ya), (xb, yb) in zip(plain, pooled):
        assert np.array_equal(xa, xb) and np.array_equal(ya, yb)


def test_the_download_host_is_checked_once_per_process(tmp_path, monkeypatch):
    """train and profile check before their work and again when they load: one connection."""
    calls = []
    monkeypatch.setattr(data, "_REACHABLE", set())
    monkeypatch.setattr(data, "_online", lambda url: calls.append(url) or True)
    for _ in range(2):
        assert sorted(data.check_available("fashion-mnist", str(tmp_path))) == sorted(data.FASHION_FILES)
    assert len(calls) == 1
    monkeypatch.setattr(data, "_REACHABLE", set())
    monkeypatch.setattr(data, "_online", lambda url: calls.append(url) or False)
    for _ in range(2):  # an unreachable host is asked again, and refused each time
        with pytest.raises(UserError, match="cannot be downloaded"):
            data.check_available("fashion-mnist", str(tmp_path))
    assert len(calls) == 3


# `import mxnet` without gluonperf: numpy's aliases put back first where numpy lacks them (Python 3.12),
# as a script under `profile --` gets them, so that MXNet 1.9.1 loads at all
MXNET_ALONE = ("import importlib.util\n"
               "spec = importlib.util.spec_from_file_location('aliases', 'gluonperf/runtime/numpy_aliases.py')\n"
               "aliases = importlib.util.module_from_spec(spec)\n"
               "spec.loader.exec_module(aliases)\n"
               "aliases.restore()\n"
               "import mxnet\n")


def test_mxnet_starts_without_scikit_learn_or_scipy_stats_yet_digits_still_loads(tmp_path):
    """gluonperf keeps MXNet's start-up imports of scikit-learn and scipy.stats out (together half
    of a command's start), and only those, and gives MXNet the standard library's distutils
    (setuptools' shim loads setuptools); the digits data set ships with gluonperf, and the
    intervals need no scipy.stats. gluonperf does not install scikit-learn: a stand-in on the
    path, which `import mxnet` alone does load, plays a user's own."""
    import subprocess
    import sys
    from helpers import ROOT, clean_env
    (tmp_path / "sklearn").mkdir()
    (tmp_path / "sklearn" / "__init__.py").write_text("")
    (tmp_path / "sklearn" / "base.py").write_text("class BaseEstimator:\n    pass\n")
    env = clean_env()
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path)] + [p for p in [env.get("PYTHONPATH")] if p])
    alone = subprocess.run([sys.executable, "-c", MXNET_ALONE + "import sys\n"
                            "assert 'sklearn.base' in sys.modules and mxnet.model.BASE_ESTIMATOR is not object\n"
                            "print('ok')\n"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert alone.returncode == 0 and alone.stdout.strip() == "ok", alone.stderr  # the stand-in is what MXNet loads
    code = ("import sys, gluonperf, mxnet\n"
            "assert 'sklearn' not in sys.modules, sorted(m for m in sys.modules if m.startswith('sklearn'))[:3]\n"
            "assert 'scipy.stats' not in sys.modules\n"
            "import distutils, os\n"  # the standard library's where it has one, not setuptools' shim
            "assert sys.version_info >= (3, 12) or (os.path.dirname(distutils.__path__[0]) == os.path.dirname(os.__file__)"
            " and 'setuptools' not in sys.modules), (distutils.__path__, 'setuptools' in sys.modules)\n"
            "assert mxnet.model.BASE_ESTIMATOR is object and mxnet.test_utils.ss is None\n"
            "from mxnet.contrib import quantization\n"
            "assert quantization.stats is None\n"
            "from gluonperf.training import data\n"
            "(x, y), _ = data.digits()\n"
            "assert x.shape[1:] == (1, 28, 28), x.shape\n"
            "from gluonperf.measure.stats import ratio_interval\n"
            "assert ratio_interval([1.0, 1.1, 0.9]).high > 1\n"
            "assert 'sklearn' not in sys.modules and 'scipy.stats' not in sys.modules\n"
            "import scipy.stats\n"  # anyone's later import of it gives it to the MXNet modules that fell back
            "assert scipy.stats.norm.cdf(0) == 0.5 and quantization.stats is scipy.stats\n"
            "assert mxnet.test_utils.ss is scipy.stats\n"
            "import sklearn.base\n"  # a user's own import of it still works
            "print('ok')\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr


def test_mxnet_starts_without_scipy_sparse_and_loads_onnx_and_requests_on_first_use(tmp_path):
    """MXNet imports scipy.sparse (to convert SciPy's sparse matrices) at start-up, and onnx and
    requests for an export and a download: after `import gluonperf, mxnet` the first is not
    loaded and the others not yet run; an ONNX export and requests' own functions still work, as
    the same modules, and once a user imports scipy.sparse MXNet converts SciPy's matrices. `import
    mxnet` alone loads all three (the positive control)."""
    import subprocess
    import sys
    from helpers import ROOT, clean_env
    env = clean_env()
    loaded = ("import sys\n"
              "ran = lambda m: m in sys.modules and type(sys.modules[m]).__name__ == 'module'\n"
              "print(sorted(m for m in ('scipy.sparse', 'onnx', 'requests') if ran(m)))\n")
    alone = subprocess.run([sys.executable, "-c", MXNET_ALONE + loaded], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, env=env)
    assert alone.stdout.strip() == "['onnx', 'requests', 'scipy.sparse']", alone.stderr
    code = ("import gluonperf, mxnet as mx\n" + loaded +
            "assert 'urllib3' not in sys.modules and 'google.protobuf' not in sys.modules\n"
            "import onnx, requests\n"  # a later import of either is not a use
            "assert not ran('onnx') and not ran('requests')\n"
            "from mxnet.gluon import nn\n"
            "net = nn.HybridSequential()\n"
            "net.add(nn.Dense(3))\n"
            "net.initialize()\n"
            "net.hybridize()\n"
            "net(mx.nd.ones((1, 4)))\n"
            "net.export(r'%s')\n"
            "path = mx.onnx.export_model(r'%s-symbol.json', r'%s-0000.params', [(1, 4)], 'float32', r'%s.onnx')\n"
            "model = onnx.load(path)\n"
            "assert 'Gemm' in [n.op_type for n in model.graph.node], [n.op_type for n in model.graph.node]\n"
            "assert mx.gluon.utils.requests.get is requests.get and ran('requests')\n"
            "assert mx.nd.array([[1, 2]]).shape == (1, 2) and 'scipy.sparse' not in sys.modules\n"
            "import scipy.sparse\n"  # a user's own import of it: MXNet converts SciPy's matrices again
            "a = mx.nd.array(scipy.sparse.csr_matrix([[0, 1.0], [2.0, 0]]))\n"
            "assert a.stype == 'csr' and a.asscipy().toarray().tolist() == [[0, 1], [2, 0]]\n"
            "print('ok')\n") % ((str(tmp_path / "net"),) * 4)
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0 and p.stdout.split() == ["[]", "ok"], p.stdout + p.stderr

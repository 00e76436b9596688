"""Data sets for training: Fashion-MNIST, the UCI handwritten digits (offline), synthetic.

`load_dataset(name, ...)` returns `(train_set, test_set)`, gluon Datasets of `(x, y)` with
x a float32 array of shape (1, 28, 28) in [0, 1] and y an integer label.
`loader(...)` wraps one in a DataLoader over this worker's part of the data, with
a shuffle that is seeded per epoch (so a resumed run sees the same batches).
"""
import gzip
import os
import socket
import struct
from dataclasses import dataclass
from urllib.parse import urlparse

import mxnet as mx
import numpy as np
from mxnet import gluon

from .. import UserError
from ..config import DATASETS
from ..runtime.worker_temp import share_with_workers
from . import image_data
from .image_data import classes_of, digits_arrays, image_size, is_path
from .model_spec import as_spec
from .models import input_shape
from .sampler import PartSampler

CLASSES = 10

# The standard Fashion-MNIST file names and the SHA-1 sums MXNet's FashionMNIST checks.
FASHION_FILES = {
    "train-images-idx3-ubyte.gz": "0cf37b0d40ed5169c6b3aba31069a9770ac9043d",
    "train-labels-idx1-ubyte.gz": "236021d52f1e40852b06a4c3008d8de8aef1e40b",
    "t10k-images-idx3-ubyte.gz": "626ed6a7c06dd17c0eec72fa3be1740f146a2863",
    "t10k-labels-idx1-ubyte.gz": "17f9ab60e7257a1620f4ad76bbbaf857c3920701",
}
DEFAULT_DATA_DIR = os.path.join(mx.base.data_dir(), "datasets", "fashion-mnist")
ONLINE_TIMEOUT_S = 3.0


def _dataset(x, y):
    """numpy images and labels -> a gluon Dataset of (x, y) pairs."""
    return gluon.data.ArrayDataset(x if x.dtype == np.int32 else x.astype(np.float32), y.astype(np.int32))


# --- Fashion-MNIST ------------------------------------------------------------

def read_idx(images_gz, labels_gz):
    """Read a pair of gzipped IDX files -> (images float32 (N,1,28,28) in [0,1], labels int32)."""
    try:
        with gzip.open(labels_gz, "rb") as f:
            magic, n = struct.unpack(">II", f.read(8))
            labels = np.frombuffer(f.read(), dtype=np.uint8) if magic == 2049 else None
        with gzip.open(images_gz, "rb") as f:
            header = struct.unpack(">IIII", f.read(16))
            images = np.frombuffer(f.read(), dtype=np.uint8) if header[0] == 2051 else None
    except (OSError, EOFError, struct.error) as e:
        raise UserError("cannot read %s / %s (%s); replace them with the standard Fashion-MNIST files"
                        % (images_gz, labels_gz, e))
    if labels is None:
        raise UserError("%s is not an IDX label file (magic %d, expected 2049)" % (labels_gz, magic))
    if images is None:
        raise UserError("%s is not an IDX image file (magic %d, expected 2051)" % (images_gz, header[0]))
    _, m, rows, cols = header
    if len(labels) != n or m != n or images.size != n * rows * cols or (rows, cols) != (28, 28):
        raise UserError("%s and %s do not hold matching 28x28 images and labels" % (images_gz, labels_gz))
    return images.reshape(n, 1, rows, cols).astype(np.float32) / 255.0, labels.astype(np.int32)


_REACHABLE = set()  # download hosts this process has reached


def _online(url, timeout=ONLINE_TIMEOUT_S):
    """Can we open a TCP connection to the download host within `timeout` seconds?"""
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname, parsed.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def _missing_fashion(root):
    return [name for name in FASHION_FILES if not os.path.isfile(os.path.join(root, name))]


def _official(root):
    from mxnet.gluon.utils import check_sha1
    return all(check_sha1(os.path.join(root, name), sha1) for name, sha1 in FASHION_FILES.items())


def check_available(name, data_dir=None, model=None, loader_kind="dataloader"):
    """UserError now (before a command starts its work) if data set `name` cannot be
    loaded: Fashion-MNIST's files absent from `data_dir` and no network to fetch them.
    Returns the Fashion-MNIST files still to download (none for the other data sets).
    A path (not a named set) is checked as image data for `model` (gluonperf.training.image_data)."""
    if is_path(name):
        image_data.check(name, model, loader_kind)
        return []
    if name != "synthetic" and own_input(model):
        spec = as_spec(model)
        if spec.input_dtype != "float32" or tuple(input_shape(spec)) != (1, 28, 28):
            raise UserError("--dataset %s holds 1x28x28 images; --model %s takes another input: use --dataset "
                            "synthetic (samples of its own shape) or an image folder" % (name, spec.label))
    if name != "fashion-mnist":
        return []
    root = os.path.expanduser(data_dir or DEFAULT_DATA_DIR)
    missing = _missing_fashion(root)
    if missing:
        from mxnet.gluon.utils import _get_repo_url
        url = _get_repo_url()
        if url not in _REACHABLE and not _online(url):
            where = "put them there" if data_dir else "put them there or pass --data-dir DIR where they are"
            raise UserError("%s lacks the Fashion-MNIST file(s) %s, and they cannot be downloaded (offline); %s, "
                            "or use --dataset digits, which works offline" % (root, ", ".join(missing), where))
        _REACHABLE.add(url)  # a command checks before its work and again when it loads: connect once
    return missing


def fashion_mnist(data_dir=None):
    """Fashion-MNIST arrays ((x_train, y_train), (x_test, y_test)) from `data_dir`: MXNet's FashionMNIST reads (and, when the files are
    absent and the machine is online, downloads) the official files; a copy whose
    checksums differ from the official ones is read directly from its IDX files."""
    root = os.path.expanduser(data_dir or DEFAULT_DATA_DIR)
    missing = check_available("fashion-mnist", data_dir)
    if missing or _official(root):
        sets = []
        for train in (True, False):
            ds = gluon.data.vision.FashionMNIST(root=root, train=train)
            x = ds._data.asnumpy().transpose(0, 3, 1, 2).astype(np.float32) / 255.0
            sets.append((x, np.asarray(ds._label)))
        return tuple(sets)
    return tuple(read_idx(os.path.join(root, "%s-images-idx3-ubyte.gz" % part),
                           os.path.join(root, "%s-labels-idx1-ubyte.gz" % part))
                 for part in ("train", "t10k"))


# --- digits and synthetic -----------------------------------------------------

def stratified_split(labels, test_fraction, seed):
    """(train indices, test indices), each in random order: ceil(test_fraction * n) test
    samples, every class in (nearly) its share of them."""
    rng = np.random.RandomState(seed)
    order = rng.permutation(len(labels))
    place = np.empty(len(labels))  # a sample's place within its class, in (0, 1)
    for c in np.unique(labels):
        members = order[labels[order] == c]
        place[members] = (np.arange(len(members)) + 0.5) / len(members)
    ranked = order[np.argsort(place[order], kind="stable")]
    n_test = int(np.ceil(test_fraction * len(labels)))
    return rng.permutation(ranked[n_test:]), rng.permutation(ranked[:n_test])


# Half of digits' 1,797 samples are held out: `infer --calib-data digits` judges a lower precision
# against 99% of fp32's accuracy on them (MLPerf's rule) with a 95% interval, which needs about
# 430 held-out samples even when no answer changes; a fifth (360) could never clear it.
DIGITS_TEST_FRACTION = 0.5


def digits(seed=0, test_fraction=DIGITS_TEST_FRACTION):
    """The UCI 8x8 handwritten digits (values 0..16), bilinearly resized to 28x28 in [0, 1],
    split into train (898) and test (899) sets once with a fixed seed (stratified)."""
    images, labels = digits_arrays()
    small = mx.nd.array(images.reshape(-1, 1, 8, 8) / 16.0)
    x = mx.nd.contrib.BilinearResize2D(small, height=28, width=28).asnumpy().clip(0, 1)
    train, test = stratified_split(labels, test_fraction, seed)
    return (x[train], labels[train]), (x[test], labels[test])


def synthetic(train_size=6000, test_size=1000, seed=0, noise=0.5):
    """Learnable images shaped like Fashion-MNIST (1x28x28 in [0, 1], 10 classes).

    Each class has a fixed pattern of four blurred blobs; a sample is its class pattern
    at a random brightness, shifted by up to 2 pixels, plus Gaussian noise. A model
    starts at chance and has to learn, so accuracy means something; for throughput
    runs and for the from-scratch chapter (`bench scratch`)."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:28, 0:28]
    templates = []
    for _ in range(CLASSES):
        t = np.zeros((28, 28))
        for _ in range(4):
            cy, cx = rng.uniform(5, 23, size=2)
            sy, sx = rng.uniform(1.5, 5, size=2)
            t += np.exp(-((yy - cy) ** 2 / (2 * sy ** 2) + (xx - cx) ** 2 / (2 * sx ** 2)))
        templates.append(t / t.max())
    templates = np.stack(templates)

    def draw(n):
        y = rng.randint(0, CLASSES, size=n)
        x = templates[y] * rng.uniform(0.5, 1.0, size=(n, 1, 1))
        shifts = rng.randint(-2, 3, size=(n, 2))
        x = np.stack([np.roll(img, tuple(sh), axis=(0, 1)) for img, sh in zip(x, shifts)])
        x = np.clip(x + rng.normal(scale=noise, size=x.shape), 0, 1)
        return x[:, None].astype(np.float32), y
    return draw(train_size), draw(test_size)


def synthetic_like(model, train_size=6000, test_size=1000, seed=0, noise=0.5):
    """Learnable synthetic samples of what `model` (a spec with its own input) takes, 10 classes:
    for float inputs each class a fixed random pattern of the input's shape at a random
    brightness plus noise, in [0, 1]; for token ids each class draws most of its ids from its
    own tenth of the vocabulary."""
    spec = as_spec(model)
    shape = input_shape(spec)
    rng = np.random.RandomState(seed)
    if spec.input_dtype == "int32":
        band = max(1, spec.vocab // CLASSES)

        def draw(n):
            y = rng.randint(0, CLASSES, size=n)
            own = (y.reshape((n,) + (1,) * len(shape)) * band + rng.randint(0, band, size=(n,) + shape)) % spec.vocab
            x = np.where(rng.uniform(size=(n,) + shape) < 0.7, own, rng.randint(0, spec.vocab, size=(n,) + shape))
            return x.astype(np.int32), y
    else:
        templates = rng.uniform(size=(CLASSES,) + shape)

        def draw(n):
            y = rng.randint(0, CLASSES, size=n)
            x = templates[y] * rng.uniform(0.5, 1.0, size=(n,) + (1,) * len(shape))
            return np.clip(x + rng.normal(scale=noise, size=x.shape), 0, 1).astype(np.float32), y
    return draw(train_size), draw(test_size)


def own_input(model):
    """True when `model` is a spec that says what it takes (its input is not a 28x28 image)."""
    spec = as_spec(model) if model else None
    return bool(spec and (spec.input_shape or spec.input_dtype != "float32"))


def load_dataset(name, data_dir=None, limit=None, seed=0, model=None, bad_images="stop", loader_kind="dataloader"):
    """(train_set, test_set) of `name`; with `limit`, the first `limit` samples of each.
    A path instead of a name: images of a folder or a .rec at `model`'s input size
    (gluonperf.training.image_data), loaded by `loader_kind`, corrupt images stopping or skipped."""
    if is_path(name):
        return image_data.load_images(name, model or "resnet18_v1", limit, bad_images, loader_kind)
    if name == "fashion-mnist":
        arrays = fashion_mnist(data_dir)
    elif name == "digits":
        arrays = digits()
    elif name == "synthetic":
        arrays = synthetic_like(model, seed=seed) if own_input(model) else synthetic(seed=seed)
    else:
        raise UserError("unknown dataset %r; choose one of %s" % (name, ", ".join(DATASETS)))
    return tuple(_dataset(x[:limit], y[:limit]) for x, y in arrays)


def load_for(config):
    """(train_set, test_set) of a training configuration (TrainConfig)."""
    return load_dataset(config.dataset, config.data_dir, config.limit, config.seed, model=config.model,
                bad_images=config.bad_images, loader_kind=config.loader)


def classes(name):
    """How many classes data set `name` has (10 for the named sets; counted for a path)."""
    return classes_of(name) if is_path(name) else CLASSES


def sample_shape(name, model):
    """The shape of one sample of data set `name` as `model` gets it: 1x28x28 for the named
    sets, 3xSxS for images at the model's input size S."""
    if is_path(name):
        size = image_size(model)
        return (3, size, size)
    if own_input(model) and name == "synthetic":
            return tuple(input_shape(model))
    return (1, 28, 28)


# --- loading in batches ------------------------------------------------------

@dataclass(frozen=True)
class Part:
    """The part of a data set one worker reads: part `index` of `count` equal parts (a dist
    worker's: its rank among the workers)."""
    index: int = 0
    count: int = 1


def loader(dataset, batch_size, shuffle, workers=0, part=Part(), last_batch="keep", seed=0, thread_pool=True):
    """A DataLoader over `part` (a `Part`) of `dataset`.

    Every part yields the same number of batches. With `shuffle` the order is
    reshuffled per epoch: call `loader.sampler.set_epoch(epoch)` first (the
    order then depends only on `seed` and the epoch). `workers` > 0 loads batches
    in a pool (threads by default, processes with thread_pool=False).
    """
    if hasattr(dataset, "make_loader"):  # image data: worker processes, or MXNet's ImageRecordIter
        return dataset.make_loader(batch_size, shuffle, workers, part.count, part.index, last_batch, seed)
    sampler = PartSampler(len(dataset), part.count, part.index, shuffle, seed)
    batches = gluon.data.BatchSampler(sampler, batch_size, last_batch)
    if workers and not thread_pool:
        share_with_workers()  # the workers leave no pymp-* folder behind (runtime.worker_temp)
    out = gluon.data.DataLoader(dataset, batch_sampler=batches, num_workers=workers,
                                thread_pool=thread_pool)
    out.sampler = sampler
    return out

"""The samples a precision rung is calibrated and judged on (`--calib-data`).

`load` draws `count` of them in a seeded random order, shaped to the model's input: `digits`
(the 899 of the digits' test split, which `train --dataset digits` never trained on), an
image folder or a `.rec` file (GluonCV's evaluation transforms:
`gluonperf.training.image_data.eval_transform`), or, for None, random samples of the model's
input (calibration works, accuracy is not measured). `split` takes the first ones for
calibration and keeps the rest held out, so the two never share a sample.
docs/precision_ladder.md ("Calibration and held-out samples") says how each source is read.
"""
import os
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from .. import UserError

RANDOM = "the model's own input"
RANDOM_NOTE = "random samples of the model's input: accuracy not measured"
DIGITS_SHAPE = (1, 28, 28)


@dataclass(frozen=True)
class Samples:
    """Samples of the model's input, with their labels when the data has them."""
    data: np.ndarray                    # (n,) + input_shape, float32
    labels: Optional[np.ndarray]        # (n,) ints, or None when the data has no labels
    source: str                         # "digits", a folder, a .rec path, or "the model's own input"
    note: Optional[str] = None          # e.g. "random samples of the model's input: accuracy not measured"

    def __len__(self):
        return len(self.data)


def load(what, input_shape, count, seed=0):
    """`what`: "digits", an image folder (class subfolders), a .rec file, or None (random samples
    of the model's input). ValueError, one line, for data of the wrong shape or a missing path.
    `count` samples in a random order seeded by `seed`, or all there are when fewer (digits' test
    split holds 899)."""
    shape = tuple(int(n) for n in input_shape)
    if count < 1:
        raise ValueError("count %d: ask for at least one sample" % count)
    rng = np.random.RandomState(seed)
    if what is None:
        data = rng.uniform(size=(count,) + shape).astype(np.float32)
        return Samples(data, None, RANDOM, RANDOM_NOTE)
    what = str(what)
    if what == "digits":
        data, labels = _digits(shape)
        order = rng.permutation(len(data))[:count]
        return Samples(data[order], labels[order], "digits")
    path = check_source(what)
    size = _image_size(what, shape)
    data, labels = (_folder if os.path.isdir(path) else _rec)(path, size, count, rng)
    return Samples(data, labels, what)


def check_source(what):
    """The path of `what` (a folder or a .rec; None for digits and for none), checked before any
    model is loaded: ValueError, one line, for a missing path or a file that is not a .rec."""
    if what is None or str(what) == "digits":
        return None
    path = os.path.expanduser(str(what))
    if not os.path.exists(path):
        raise ValueError("--calib-data %s: no such file or folder; give digits, a folder of class subfolders, "
                         "or a .rec file with its .idx" % what)
    if not (os.path.isdir(path) or path.endswith(".rec")):
        raise ValueError("--calib-data %s is a file but not a .rec; give a .rec (with its .idx beside it) or a "
                         "folder of class subfolders" % what)
    return path


def split(samples, calibration_count):
    """(calibration, held-out): the first `calibration_count` samples and the rest, never
    overlapping (`load` shuffled them already)."""
    n = len(samples.data)
    if not 0 < calibration_count < n:
        raise ValueError("calibration_count %d: give between 1 and %d, so that some of the %d samples are "
                         "held out" % (calibration_count, n - 1, n))

    def part(index):
        return replace(samples, data=samples.data[index],
                       labels=None if samples.labels is None else samples.labels[index])
    return part(slice(0, calibration_count)), part(slice(calibration_count, n))


def _digits(shape):
    """The digits test split (images, labels), shaped to `shape`."""
    import mxnet as mx
    from ..training.data import digits
    _, (x, y) = digits()
    n = len(x)
    if shape == DIGITS_SHAPE:
        return x.astype(np.float32), y
    if int(np.prod(shape)) == x[0].size:
        return x.reshape((n,) + shape).astype(np.float32), y
    if len(shape) == 3 and shape[0] in (1, 3):
        resized = mx.nd.contrib.BilinearResize2D(mx.nd.array(x), height=shape[1], width=shape[2]).asnumpy()
        return np.repeat(resized.clip(0, 1), shape[0], axis=1).astype(np.float32), y
    raise ValueError("--calib-data digits holds 28x28 grey images and the model takes %s; give samples of its "
                     "input (an image folder, a .rec) or none" % "x".join(map(str, shape)))


def _image_size(what, shape):
    if len(shape) != 3 or shape[0] != 3 or shape[1] != shape[2]:
        raise ValueError("--calib-data %s holds colour images, given to the model as 3xSxS; it takes %s: give "
                         "digits or samples of its own input" % (what, "x".join(map(str, shape))))
    return shape[1]


def _checked(call, *args):
    """gluonperf.training.image_data's checks, which speak of --dataset, for --calib-data."""
    try:
        return call(*args)
    except UserError as e:
        raise ValueError(str(e).replace("--dataset", "--calib-data")) from None


def _transformed(raw_images, size):
    """Decoded and evaluation-transformed images (n, 3, size, size) float32 from their bytes."""
    import mxnet as mx
    from ..training.image_data import eval_transform
    transform = eval_transform(size)
    out = []
    for name, raw in raw_images:
        try:
            out.append(transform(mx.image.imdecode(raw, flag=1)).asnumpy())
        except mx.base.MXNetError as e:
            from .. import error_line
            raise ValueError("--calib-data: corrupt image %s (%s); remove it" % (name, error_line(e))) from None
    return np.stack(out).astype(np.float32)


def _folder(path, size, count, rng):
    import mxnet as mx
    from ..training.image_data import source
    found = _checked(source, path)
    root = found["val"] or found["train"]
    items = mx.gluon.data.vision.ImageFolderDataset(root).items
    chosen = [items[i] for i in rng.permutation(len(items))[:count]]

    def raw():
        for file, _ in chosen:
            with open(file, "rb") as f:
                yield file, f.read()
    return _transformed(raw(), size), np.array([label for _, label in chosen], dtype=np.int64)


def _rec(path, size, count, rng):
    import mxnet as mx
    from ..training.image_data import rec_keys, source
    found = _checked(source, path)
    keys = _checked(rec_keys, found["idx"])
    chosen = [keys[i] for i in rng.permutation(len(keys))[:count]]
    record = mx.recordio.MXIndexedRecordIO(found["idx"], found["train"], "r")
    labels, raw = [], []
    try:
        for key in chosen:
            header, image = mx.recordio.unpack(record.read_idx(key))
            label = header.label
            labels.append(int(label if np.isscalar(label) else np.asarray(label).ravel()[0]))
            raw.append(("record %d of %s" % (key, path), image))
    finally:
        record.close()
    return _transformed(raw, size), np.array(labels, dtype=np.int64)

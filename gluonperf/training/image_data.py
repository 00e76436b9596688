"""Real image data: a folder of JPEGs with one subfolder per class, or a RecordIO file.

What `--dataset PATH` names (`source`): a folder `DIR/CLASS/IMAGE.jpg`, one with `train/` and
`val/` of that layout, or a `.rec` with its `.idx`. `load_images` gives its (train, test)
`ImageSet`s, with GluonCV's ImageNet transforms at the model's input size, read through a
DataLoader or MXNet's `ImageRecordIter` (`RecordIterLoader`); `check` refuses what it cannot
load before a command's work; `make_folder` and `pack_rec` make such a set offline
(`python -m gluonperf.dataset`). Bad data is a UserError naming the file.
Plain functions; nothing prints. The layouts, transforms, held-out tenth, bad data and the slow
loader for tests (GLUONPERF_LOADER_DELAY_S): docs/input.md.
"""
import multiprocessing
import os
import struct
import time

import mxnet as mx
import numpy as np
from mxnet import gluon

from .. import UserError
from ..runtime.wire import LOADER_DELAY
from ..runtime.worker_temp import share_with_workers
from .sampler import PartSampler

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")   # those ImageFolderDataset reads
MEAN = (0.485, 0.456, 0.406)                   # ImageNet's, as GluonCV normalises
STD = (0.229, 0.224, 0.225)
EVAL_CROP = 0.875                              # GluonCV: resize to 224/0.875 = 256, centre crop 224
HOLD_OUT = 10                                  # every 10th image is held out when there is no val set
LOADERS = ("dataloader", "recorditer")
BAD_IMAGES = ("stop", "skip")
DELAY_VARIABLE = LOADER_DELAY
_IR_FORMAT = "IfQQ"                            # RecordIO's image header: flag, label, id, id2
_IR_SIZE = struct.calcsize(_IR_FORMAT)


# --- where the data is ------------------------------------------------------------------

def _class_folders(root):
    return sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))


def _images_in(folder):
    return sum(1 for f in os.listdir(folder) if f.lower().endswith(IMAGE_EXTENSIONS))


def check_folder(root):
    """UserError unless `root` holds one subfolder per class with images in them."""
    entries = os.listdir(root)
    if not entries:
        raise UserError("--dataset %s is an empty folder; it should hold one subfolder per class with the images in "
                        "it (%s/CLASS/IMAGE.jpg), e.g. python -m gluonperf.dataset make %s" % (root, root, root))
    classes = _class_folders(root)
    if not classes:
        raise UserError("--dataset %s has no class subfolders (%d file(s) directly in it); put each class's images "
                        "in a subfolder of its own: %s/CLASS/IMAGE.jpg" % (root, len(entries), root))
    if not any(_images_in(os.path.join(root, c)) for c in classes):
        raise UserError("--dataset %s: its %d class subfolder(s) hold no images (%s)"
                        % (root, len(classes), ", ".join(IMAGE_EXTENSIONS)))
    return classes


def source(path):
    """What `--dataset PATH` names: {'kind': 'folder', 'train': DIR, 'val': DIR or None} or
    {'kind': 'rec', 'train': REC, 'idx': IDX, 'val': (REC, IDX) or None}. UserError if it
    is neither, naming what is wrong."""
    path = os.path.expanduser(path)
    if not os.path.exists(path):
        raise UserError("--dataset %s: no such file or folder; give a named set (fashion-mnist, digits, synthetic), a "
                        "folder of class subfolders, or a .rec file with its .idx" % path)
    if os.path.isdir(path):
        train, val = os.path.join(path, "train"), os.path.join(path, "val")
        if os.path.isdir(train) and _class_folders(train):  # ImageNet's layout: train/ and val/
            check_folder(train)
            return {"kind": "folder", "train": train, "val": val if os.path.isdir(val) and _class_folders(val)
                    else None}
        check_folder(path)
        return {"kind": "folder", "train": path, "val": None}
    if not path.endswith(".rec"):
        raise UserError("--dataset %s is a file but not a .rec; give a .rec file (with its .idx beside it) or a "
                        "folder of class subfolders" % path)
    idx = path[:-len(".rec")] + ".idx"
    if not os.path.isfile(idx):
        raise UserError("--dataset %s has no index beside it (%s); write both with im2rec, or with python -m "
                        "gluonperf.dataset make DIR --rec" % (path, idx))
    val = None
    if os.path.basename(path) == "train.rec":  # GluonCV's --rec-train / --rec-val pair
        vrec = os.path.join(os.path.dirname(path), "val.rec")
        if os.path.isfile(vrec) and os.path.isfile(vrec[:-4] + ".idx"):
            val = (vrec, vrec[:-4] + ".idx")
    return {"kind": "rec", "train": path, "idx": idx, "val": val}


def is_path(name):
    """Whether a --dataset value names a path (anything that is not a named set)."""
    from ..config import DATASETS
    return name not in DATASETS


def _read_index(idx):
    """The record offsets of an .idx file, in key order."""
    keys = []
    with open(idx) as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    key, offset = line.split("\t")[:2]
                    keys.append((int(key), int(offset)))
                except ValueError:
                    raise UserError("%s line %d is not 'key<TAB>offset': not an index of a .rec" % (idx, number))
    if not keys:
        raise UserError("%s is empty: its .rec holds no images" % idx)
    return sorted(keys)


def rec_labels(rec, idx):
    """Every record's label, read from its header alone (a seek and 32 bytes per record)."""
    labels = []
    with open(rec, "rb") as f:
        for key, offset in _read_index(idx):
            f.seek(offset + 8)  # past RecordIO's magic and length
            head = f.read(_IR_SIZE)
            if len(head) < _IR_SIZE:
                raise UserError("%s: record %d (offset %d) is cut short; the file is truncated" % (rec, key, offset))
            flag, label, _, _ = struct.unpack(_IR_FORMAT, head)
            if flag > 0:  # a label array follows the header: the first value is the class
                label = struct.unpack("f", f.read(4))[0]
            labels.append(int(label))
    return labels


# --- samples ------------------------------------------------------------------------------

def train_transform(size):
    """GluonCV's ImageNet training transforms at `size`: RandomResizedCrop, flip, ToTensor, normalise."""
    from mxnet.gluon.data.vision import transforms as T
    return T.Compose([T.RandomResizedCrop(size), T.RandomFlipLeftRight(), T.ToTensor(), T.Normalize(MEAN, STD)])


def eval_transform(size):
    """GluonCV's evaluation transforms: resize the short side to size/0.875, centre crop, ToTensor, normalise."""
    from mxnet.gluon.data.vision import transforms as T
    return T.Compose([T.Resize(int(round(size / EVAL_CROP)), keep_ratio=True), T.CenterCrop(size), T.ToTensor(),
                      T.Normalize(MEAN, STD)])


class ImageSet(gluon.data.Dataset):
    """Samples (image CHW float32, label) of a folder or a .rec, read, decoded and augmented
    when asked for (in DataLoader workers). Each stage is a method, so `bench input` can time
    them apart: `read` (the file's bytes), `decode`, `augment`.

    A corrupt image stops the loader with a UserError naming it (bad_images='stop'), or is
    replaced by the next good one and counted in `skipped` (shared with worker processes)."""

    def __init__(self, spec, items, labels, size, train, bad_images="stop", classes=None, loader="dataloader"):
        if bad_images not in BAD_IMAGES:
            raise UserError("--bad-images %r: choose stop or skip" % bad_images)
        self.spec, self.items, self.labels = spec, list(items), list(labels)
        self.size, self.train, self.bad_images, self.classes, self.loader_kind = size, train, bad_images, classes, loader
        self.transform = train_transform(size) if train else eval_transform(size)
        self.skipped = multiprocessing.Value("i", 0)  # shared memory: counted in forked workers too
        self._record = None
        self._delay = float(os.environ.get(DELAY_VARIABLE, "0") or 0)

    def __len__(self):
        return len(self.items)

    def name(self, i):
        """The file (or 'record K of FILE.rec') of sample i."""
        item = self.items[i]
        return item if isinstance(item, str) else "record %d of %s" % (item, self.spec["train_file"])

    def read(self, i):
        item = self.items[i]
        if isinstance(item, str):
            with open(item, "rb") as f:
                return f.read()
        if self._record is None or self._record.pid != os.getpid():  # a forked worker opens its own
            self._record = mx.recordio.MXIndexedRecordIO(self.spec["idx_file"], self.spec["train_file"], "r")
        _, img = mx.recordio.unpack(self._record.read_idx(item))
        return img

    @staticmethod
    def decode(raw):
        return mx.image.imdecode(raw, flag=1)  # HWC uint8, RGB

    def augment(self, image):
        return self.transform(image)

    def _sample(self, i):
        try:
            image = self.decode(self.read(i))
            image.wait_to_read()
        except mx.base.MXNetError as e:
            raise _Corrupt(self.name(i), e)
        return image

    def __getitem__(self, i):
        if self._delay:
            time.sleep(self._delay)
        for step in range(len(self.items)):
            j = (i + step) % len(self.items)
            try:
                image = self._sample(j)
                break
            except _Corrupt as bad:
                if self.bad_images == "stop":
                    raise UserError("corrupt image %s (%s); remove it, or pass --bad-images skip to skip and count "
                                    "such images" % (bad.name, bad.why)) from None
                with self.skipped.get_lock():
                    self.skipped.value += 1
        else:
            raise UserError("no image of --dataset %s could be decoded" % self.spec["path"])
        return self.augment(image), np.int32(self.labels[i])

    def make_loader(self, batch_size, shuffle, workers=0, num_parts=1, part_index=0, last_batch="keep", seed=0,
                    thread_pool=None):
        """The loader `gluonperf.training.data.loader` hands the training loop: a DataLoader with
        `workers` worker processes over this set (a PartSampler: seeded shuffle per epoch), or,
        for a .rec with loader 'recorditer' and the training set, MXNet's ImageRecordIter."""
        if self.loader_kind == "recorditer" and self.train and self.spec["kind"] == "rec":
            return RecordIterLoader(self, batch_size, workers, num_parts, part_index, seed)
        sampler = PartSampler(len(self), num_parts, part_index, shuffle, seed)
        batches = gluon.data.BatchSampler(sampler, batch_size, last_batch)
        if workers and not thread_pool:
            share_with_workers()  # the workers leave no pymp-* folder behind (runtime.worker_temp)
        return WorkerLoader(gluon.data.DataLoader(self, batch_sampler=batches, num_workers=workers,
                                                  thread_pool=bool(thread_pool), timeout=WORKER_TIMEOUT_S), sampler)


WORKER_TIMEOUT_S = 120  # MXNet's default: a worker that gives no batch for this long is taken for dead


class WorkerLoader:
    """A DataLoader whose worker timeout (a worker killed, e.g. by the kernel's OOM killer, never
    answers) is a UserError, one line, instead of multiprocessing's TimeoutError and a traceback."""

    def __init__(self, loader, sampler):
        self.loader, self.sampler = loader, sampler

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        it = iter(self.loader)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                return
            except multiprocessing.TimeoutError:
                raise UserError("a DataLoader worker gave no batch in %d s: it died (out of memory?) or one image "
                                "takes that long; use fewer --workers or smaller images" % WORKER_TIMEOUT_S) from None
            yield batch


class _Corrupt(Exception):
    def __init__(self, name, error):
        super().__init__(name)
        from .. import error_line
        self.name, self.why = name, error_line(error)


class RecordIterLoader:
    """MXNet's ImageRecordIter (C++ threads decode and augment: `preprocess_threads`) as a
    loader of (x, y) batches: GluonCV's --use-rec recipe (random resized crop, mirror,
    ImageNet mean and std), full batches only, as many per epoch as the DataLoader would give
    over the same set. It draws them from every record of the file."""

    def __init__(self, dataset, batch_size, workers, num_parts=1, part_index=0, seed=0):
        spec, size = dataset.spec, dataset.size
        self.threads = max(1, workers)
        self.batch_size = batch_size
        # an epoch is as long as the DataLoader's over this set (--limit, the held-out tenth), although
        # ImageRecordIter draws its batches from every record of its part of the file
        self.records = min(len(dataset), len(rec_keys(spec["idx_file"]))) // num_parts
        self.file = spec["train_file"]
        self.iter = self._guarded(
            mx.io.ImageRecordIter,
            path_imgrec=spec["train_file"], path_imgidx=spec["idx_file"], data_shape=(3, size, size),
            batch_size=batch_size, shuffle=True, seed=seed, num_parts=num_parts, part_index=part_index,
            random_resized_crop=True, min_random_area=0.08, max_random_area=1.0, min_aspect_ratio=3 / 4.0,
            max_aspect_ratio=4 / 3.0, rand_mirror=True, mean_r=255 * MEAN[0], mean_g=255 * MEAN[1],
            mean_b=255 * MEAN[2], std_r=255 * STD[0], std_g=255 * STD[1], std_b=255 * STD[2],
            preprocess_threads=self.threads, round_batch=False, verbose=False)
        self.sampler = self

    def _guarded(self, call, *args, **kwargs):
        """`call`, with MXNet's error (a record ImageRecordIter cannot decode) as one line naming the file."""
        try:
            return call(*args, **kwargs)
        except mx.base.MXNetError as e:
            from .. import error_line
            raise UserError("ImageRecordIter cannot read an image of %s (%s); it cannot skip bad images: use --loader "
                            "dataloader, which names the record (and skips it with --bad-images skip)"
                            % (self.file, error_line(e))) from None

    def set_epoch(self, epoch):
        pass  # ImageRecordIter reshuffles at every reset

    def __len__(self):
        return self.records // self.batch_size

    def __iter__(self):
        self._guarded(self.iter.reset)
        for _ in range(len(self)):
            try:
                batch = self._guarded(self.iter.next)
            except StopIteration:
                return
            yield batch.data[0], batch.label[0]


def rec_keys(idx):
    return [k for k, _ in _read_index(idx)]


# --- the two sets ---------------------------------------------------------------------------

def _folder_items(root):
    ds = gluon.data.vision.ImageFolderDataset(root)
    return [p for p, _ in ds.items], [l for _, l in ds.items], ds.synsets


def _held_out(n):
    """(training indices, held-out indices): every HOLD_OUT-th sample is held out (at least one)."""
    test = [i for i in range(n) if i % HOLD_OUT == HOLD_OUT - 1] or [n - 1]
    chosen = set(test)
    return [i for i in range(n) if i not in chosen] or list(range(n)), test


def image_size(model):
    """The side of the square images `model` takes (gluonperf.training.models.input_shape); UserError for the MLP."""
    from .model_spec import as_spec
    from .models import input_shape
    spec = as_spec(model)
    shape = input_shape(spec)
    if spec.input_dtype != "float32":
        raise UserError("--model takes token ids, not images; use --dataset synthetic")
    if len(shape) != 3:
        raise UserError("--model %s takes %s features, not images; choose an image model for --dataset PATH "
                        "(lenet, resnet18, or a GluonCV one such as resnet18_v1)" % (spec.text, "x".join(map(str, shape))))
    return shape[-1]


def check(path, model, loader="dataloader"):
    """UserError now, before a command's work, for data at `path` that `model` cannot train on
    with `loader`: what `load` would refuse, without listing every image."""
    if loader not in LOADERS:
        raise UserError("--loader %r: choose %s" % (loader, " or ".join(LOADERS)))
    spec = source(path)
    if model is not None:
        image_size(model)
    if loader == "recorditer" and spec["kind"] != "rec":
        raise UserError("--loader recorditer reads a .rec file; --dataset %s is a folder (pack it with python -m "
                        "gluonperf.dataset make DIR --rec, or use --loader dataloader)" % path)
    return spec


def load_images(path, model, limit=None, bad_images="stop", loader="dataloader"):
    """(train_set, test_set) of the data at `path` for `model` (its input size), each an
    ImageSet; `limit`: the first `limit` samples of each."""
    spec = check(path, model, loader)
    size = image_size(model)
    sets = []
    if spec["kind"] == "folder":
        items, labels, classes = _folder_items(spec["train"])
        common = dict(kind="folder", path=path)
        if spec["val"]:
            test = _folder_items(spec["val"])[:2]
            parts = [(items, labels), test]
        else:
            tr, te = _held_out(len(items))
            parts = [([items[i] for i in tr], [labels[i] for i in tr]), ([items[i] for i in te], [labels[i] for i in te])]
        n_classes = len(classes)
        for train, (it, lab) in zip((True, False), parts):
            sets.append(ImageSet(dict(common), it[:limit], lab[:limit], size, train, bad_images, n_classes, loader))
        return tuple(sets)
    keys, labels = rec_keys(spec["idx"]), rec_labels(spec["train"], spec["idx"])
    n_classes = max(labels) + 1
    if spec["val"]:
        vkeys, vlabels = rec_keys(spec["val"][1]), rec_labels(*spec["val"])
        parts = [(spec["train"], spec["idx"], keys, labels), spec["val"] + (vkeys, vlabels)]
    else:
        tr, te = _held_out(len(keys))
        parts = [(spec["train"], spec["idx"], [keys[i] for i in tr], [labels[i] for i in tr]),
                 (spec["train"], spec["idx"], [keys[i] for i in te], [labels[i] for i in te])]
    for train, (rec, idx, k, lab) in zip((True, False), parts):
        sets.append(ImageSet(dict(kind="rec", path=path, train_file=rec, idx_file=idx), k[:limit], lab[:limit],
                             size, train, bad_images, n_classes, loader))
    return tuple(sets)


def classes_of(path):
    """How many classes the data at `path` has (folder: class subfolders; .rec: the largest label + 1)."""
    spec = source(path)
    if spec["kind"] == "folder":
        return len(_class_folders(spec["train"]))
    return max(rec_labels(spec["train"], spec["idx"])) + 1


# --- making a data set offline ----------------------------------------------------------------

def digits_arrays():
    """The UCI handwritten digits as (images (1797, 8, 8), values 0..16; labels): the file
    scikit-learn's `load_digits` reads, shipped with gluonperf (training/digits.csv.gz, its
    source and licence in digits.NOTICE), so that installing gluonperf adds no scikit-learn,
    whose import MXNet 1.9.1 makes at start-up in every script of the user's that loads it."""
    table = np.loadtxt(os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.csv.gz"), delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def _digit_images(images_per_class, classes, seed):
    images, labels = digits_arrays()
    rng = np.random.RandomState(seed)
    out = []
    for c in range(classes):
        pool = np.flatnonzero(labels == c % 10)
        for k, i in enumerate(rng.choice(pool, images_per_class, replace=len(pool) < images_per_class)):
            gray = (images[i] / 16.0 * 255).astype(np.uint8)
            colour = np.stack([gray * w for w in rng.uniform(0.6, 1.0, size=3)], axis=-1).astype(np.uint8)
            out.append((c, k, colour))
    return out


def _synthetic_images(images_per_class, classes, seed):
    """Each class a colour and a stripe frequency, with noise: learnable, and JPEG-sized like a photo."""
    rng = np.random.RandomState(seed)
    yy, xx = np.mgrid[0:32, 0:32] / 32.0
    out = []
    for c in range(classes):
        colour = rng.uniform(0, 255, size=3)
        freq = 1 + c
        for k in range(images_per_class):
            pattern = 0.5 + 0.5 * np.sin(2 * np.pi * freq * (xx + yy * rng.uniform(0, 1)))
            img = pattern[..., None] * colour + rng.normal(scale=25, size=(32, 32, 3))
            out.append((c, k, np.clip(img, 0, 255).astype(np.uint8)))
    return out


def make_folder(directory, images_per_class=20, size=224, classes=10, kind="digits", seed=0, quality=90):
    """Write `classes` x `images_per_class` JPEGs of `size` x `size` into directory/CLASS/ (from
    the UCI handwritten digits or synthetic patterns, upscaled); returns the files written. The
    directory must be empty or absent."""
    import cv2
    if os.path.exists(directory) and (not os.path.isdir(directory) or os.listdir(directory)):
        raise UserError("%s already exists and is not an empty folder; give a new one" % directory)
    if kind == "digits" and classes > 10:
        raise UserError("--source digits has 10 classes; ask for at most 10 or use --source synthetic")
    images = (_digit_images if kind == "digits" else _synthetic_images)(images_per_class, classes, seed)
    written = []
    for c, k, img in images:
        folder = os.path.join(directory, "class%02d" % c)
        os.makedirs(folder, exist_ok=True)
        big = cv2.resize(img, (size, size), interpolation=cv2.INTER_CUBIC)
        path = os.path.join(folder, "%04d.jpg" % k)
        if not cv2.imwrite(path, big[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, quality]):  # cv2 writes BGR
            raise UserError("cannot write %s" % path)
        written.append(path)
    return written


def pack_rec(directory, prefix, quality=95):
    """Pack the folder `directory` (DIR/CLASS/IMAGE) into prefix.rec and prefix.idx as im2rec
    does (MXIndexedRecordIO, pack_img; label = the class's index in sorted order, the image
    re-encoded as JPEG); the list goes to prefix.lst. Returns (rec, idx, records)."""
    import cv2
    items, labels, _ = _folder_items(directory)
    rec, idx, lst = prefix + ".rec", prefix + ".idx", prefix + ".lst"
    writer = mx.recordio.MXIndexedRecordIO(idx, rec, "w")
    try:
        with open(lst, "w") as listing:
            for key, (path, label) in enumerate(zip(items, labels)):
                img = cv2.imread(path, cv2.IMREAD_COLOR)
                if img is None:
                    raise UserError("corrupt image %s: OpenCV cannot read it; remove it" % path)
                header = mx.recordio.IRHeader(0, float(label), key, 0)
                writer.write_idx(key, mx.recordio.pack_img(header, img, quality=quality, img_fmt=".jpg"))
                listing.write("%d\t%f\t%s\n" % (key, label, os.path.relpath(path, directory)))
    finally:
        writer.close()
    return rec, idx, len(items)

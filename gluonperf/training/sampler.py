"""The order in which a loader reads a data set: one part of it per worker, shuffled per epoch."""
import numpy as np
from mxnet import gluon


class PartSampler(gluon.data.Sampler):
    """Indices of part `part_index` of `num_parts` equal parts of a data set, shuffled
    with a seed that depends on the epoch (`set_epoch`), like PyTorch's DistributedSampler.

    Every part has the same length (the remainder is dropped), so that workers of a
    dist_sync job run the same number of batches."""

    def __init__(self, length, num_parts=1, part_index=0, shuffle=True, seed=0):
        if not 0 <= part_index < num_parts:
            raise ValueError("part_index %d is not in 0..%d" % (part_index, num_parts - 1))
        self.length, self.num_parts, self.part_index = length, num_parts, part_index
        self.shuffle, self.seed, self.epoch = shuffle, seed, 0
        self.part_length = length // num_parts

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        order = np.arange(self.length)
        if self.shuffle:
            np.random.RandomState((self.seed, self.epoch)).shuffle(order)
        part = order[self.part_index::self.num_parts][:self.part_length]
        return iter(part.tolist())

    def __len__(self):
        return self.part_length

"""strata.utils.data: datasets, samplers and the DataLoader with torch.utils.data's names and habits.

Python-only by design (the dataset protocol is Python's). Batches are collated into strata
tensors as torch's default_collate does (tensors and NumPy arrays stacked, Python ints/floats/bools
to int64/float64/bool tensors, tuples, lists, namedtuples and dicts collated element-wise, strings
kept as lists). Shuffling draws from a ``strata.Generator`` (or, without one, from a generator
seeded by the default generator, so ``strata.manual_seed`` fixes the order). With
``num_workers > 0`` background threads fetch and collate whole batches ahead of the consumer
(``prefetch_factor`` batches per worker); the batches still arrive in the sampler's order.
"""

from __future__ import annotations

import bisect
import collections
import math
import numbers
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import _C
from .._C import Tensor

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "ConcatDataset",
    "Subset",
    "random_split",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "SubsetRandomSampler",
    "BatchSampler",
    "DataLoader",
    "default_collate",
    "default_convert",
    "get_worker_info",
]


# ---- datasets -------------------------------------------------------------------------------------

class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index):
        raise NotImplementedError(f"Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other):
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is iterated (``__iter__``) rather than indexed."""

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")


class TensorDataset(Dataset):
    """Sample i is ``tuple(t[i] for t in tensors)``; every tensor has the same first dimension."""

    def __init__(self, *tensors):
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset: expected strata Tensors, got {type(t).__name__}")
        if not tensors or any(t.dim() == 0 for t in tensors):
            raise ValueError("TensorDataset needs at least one tensor, each with a first dimension")
        if any(t.shape[0] != tensors[0].shape[0] for t in tensors):
            raise ValueError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return self.tensors[0].shape[0]


class ConcatDataset(Dataset):
    """The datasets one after another."""

    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self):
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, index):
        if index < 0:
            if -index > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            index += len(self)
        which = bisect.bisect_right(self.cumulative_sizes, index)
        start = 0 if which == 0 else int(self.cumulative_sizes[which - 1])
        return self.datasets[which][index - start]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``."""

    def __init__(self, dataset, indices):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, index):
        if isinstance(index, list):
            return self.dataset[[self.indices[i] for i in index]]
        return self.dataset[self.indices[index]]

    def __len__(self):
        return len(self.indices)


def _check_generator(generator, op):
    if generator is not None and not isinstance(generator, _C.Generator):
        raise TypeError(f"{op}: generator must be a strata.Generator or None, got {type(generator).__name__}")


def _permutation(n, generator):
    """A permutation of range(n) drawn from ``generator`` (argsort of n uniform draws)."""
    if n == 0:
        return []
    return np.argsort(generator._uniform(n).numpy(), kind="stable").tolist()


def _seeded_generator():
    """A fresh generator seeded from the default generator (torch's RandomSampler habit)."""
    seed = int(_C.default_generator._uniform(1).numpy()[0] * 2.0 ** 53)
    return _C.Generator().manual_seed(seed)


def random_split(dataset, lengths, generator=None):
    """Splits ``dataset`` into non-overlapping Subsets of ``lengths`` (counts, or fractions summing
    to 1 whose remainders go round-robin to the first subsets, as PyTorch does)."""
    _check_generator(generator, "random_split")
    generator = generator if generator is not None else _C.default_generator
    lengths = list(lengths)
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1 and not all(isinstance(x, int) for x in lengths):
        counts = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            counts.append(int(math.floor(n * frac)))
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = _permutation(n, generator)
    out, start = [], 0
    for length in lengths:
        out.append(Subset(dataset, order[start:start + length]))
        start += length
    return out


# ---- samplers -------------------------------------------------------------------------------------

class Sampler:
    """Iterates over dataset indices (or lists of them, for a batch sampler)."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation at every iteration (or ``num_samples`` draws with replacement)."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={replacement}")
        _check_generator(generator, "RandomSampler")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self):
        n = len(self.data_source)
        generator = self.generator if self.generator is not None else _seeded_generator()
        if self.replacement:
            draws = generator._uniform(self.num_samples).numpy()
            yield from np.minimum((draws * n).astype(np.int64), n - 1).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from _permutation(n, generator)
        yield from _permutation(n, generator)[: self.num_samples % n]

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order."""

    def __init__(self, indices, generator=None):
        _check_generator(generator, "SubsetRandomSampler")
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        generator = self.generator if self.generator is not None else _seeded_generator()
        for i in _permutation(len(self.indices), generator):
            yield self.indices[i]

    def __len__(self):
        return len(self.indices)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler, batch_size, drop_last):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self):
        batch = []
        for index in self.sampler:
            batch.append(index)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size


# ---- collation ------------------------------------------------------------------------------------

def _stack(tensors):
    first = tensors[0]
    for t in tensors:
        if tuple(t.shape) != tuple(first.shape):
            raise RuntimeError(f"stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 "
                               f"and {list(t.shape)} at another entry")
    return _C.cat([t.reshape((1,) + tuple(t.shape)) for t in tensors], 0)


def default_convert(data):
    """NumPy arrays (and those inside containers) to tensors; everything else as it is."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "USO":
        return _C.tensor(data)
    if isinstance(data, Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()}) if not isinstance(
            data, collections.defaultdict) else {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, (list, tuple)):
        return type(data)(default_convert(d) for d in data)
    return data


def default_collate(batch):
    """Collates a list of samples into a batch (torch.utils.data.default_collate's rules)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack(list(batch))
    if isinstance(elem, (np.ndarray, np.generic)) and np.asarray(elem).dtype.kind not in "USO":
        return _stack([_C.tensor(np.asarray(b)) for b in batch])
    if isinstance(elem, bool):
        return _C.tensor(list(batch), dtype=_C.bool)
    if isinstance(elem, numbers.Integral):
        return _C.tensor(list(batch), dtype=_C.int64)
    if isinstance(elem, float):
        return _C.tensor(list(batch), dtype=_C.float64)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, Mapping):
        return {key: default_collate([d[key] for d in batch]) for key in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        # A list even for tuple samples, as PyTorch ("backwards compatibility").
        return [default_collate(list(samples)) for samples in zip(*batch)]
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found "
                    f"{type(elem)}")


# ---- DataLoader -----------------------------------------------------------------------------------

_worker_info = threading.local()


class _WorkerInfo:
    def __init__(self, id, num_workers, dataset):  # noqa: A002 - PyTorch's name
        self.id, self.num_workers, self.dataset = id, num_workers, dataset


def get_worker_info():
    """Inside a DataLoader worker thread: its id, num_workers and the dataset; None elsewhere."""
    return getattr(_worker_info, "info", None)


class DataLoader:
    """Iterates over ``dataset`` in batches (torch.utils.data.DataLoader's arguments and errors)."""

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None, num_workers=0,
                 collate_fn=None, pin_memory=False, drop_last=False, timeout=0, worker_init_fn=None,
                 multiprocessing_context=None, generator=None, *, prefetch_factor=None, persistent_workers=False,
                 pin_memory_device="", in_order=True):
        self._check_arguments(batch_size, shuffle, sampler, batch_sampler, num_workers, drop_last, timeout,
                              prefetch_factor, generator)
        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = 2 if num_workers > 0 and prefetch_factor is None else prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self.drop_last = drop_last
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None or batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler and batch_sampler")
        elif sampler is None:
            sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        # As PyTorch: with a batch_sampler of the user's, batch_size is None.
        self.batch_size = None if batch_sampler is not None else batch_size
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if batch_size is not None or batch_sampler is not None else default_convert
        self.collate_fn = collate_fn

    @staticmethod
    def _check_arguments(batch_size, shuffle, sampler, batch_sampler, num_workers, drop_last, timeout,
                         prefetch_factor, generator):
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to disable "
                             "multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in multiprocessing.let num_workers > 0 "
                             "to enable multiprocessing, otherwise set prefetch_factor to None.")
        if prefetch_factor is not None and prefetch_factor < 0:
            raise ValueError("prefetch_factor option should be non-negative")
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None and (batch_size != 1 or shuffle or sampler is not None or drop_last):
            raise ValueError("batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and "
                             "drop_last")
        if batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually exclusive with "
                             "drop_last")
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size <= 0):
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        _check_generator(generator, "DataLoader")

    def __len__(self):
        if self._iterable:
            raise TypeError("DataLoader over an IterableDataset has no len()")
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)

    def _index_batches(self):
        """What each fetch reads: lists of indices (batching), single indices, or None (iterable)."""
        if self.batch_sampler is not None:
            return iter(self.batch_sampler)
        return iter(self.sampler)

    def _fetch(self, indices):
        if self.batch_sampler is not None:
            return self.collate_fn([self.dataset[i] for i in indices])
        return self.collate_fn(self.dataset[indices])

    def _iterable_batches(self):
        if self.batch_size is None:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __iter__(self):
        if self._iterable:
            return self._iterable_batches()
        if self.num_workers == 0:
            return (self._fetch(indices) for indices in self._index_batches())
        return self._prefetching_iter()

    def _prefetching_iter(self):
        """Worker threads fetch up to num_workers * prefetch_factor batches ahead, in order."""
        counter = iter(range(self.num_workers))
        lock = threading.Lock()

        def init_worker():
            with lock:
                wid = next(counter)
            _worker_info.info = _WorkerInfo(wid, self.num_workers, self.dataset)
            if self.worker_init_fn is not None:
                self.worker_init_fn(wid)

        window = max(1, self.num_workers * self.prefetch_factor)
        with ThreadPoolExecutor(self.num_workers, thread_name_prefix="strata-dataloader",
                                initializer=init_worker) as pool:
            pending = collections.deque()
            batches = self._index_batches()
            for indices in batches:
                pending.append(pool.submit(self._fetch, indices))
                if len(pending) >= window:
                    break
            while pending:
                result = pending.popleft().result(timeout=self.timeout or None)
                nxt = next(batches, None)
                if nxt is not None:
                    pending.append(pool.submit(self._fetch, nxt))
                yield result

"""strata.utils.data against torch.utils.data: batching, collation, samplers, splits, workers, errors."""

import collections
import re
import threading
import time

import numpy as np
import pytest
import torch
import torch.utils.data as td

import strata
import strata.utils.data as sd


def check(exc, pattern, fn, *args, **kwargs):
    with pytest.raises(exc, match=re.escape(pattern)):
        fn(*args, **kwargs)


def as_np(x):
    if isinstance(x, (strata.Tensor, torch.Tensor)):
        return np.asarray(x.numpy())
    if isinstance(x, dict):
        return {k: as_np(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(as_np(v) for v in x) if not hasattr(x, "_fields") else tuple(as_np(v) for v in x)
    return x


def assert_same(a, b):
    a, b = as_np(a), as_np(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_same(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


X = np.arange(40, dtype=np.float32).reshape(10, 4)
Y = np.arange(10, dtype=np.int64) % 3


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False), (16, False)])
def test_sequential_batches_match_torch(batch_size, drop_last):
    ds_s = sd.TensorDataset(strata.tensor(X), strata.tensor(Y))
    ds_t = td.TensorDataset(torch.tensor(X), torch.tensor(Y))
    dl_s = sd.DataLoader(ds_s, batch_size=batch_size, drop_last=drop_last)
    dl_t = td.DataLoader(ds_t, batch_size=batch_size, drop_last=drop_last)
    assert len(dl_s) == len(dl_t)
    got, want = list(dl_s), list(dl_t)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert isinstance(a, list) and len(a) == 2  # torch gives a list for tuple samples
        assert_same(a, b)


Point = collections.namedtuple("Point", "x y")


class Mixed(td.Dataset):
    """Samples of every collatable kind (a torch Dataset; strata's loader takes any __getitem__)."""

    def __init__(self, tensor_lib):
        self.lib = tensor_lib

    def __len__(self):
        return 5

    def __getitem__(self, i):
        return {"t": self.lib.tensor([i, i + 1.0]), "a": np.full(2, i, dtype=np.int32), "i": i, "f": i / 2,
                "b": i % 2 == 0, "s": f"s{i}", "p": Point(i, float(i)), "l": [i, [i * 2.0]]}


def test_collation_of_every_kind_matches_torch():
    got = next(iter(sd.DataLoader(Mixed(strata), batch_size=3)))
    want = next(iter(td.DataLoader(Mixed(torch), batch_size=3)))
    assert type(got["p"]) is Point
    assert_same(got, want)
    assert sd.default_collate([1.5, 2.5]).dtype == strata.float64
    assert sd.default_collate([True, False]).dtype == strata.bool
    check(RuntimeError, "each element in list of batch should be of equal size", sd.default_collate, [[1, 2], [3]])
    check(TypeError, "default_collate: batch must contain", sd.default_collate, [object(), object()])
    check(RuntimeError, "stack expects each tensor to be equal size", sd.default_collate,
          [strata.zeros(2), strata.zeros(3)])


def test_no_batching_and_custom_collate():
    ds = sd.TensorDataset(strata.tensor(X))
    items = list(sd.DataLoader(ds, batch_size=None))
    assert len(items) == 10 and tuple(items[3][0].shape) == (4,)
    sums = list(sd.DataLoader(range(7), batch_size=3, collate_fn=sum))
    assert sums == [3, 12, 6]


def test_shuffle_is_a_permutation_per_epoch_repeatable_with_a_seed_or_generator():
    ds = list(range(50))
    strata.manual_seed(1)
    e1 = [b.tolist() for b in sd.DataLoader(ds, batch_size=7, shuffle=True)]
    e2 = [b.tolist() for b in sd.DataLoader(ds, batch_size=7, shuffle=True)]
    flat1 = sum(e1, [])
    assert sorted(flat1) == ds and flat1 != ds and flat1 != sum(e2, [])
    strata.manual_seed(1)
    assert [b.tolist() for b in sd.DataLoader(ds, batch_size=7, shuffle=True)] == e1
    g = strata.Generator().manual_seed(5)
    dl = sd.DataLoader(ds, batch_size=50, shuffle=True, generator=g)
    first, second = next(iter(dl)).tolist(), next(iter(dl)).tolist()
    assert first != second  # a new order every epoch
    g.manual_seed(5)
    assert next(iter(dl)).tolist() == first
    assert next(iter(sd.DataLoader(ds, batch_size=50, shuffle=True, generator=strata.Generator().manual_seed(5)))
                ).tolist() == first


def test_samplers_and_batch_sampler():
    ds = list(range(10))
    s = sd.RandomSampler(ds, replacement=True, num_samples=25, generator=strata.Generator().manual_seed(0))
    draws = list(s)
    assert len(draws) == 25 and all(0 <= d < 10 for d in draws) and len(set(draws)) < 10 + 1
    s2 = sd.RandomSampler(ds, num_samples=23, generator=strata.Generator().manual_seed(0))
    draws2 = list(s2)
    assert len(draws2) == 23 and sorted(draws2[:10]) == ds and sorted(draws2[10:20]) == ds
    sub = sd.SubsetRandomSampler([2, 4, 6], generator=strata.Generator().manual_seed(1))
    assert sorted(sub) == [2, 4, 6]
    bs = sd.BatchSampler(sd.SequentialSampler(ds), 4, drop_last=False)
    assert list(bs) == list(td.BatchSampler(td.SequentialSampler(ds), 4, drop_last=False))
    dl = sd.DataLoader(ds, batch_sampler=bs)
    assert [b.tolist() for b in dl] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]] and len(dl) == 3 and dl.batch_size is None
    dl = sd.DataLoader(ds, sampler=[9, 0, 5], batch_size=2)
    assert [b.tolist() for b in dl] == [[9, 0], [5]]


def test_subset_random_split_and_concat():
    ds = sd.TensorDataset(strata.tensor(X), strata.tensor(Y))
    a, b = sd.random_split(ds, [7, 3], generator=strata.Generator().manual_seed(0))
    assert len(a) == 7 and len(b) == 3
    assert sorted(a.indices + b.indices) == list(range(10))
    parts = sd.random_split(range(10), [0.5, 0.3, 0.2], generator=strata.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [len(p) for p in td.random_split(range(10), [0.5, 0.3, 0.2])]
    parts = sd.random_split(range(11), [0.5, 0.5])
    assert [len(p) for p in parts] == [6, 5]
    sub = sd.Subset(ds, [3, 1])
    assert_same(sub[0], (strata.tensor(X[3]), strata.tensor(Y[3])))
    cat = sd.ConcatDataset([range(3), range(10, 12)])
    assert [cat[i] for i in range(len(cat))] == [0, 1, 2, 10, 11] and cat[-1] == 11
    check(ValueError, "Sum of input lengths does not equal the length of the input dataset!", sd.random_split, ds,
          [5, 4])
    check(ValueError, "Fraction at index 0 is not between 0 and 1", sd.random_split, ds, [1.5, -0.5])


class Slow(sd.Dataset):
    def __init__(self):
        self.threads = set()

    def __len__(self):
        return 24

    def __getitem__(self, i):
        self.threads.add(threading.get_ident())
        time.sleep(0.002)
        return strata.tensor([float(i)])


def test_workers_prefetch_in_background_and_keep_the_order():
    ds = Slow()
    seen = []
    dl = sd.DataLoader(ds, batch_size=4, num_workers=3, worker_init_fn=seen.append, prefetch_factor=2)
    batches = [b.numpy().ravel().tolist() for b in dl]
    assert batches == [[float(i) for i in range(j, j + 4)] for j in range(0, 24, 4)]
    assert threading.get_ident() not in ds.threads and 1 <= len(ds.threads) <= 3
    assert sorted(seen) == list(range(len(seen))) and 1 <= len(seen) <= 3
    strata.manual_seed(3)
    shuffled = [b.numpy().ravel().tolist() for b in sd.DataLoader(ds, batch_size=5, shuffle=True, num_workers=2)]
    strata.manual_seed(3)
    assert shuffled == [b.numpy().ravel().tolist() for b in sd.DataLoader(ds, batch_size=5, shuffle=True)]
    info = []
    list(sd.DataLoader(range(4), num_workers=2, collate_fn=lambda b: info.append(sd.get_worker_info().num_workers)))
    assert info == [2, 2, 2, 2] and sd.get_worker_info() is None


def test_iterable_dataset():
    class Count(sd.IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [b.tolist() for b in sd.DataLoader(Count(), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in sd.DataLoader(Count(), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    check(ValueError, "expected unspecified shuffle option", sd.DataLoader, Count(), shuffle=True)


def test_bad_arguments_raise_torchs_errors():
    ds = list(range(5))
    check(ValueError, "sampler option is mutually exclusive with shuffle", sd.DataLoader, ds, shuffle=True,
          sampler=[0])
    check(ValueError, "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last",
          sd.DataLoader, ds, batch_size=2, batch_sampler=[[0]])
    check(ValueError, "num_workers option should be non-negative", sd.DataLoader, ds, num_workers=-1)
    check(ValueError, "prefetch_factor option could only be specified in multiprocessing", sd.DataLoader, ds,
          prefetch_factor=2)
    check(ValueError, "batch_size=None option disables auto-batching and is mutually exclusive with drop_last",
          sd.DataLoader, ds, batch_size=None, drop_last=True)
    check(ValueError, "batch_size should be a positive integer value, but got batch_size=0", sd.DataLoader, ds,
          batch_size=0)
    check(TypeError, "generator must be a strata.Generator or None, got Generator", sd.DataLoader, ds,
          shuffle=True, generator=torch.Generator())
    check(ValueError, "Size mismatch between tensors", sd.TensorDataset, strata.zeros(3), strata.zeros(4))
    check(TypeError, "TensorDataset: expected strata Tensors, got ndarray", sd.TensorDataset, np.zeros(3))
    check(ValueError, "num_samples should be a positive integer value, but got num_samples=0", sd.RandomSampler, ds,
          num_samples=0)
    check(TypeError, "replacement should be a boolean value, but got replacement=1", sd.RandomSampler, ds,
          replacement=1)
    check(ValueError, "drop_last should be a boolean value, but got drop_last=None", sd.BatchSampler, ds, 2, None)
    check(NotImplementedError, "Subclasses of Dataset should implement __getitem__.", sd.Dataset().__getitem__, 0)

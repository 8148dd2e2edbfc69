"""strata.Tensor and the module-level factories, checked against NumPy and PyTorch 2.13."""

import copy
from fractions import Fraction
import gc
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import weakref

import numpy as np
import pytest
import torch

import strata

ALL_DTYPES = [strata.float32, strata.float64, strata.bfloat16, strata.int32, strata.int64,
              strata.uint8, strata.bool]
TORCH_DTYPE = {
    strata.float32: torch.float32,
    strata.float64: torch.float64,
    strata.bfloat16: torch.bfloat16,
    strata.int32: torch.int32,
    strata.int64: torch.int64,
    strata.uint8: torch.uint8,
    strata.bool: torch.bool,
}
NUMPY_DTYPE = {
    strata.float32: np.float32,
    strata.float64: np.float64,
    strata.int32: np.int32,
    strata.int64: np.int64,
    strata.uint8: np.uint8,
    strata.bool: np.bool_,
}


def values(x):
    """The elements of a strata or torch tensor as a NumPy array (bfloat16 widened exactly)."""
    if isinstance(x, strata.Tensor):
        return (x.to(strata.float32) if x.dtype is strata.bfloat16 else x).numpy()
    return (x.to(torch.float32) if x.dtype == torch.bfloat16 else x).numpy()


def assert_same_tensor(s, t):
    """Same sizes, strides, storage offset, contiguity, dtype and values."""
    assert isinstance(s, strata.Tensor)
    assert s.shape == tuple(t.shape)
    assert s.stride() == t.stride()
    assert s.storage_offset() == t.storage_offset()
    assert s.is_contiguous() == t.is_contiguous()
    assert TORCH_DTYPE[s.dtype] == t.dtype
    np.testing.assert_array_equal(values(s), values(t))


def pair(array):
    """The same data as a strata tensor and a torch tensor, each over its own copy."""
    return strata.from_numpy(array.copy()), torch.from_numpy(array.copy())


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


# ---- metadata and dtypes ----------------------------------------------------------------------


def test_metadata_matches_torch():
    s, t = pair(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    assert s.shape == (2, 3, 4) and s.size() == (2, 3, 4)
    assert s.size(1) == 3 and s.size(-1) == 4 and s.stride(0) == 12 and s.stride(-1) == 1
    assert s.ndim == 3 and s.dim() == 3 and s.numel() == 24 and len(s) == 2
    assert s.element_size() == t.element_size() == 4 and s.nbytes == t.nbytes
    assert s.is_floating_point() and not strata.zeros(2, dtype=strata.int64).is_floating_point()
    assert_same_tensor(s, t)
    z = strata.tensor(3.5)
    assert z.shape == () and z.ndim == 0 and z.numel() == 1 and z.stride() == ()


def test_dtype_objects():
    assert str(strata.float32) == "strata.float32" and repr(strata.bfloat16) == "strata.bfloat16"
    assert str(strata.bool) == "strata.bool" and str(strata.uint8) == "strata.uint8"
    assert strata.float is strata.float32 and strata.f32 is strata.float32
    assert strata.double is strata.float64 and strata.long is strata.int64
    assert strata.int is strata.int32 and strata.bf16 is strata.bfloat16
    assert isinstance(strata.float32, strata.dtype)
    for d in ALL_DTYPES:
        td = TORCH_DTYPE[d]
        assert d.itemsize == td.itemsize
        assert d.is_floating_point == td.is_floating_point
        assert d.is_signed == td.is_signed
        assert pickle.loads(pickle.dumps(d)) is d
        assert strata.zeros(2, dtype=d).dtype is d
    with pytest.raises(TypeError):
        strata.dtype()


def test_dtype_arguments_accept_numpy_python_and_names():
    assert strata.zeros(2, dtype=np.float64).dtype is strata.float64
    assert strata.zeros(2, dtype=np.dtype("int32")).dtype is strata.int32
    # Python's types mean what they mean to NumPy and PyTorch.
    assert strata.zeros(2, dtype=float).dtype is strata.float64
    assert strata.zeros(2, dtype=int).dtype is strata.int64
    assert strata.zeros(2, dtype=bool).dtype is strata.bool
    assert strata.zeros(2, dtype="bf16").dtype is strata.bfloat16
    assert strata.zeros(2, dtype="long").dtype is strata.int64
    assert strata.zeros(2, dtype="float16").dtype is strata.float16
    assert strata.zeros(2, dtype=np.float16).dtype is strata.half
    with pytest.raises(strata.StrataError, match="unknown dtype 'int16'"):
        strata.zeros(2, dtype="int16")
    with pytest.raises(TypeError, match="dtype must be a strata.dtype"):
        strata.zeros(2, dtype=3)
    with pytest.raises(TypeError, match="not supported"):
        strata.zeros(2, dtype=np.int16)


# ---- views against torch ----------------------------------------------------------------------

VIEW_OPS = {
    "view": lambda x: x.view(6, 4),
    "view_tuple": lambda x: x.view((4, 6)),
    "view_infer": lambda x: x.view(2, -1, 2),
    "view_flat": lambda x: x.view(-1),
    "reshape": lambda x: x.reshape(4, 3, 2),
    "reshape_tuple": lambda x: x.reshape((-1, 4)),
    "narrow": lambda x: x.narrow(1, 1, 2),
    "narrow_negative_start": lambda x: x.narrow(-1, -3, 2),
    "narrow_empty": lambda x: x.narrow(0, 1, 0),
    "select": lambda x: x.select(0, 1),
    "select_negative": lambda x: x.select(-1, -2),
    "transpose": lambda x: x.transpose(0, 2),
    "transpose_negative": lambda x: x.transpose(-1, 1),
    "permute": lambda x: x.permute(2, 0, 1),
    "permute_tuple": lambda x: x.permute((1, 2, 0)),
    "t": lambda x: x.select(0, 1).t(),
    "t_1d": lambda x: x.select(0, 0).select(0, 1).t(),
    "expand": lambda x: x.narrow(1, 0, 1).expand(2, 3, 4),
    "expand_new_dims": lambda x: x.select(1, 2).expand(5, -1, -1),
    "squeeze_all": lambda x: x.narrow(1, 1, 1).unsqueeze(0).squeeze(),
    "squeeze_dim": lambda x: x.narrow(1, 2, 1).squeeze(1),
    "squeeze_noop": lambda x: x.squeeze(0),
    "squeeze_tuple": lambda x: x.narrow(1, 0, 1).unsqueeze(-1).squeeze((1, 3)),
    "unsqueeze_front": lambda x: x.unsqueeze(0),
    "unsqueeze_middle": lambda x: x.unsqueeze(2),
    "unsqueeze_back": lambda x: x.unsqueeze(-1),
    "flatten": lambda x: x.flatten(),
    "flatten_partial": lambda x: x.flatten(1),
    "flatten_range": lambda x: x.flatten(0, 1),
    "contiguous": lambda x: x.contiguous(),
    "clone": lambda x: x.clone(),
    "as_strided": lambda x: x.as_strided((2, 2), (1, 2), 1),
    "chain": lambda x: x.transpose(0, 1)[1:, ::2].unsqueeze(1).narrow(-1, 1, 2),
    "index_int": lambda x: x[1],
    "index_negative_int": lambda x: x[-1, -2],
    "index_slice": lambda x: x[:, 1:3],
    "index_step": lambda x: x[..., ::2],
    "index_mixed": lambda x: x[::2, 1::2, 1:4:2],
    "index_none": lambda x: x[None, 0, ..., None],
    "index_ellipsis_last": lambda x: x[..., 0],
    "index_ellipsis_first": lambda x: x[0, ...],
    "index_empty_tuple": lambda x: x[()],
    "index_negative_slice": lambda x: x[:, -2:],
    "index_clamped": lambda x: x[:, -10:10],
    "index_empty_slice": lambda x: x[:, 5:],
    "index_reversed_bounds": lambda x: x[:, 2:1],
    "index_scalar": lambda x: x[1, 2, 3],
    "index_numpy_int": lambda x: x[np.int64(1), np.int32(0)],
}


@pytest.mark.parametrize("base", ["contiguous", "strided"])
@pytest.mark.parametrize("op", list(VIEW_OPS))
def test_view_matches_torch(op, base):
    data = np.arange(48, dtype=np.float32).reshape(2, 4, 6) * 0.5 - 3.0
    s, t = pair(data)
    s, t = s[:, 1:, 1:5], t[:, 1:, 1:5]  # (2, 3, 4) with an offset and non-unit strides
    if base == "contiguous":
        s, t = s.contiguous(), t.contiguous()
    if base == "strided" and op.startswith("view"):
        # A strided base cannot always be viewed; both libraries must then agree that it fails.
        try:
            expected = VIEW_OPS[op](t)
        except RuntimeError:
            with pytest.raises(strata.StrataError, match="view"):
                VIEW_OPS[op](s)
            return
    else:
        expected = VIEW_OPS[op](t)
    got = VIEW_OPS[op](s)
    assert_same_tensor(got, expected)
    # A result shares storage with its input exactly when torch's does.
    shares_torch = expected.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    assert got._shares_storage(s) == shares_torch


def random_shape_with_numel(rng, numel, rank):
    dims = []
    for _ in range(rank - 1):
        d = int(rng.choice([d for d in range(1, numel + 1) if numel % d == 0]))
        dims.append(d)
        numel //= d
    dims.append(numel)
    rng.shuffle(dims)
    return dims


def test_random_views_match_torch():
    """view/reshape of randomly permuted, sliced and unsqueezed tensors: same success, strides,
    offsets and values as PyTorch."""
    rng = np.random.default_rng(2024)
    viewable = 0
    for _ in range(400):
        shape = [int(x) for x in rng.integers(1, 5, rng.integers(1, 5))]
        n = int(np.prod(shape))
        offset = int(rng.integers(0, 3))
        s, t = pair(np.arange(n + 3, dtype=np.float32))
        s, t = s[offset:offset + n].view(*shape), t[offset:offset + n].view(*shape)
        perm = [int(p) for p in rng.permutation(len(shape))]
        s, t = s.permute(*perm), t.permute(*perm)
        if rng.random() < 0.3:
            d = int(rng.integers(0, s.ndim))
            index = (slice(None),) * d + (slice(None, None, 2),)
            s, t = s[index], t[index]
        if rng.random() < 0.2:
            d = int(rng.integers(0, s.ndim + 1))
            s, t = s.unsqueeze(d), t.unsqueeze(d)
        assert_same_tensor(s, t)
        new = random_shape_with_numel(rng, s.numel(), int(rng.integers(1, 5)))
        try:
            expected = t.view(*new)
        except RuntimeError:
            with pytest.raises(strata.StrataError, match="view: size"):
                s.view(*new)
        else:
            viewable += 1
            assert_same_tensor(s.view(*new), expected)
        assert_same_tensor(s.reshape(*new), t.reshape(*new))
    assert 50 < viewable < 400  # both outcomes were exercised


@pytest.mark.parametrize("shape,perm,new", [
    ((0, 3), (1, 0), (3, 0)),
    ((2, 0), (1, 0), (0, 2)),
    ((0, 3), (1, 0), (0, 3)),
    ((2, 0, 3), (2, 0, 1), (6, 0)),
    ((2, 0, 3), (0, 2, 1), (-1,)),
])
def test_empty_tensor_views_match_torch(shape, perm, new):
    s, t = strata.zeros(*shape).permute(*perm), torch.zeros(*shape).permute(*perm)
    assert_same_tensor(s, t)
    assert_same_tensor(s.view(*new), t.view(*new))
    assert_same_tensor(s[:, 1:1], t[:, 1:1])


def test_views_write_through_like_torch():
    s, t = pair(np.zeros((3, 4, 5), dtype=np.float64))
    for x, lib in ((s, strata), (t, torch)):
        x[1, :, 1:3].fill_(7)
        x.transpose(0, 2)[4].select(0, 1).fill_(-2)
        x[..., 0] = 3.5
        x[2, 1] = lib.tensor([1, 2, 3, 4, 5])  # int64 source, converted
        x[0, ::2, None] = lib.full((2, 1, 5), 9.0, dtype=lib.float64)
        x[0, 1:3].narrow(-1, 3, 2).zero_()
        x[1, 3].copy_(lib.tensor([5.0, 4, 3, 2, 1]))
        x[1, 2] = lib.tensor(6.5)  # 0-dim source, broadcast
        x[2, 2, 2] = True
    s[2, 3] = np.arange(5.0)  # NumPy data on the right-hand side
    t[2, 3] = torch.arange(5.0)
    np.testing.assert_array_equal(s.numpy(), t.numpy())
    assert s._version > 0


def test_in_place_ops_return_self_and_bump_version():
    s = strata.zeros(2, 3)
    v = s._version
    assert s.fill_(2.0) is s
    assert s.zero_() is s
    assert s.copy_(strata.ones(3)) is s  # broadcast copy
    assert s._version >= v + 3
    np.testing.assert_array_equal(s.numpy(), np.ones((2, 3), np.float32))
    # A copy from an overlapping view of the same storage behaves as if through a temporary.
    s2, t2 = pair(np.arange(10, dtype=np.int64))
    s2[1:].copy_(s2[:-1])
    t2[1:].copy_(t2[:-1].clone())
    np.testing.assert_array_equal(s2.numpy(), t2.numpy())


def test_len_iter_and_scalars():
    s, t = pair(np.arange(6, dtype=np.int32).reshape(3, 2))
    assert len(s) == 3
    rows = list(s)
    assert len(rows) == 3 and all(r.shape == (2,) for r in rows)
    assert [r.tolist() for r in rows] == t.tolist()
    assert s[1, 1].item() == 3 and type(s[1, 1].item()) is int
    assert type(strata.tensor(2.5).item()) is float and strata.tensor(2.5).item() == 2.5
    assert strata.tensor([True]).item() is True
    assert strata.tensor([[7]]).item() == 7  # one element, any rank
    assert strata.tensor(2**62 + 1).item() == 2**62 + 1  # exact, not through a double
    assert strata.tensor([2**62 + 1]).tolist() == [2**62 + 1]
    assert float(strata.tensor(1.25)) == 1.25 and int(strata.tensor(7.9)) == 7
    assert bool(strata.tensor([0.5])) and not bool(strata.tensor(0))
    assert strata.tensor(3.0, dtype=strata.bfloat16).item() == 3.0


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tolist_matches_torch(dtype):
    data = np.array([[0, 1.5, 2], [3.25, 100, 7]], dtype=np.float32)
    s = strata.from_numpy(data).to(dtype)
    t = torch.from_numpy(data).to(TORCH_DTYPE[dtype])
    assert s.tolist() == t.tolist()
    assert s.t().tolist() == t.t().tolist()
    assert s[1, 2].tolist() == t[1, 2].tolist()
    assert type(s[0, 1].tolist()) is type(t[0, 1].tolist())


def test_repr_is_the_cpp_text():
    assert repr(strata.tensor([[1.0, 2.0], [3.0, 4.0]])) == "tensor([[1., 2.],\n        [3., 4.]], dtype=f32)"
    assert str(strata.tensor([1, 2, 3])) == "tensor([1, 2, 3], dtype=i64)"
    assert "..." in repr(strata.zeros(5000))


def test_pickle_and_deepcopy():
    for d in ALL_DTYPES:
        s = strata.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4)).to(d).t()
        for back in (pickle.loads(pickle.dumps(s)), copy.deepcopy(s)):
            assert back.dtype is d and back.shape == s.shape
            assert back.tolist() == s.tolist()
            assert not back._shares_storage(s)


# ---- zero-copy NumPy interop -------------------------------------------------------------------


def test_from_numpy_shares_memory_both_ways():
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    s = strata.from_numpy(arr)
    assert s.data_ptr() == arr.ctypes.data
    assert s.shape == (3, 4) and s.stride() == (4, 1) and s.dtype is strata.float32
    s[1, 2] = 100.0
    assert arr[1, 2] == 100.0
    arr[0, 0] = -1.0
    assert s[0, 0].item() == -1.0
    s.t()[3].fill_(5.0)  # through a view
    np.testing.assert_array_equal(arr[:, 3], [5.0, 5.0, 5.0])
    back = s.numpy()
    assert np.shares_memory(back, arr) and back.ctypes.data == arr.ctypes.data


@pytest.mark.parametrize("make", [
    lambda a: a[:, ::2],
    lambda a: a.T,
    lambda a: a[1:, 1:3],
    lambda a: a[::2, None, ::3],
    lambda a: np.broadcast_to(a[:1], (5, 6)),
    lambda a: a[::-1][:1],  # a negative stride on a size-1 dim addresses nothing
])
def test_from_numpy_strided(make):
    base = np.arange(30, dtype=np.int64).reshape(5, 6)
    arr = make(base)
    if arr.flags.writeable:
        s = strata.from_numpy(arr)
    else:
        with pytest.warns(UserWarning, match="not writable"):
            s = strata.from_numpy(arr)
    assert s.data_ptr() == arr.ctypes.data
    assert s.shape == arr.shape
    for d in range(arr.ndim):
        if arr.shape[d] > 1:
            assert s.stride(d) * arr.itemsize == arr.strides[d]
    np.testing.assert_array_equal(s.numpy(), arr)
    if arr.flags.writeable:
        s[(0,) * arr.ndim] = -7
        assert arr[(0,) * arr.ndim] == -7
        arr[(-1,) * arr.ndim] = -9
        assert s[(-1,) * arr.ndim].item() == -9


def test_from_numpy_keeps_the_array_alive():
    arr = np.arange(1000, dtype=np.float64)
    ref = weakref.ref(arr)
    s = strata.from_numpy(arr)
    view = s[10:20]
    del arr, s
    gc.collect()
    assert ref() is not None  # the view still needs the memory
    np.testing.assert_array_equal(view.numpy(), np.arange(10, 20, dtype=np.float64))
    del view
    gc.collect()
    assert ref() is None  # and lets it go once the last tensor is gone


def test_numpy_keeps_the_tensor_alive():
    s = strata.arange(100, dtype=strata.float32)
    a = s[5:].numpy()
    ptr = s.data_ptr()
    del s
    gc.collect()
    assert isinstance(a.base, strata.Tensor)
    assert a.base.data_ptr() == ptr + 5 * 4 == a.ctypes.data
    np.testing.assert_array_equal(a[:3], [5, 6, 7])
    a[0] = 42
    assert a.base[0].item() == 42


def test_numpy_of_views_has_byte_strides():
    base = strata.arange(24, dtype=strata.float32).view(2, 3, 4)
    tbase = torch.arange(24, dtype=torch.float32).view(2, 3, 4)
    for f in (lambda x: x.transpose(0, 2), lambda x: x[1, :, 1::2], lambda x: x.select(2, 3),
              lambda x: x.unsqueeze(1).expand(2, 5, 3, 4), lambda x: x.permute(1, 2, 0)[::2]):
        a, ta = f(base).numpy(), f(tbase).numpy()
        assert a.shape == ta.shape and a.strides == ta.strides and a.dtype == ta.dtype
        np.testing.assert_array_equal(a, ta)
        assert np.shares_memory(a, base.numpy())
    a = base.transpose(0, 1).numpy()
    assert a.strides == (16, 48, 4)
    narrow = base[1, 2]
    assert narrow.numpy().ctypes.data == base.data_ptr() + (12 + 8) * 4
    # Writes through numpy show up in the tensor.
    base.transpose(0, 2).numpy()[3, 2, 1] = -1
    assert base[1, 2, 3].item() == -1


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_numpy_round_trip_per_dtype(dtype):
    arr = (np.arange(-6, 6).reshape(3, 4) % 5).astype(dtype)
    s = strata.from_numpy(arr)
    assert NUMPY_DTYPE[s.dtype] == dtype
    back = s.numpy()
    assert back.dtype == dtype and np.shares_memory(back, arr)
    np.testing.assert_array_equal(back, arr)
    t = torch.from_numpy(arr)
    assert TORCH_DTYPE[s.dtype] == t.dtype
    assert s.tolist() == t.tolist()


def test_from_numpy_edge_shapes():
    z = strata.from_numpy(np.array(2.5))
    assert z.shape == () and z.item() == 2.5
    e = strata.from_numpy(np.zeros((0, 3), np.float32))
    assert e.shape == (0, 3) and e.numel() == 0 and e.numpy().shape == (0, 3)
    assert e.stride() == torch.from_numpy(np.zeros((0, 3), np.float32)).stride()  # NumPy's (0, 0)
    assert e.is_contiguous()  # no elements: contiguous, as in PyTorch
    assert strata.zeros(0, 4).numpy().shape == (0, 4)
    assert strata.zeros(()).numpy().shape == ()


def test_array_protocol():
    s = strata.arange(6, dtype=strata.float32).view(2, 3)
    a = np.asarray(s)
    assert np.shares_memory(a, s.numpy())
    c = np.array(s)  # np.array copies by default
    assert not np.shares_memory(c, s.numpy())
    np.testing.assert_array_equal(c, a)
    d = np.asarray(s, dtype=np.float64)
    assert d.dtype == np.float64 and not np.shares_memory(d, a)
    b = strata.tensor([1.5, 2.5], dtype=strata.bfloat16)
    assert np.asarray(b).dtype == np.float32 and np.asarray(b).tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match="copy"):
        np.asarray(b, copy=False)


def test_numpy_errors():
    with pytest.raises(TypeError, match=r"to\(strata.float32\)"):
        strata.ones(3, dtype=strata.bfloat16).numpy()
    with pytest.raises(TypeError, match="expected a numpy.ndarray, got list"):
        strata.from_numpy([1, 2, 3])
    for dt in (np.int16, np.complex64, np.uint32):
        with pytest.raises(TypeError, match="is not supported"):
            strata.from_numpy(np.zeros(3, dt))
    with pytest.raises(ValueError, match="negative stride"):
        strata.from_numpy(np.arange(5.0)[::-1])
    # A stride that is not a multiple of the element size: a field of a packed record array.
    packed = np.zeros(4, dtype=[("a", "<f4"), ("b", "u1")])["a"]
    assert packed.strides == (5,)
    with pytest.raises(ValueError, match="not a multiple of its element size"):
        strata.from_numpy(packed)
    with pytest.raises(ValueError, match="byte order"):
        strata.from_numpy(np.zeros(3, dtype=">f4"))
    misaligned = np.frombuffer(bytearray(40), dtype=np.float64, count=4, offset=1)
    with pytest.raises(ValueError, match="aligned"):
        strata.from_numpy(misaligned)
    ro = np.arange(3.0)
    ro.setflags(write=False)
    with pytest.warns(UserWarning, match="not writable"):
        s = strata.from_numpy(ro)
    assert s.tolist() == [0.0, 1.0, 2.0]


def test_as_tensor_shares_when_it_can():
    arr = np.arange(6, dtype=np.int32)
    s = strata.as_tensor(arr)
    assert s.data_ptr() == arr.ctypes.data
    assert strata.as_tensor(s).data_ptr() == s.data_ptr()
    c = strata.as_tensor(arr, dtype=strata.float32)
    assert c.dtype is strata.float32 and c.data_ptr() != arr.ctypes.data
    r = strata.as_tensor(arr[::-1])  # needs a copy: negative stride
    assert r.tolist() == [5, 4, 3, 2, 1, 0]


# ---- tensor() ---------------------------------------------------------------------------------


@pytest.mark.parametrize("data", [
    [1, 2, 3],
    [[1.0, 2], [3, 4]],
    [True, False],
    3.5,
    7,
    [],
    [[[]]],
    [1, 2.5],
    np.array([1, 2], dtype=np.int32),
    np.array([[0.1, 0.2]], dtype=np.float64),
    np.float64(2.5),
    np.arange(6, dtype=np.uint8).reshape(2, 3).T,
])
def test_tensor_infers_dtype_like_torch(data):
    s = strata.tensor(data)
    t = torch.tensor(data)
    assert TORCH_DTYPE[s.dtype] == t.dtype
    assert s.shape == tuple(t.shape)
    assert s.is_contiguous()
    np.testing.assert_array_equal(values(s), values(t))


def test_tensor_copies():
    arr = np.arange(4.0)
    s = strata.tensor(arr)
    arr[0] = 10
    assert s[0].item() == 0.0
    s2 = strata.tensor(s)
    s2[1] = 5
    assert s[1].item() == 1.0
    assert strata.tensor(s, dtype=strata.int32).dtype is strata.int32
    assert strata.tensor(arr[::-2]).tolist() == [3.0, 1.0]
    assert strata.tensor(np.zeros(2, dtype=">i8")).dtype is strata.int64
    assert strata.tensor([strata.tensor(1.0), strata.tensor(2.0)]).tolist() == [1.0, 2.0]
    assert strata.tensor(torch.arange(3, dtype=torch.float64)).dtype is strata.float64


def test_tensor_errors():
    with pytest.raises(ValueError):
        strata.tensor([[1, 2], [3]])  # ragged
    with pytest.raises(TypeError, match="pass dtype= to convert"):
        strata.tensor(np.zeros(2, np.int16))
    assert strata.tensor(np.array([1, -2], np.int16), dtype=strata.int32).tolist() == [1, -2]
    with pytest.raises(TypeError, match="NumPy dtype <U1"):
        strata.tensor(["a"])


# ---- dtype conversions against torch ------------------------------------------------------------


def conversion_data(src, dst):
    """Values whose conversion from src to dst is defined the same way in C++/PyTorch."""
    rng = np.random.default_rng(0)
    if src.is_floating_point:
        lo, hi = (0.0, 255.0) if dst is strata.uint8 else (-1000.0, 1000.0)
        v = np.concatenate([rng.uniform(lo, hi, 500), [0.0, -0.0, 0.5, 1.0, 2.5, -2.5, 254.9, 0.49999997]])
        if dst is strata.uint8:
            v = np.abs(v)
        if dst.is_floating_point or dst is strata.bool:
            v = np.concatenate([v, [np.inf, -np.inf, np.nan, 1e30, -1e-30, 3.4e38]])
        return v.astype(np.float64)
    if src is strata.bool:
        return np.array([0, 1, 1, 0], dtype=np.float64)
    if src is strata.uint8:
        return np.arange(256, dtype=np.float64)
    info = np.iinfo(NUMPY_DTYPE[src])
    v = np.concatenate([rng.integers(-300, 300, 400), [0, 1, -1, 255, 256, -129, info.max, info.min,
                                                     16777217, -16777217, 2**24 + 3]])
    return np.clip(v, info.min, info.max)


@pytest.mark.parametrize("dst", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("src", ALL_DTYPES, ids=str)
def test_conversion_matches_torch(src, dst):
    data = conversion_data(src, dst)
    if src is strata.int64:
        start_t = torch.tensor(data.astype(np.int64))  # exact for big int64 values
    else:
        start_t = torch.tensor(data, dtype=torch.float64).to(TORCH_DTYPE[src])
    # Build the strata source from torch's values so both start from identical elements.
    start_s = strata.tensor(values(start_t)).to(src)
    np.testing.assert_array_equal(values(start_s), values(start_t))
    got = start_s.to(dst)
    expected = start_t.to(TORCH_DTYPE[dst])
    assert got.dtype is dst
    if dst.is_floating_point:
        g, e = values(got).astype(np.float64), values(expected).astype(np.float64)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(e))
        np.testing.assert_array_equal(g[~np.isnan(g)], e[~np.isnan(e)])
    else:
        np.testing.assert_array_equal(values(got), values(expected))
    # A strided source converts the same way.
    np.testing.assert_array_equal(values(start_s[::3].to(dst)), values(got)[::3])


def test_float_to_int_saturates():
    # Strata saturates out-of-range values and maps NaN to 0 (PyTorch leaves these undefined).
    s = strata.tensor([np.nan, np.inf, -np.inf, 1e20, -1e20, 300.0, -5.0, -0.9, 2.9], dtype=strata.float64)
    assert s.to(strata.int32).tolist() == [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 300, -5, 0, 2]
    assert s.to(strata.int64).tolist() == [0, 2**63 - 1, -2**63, 2**63 - 1, -2**63, 300, -5, 0, 2]
    assert s.to(strata.uint8).tolist() == [0, 255, 0, 255, 0, 255, 0, 0, 2]
    assert s.to(strata.bool).tolist() == [True, True, True, True, True, True, True, True, True]


def rne_reference(f32):
    """bfloat16 rounding (nearest, ties to even) in NumPy, returned widened back to float32."""
    u = bits(f32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return (rounded & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def test_bfloat16_rounds_to_nearest_even_like_torch():
    rng = np.random.default_rng(1234)
    random_bits = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32)
    upper = rng.integers(0, 2**16, 50_000, dtype=np.uint64).astype(np.uint32) << 16
    ties = upper | 0x8000  # exactly halfway between two bfloat16 values
    near = np.concatenate([upper | 0x7FFF, upper | 0x8001, upper | 0x0001, upper | 0xFFFF])
    special = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7F7FFFFF, 0xFF7FFFFF,
                        0x7F7F8000, 0x7F7F7FFF, 0x00000001, 0x00008000, 0x00018000, 0x80008000,
                        0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7FC00000, 0x7F800001, 0xFFFFFFFF,
                        0x7FFF0000, 0x00800000, 0x007FFFFF], dtype=np.uint32)
    f32 = np.concatenate([random_bits, ties, near, special]).view(np.float32)

    got = strata.from_numpy(f32).to(strata.bfloat16).to(strata.float32).numpy()
    expected = torch.from_numpy(f32).to(torch.bfloat16).to(torch.float32).numpy()
    nan = np.isnan(f32)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(np.isnan(expected), nan)
    np.testing.assert_array_equal(bits(got[~nan]), bits(expected[~nan]))
    np.testing.assert_array_equal(bits(got[~nan]), bits(rne_reference(f32[~nan])))

    # The ties really exercise both directions of ties-to-even.
    tie_results = bits(strata.from_numpy(ties.view(np.float32)).to(strata.bfloat16).to(strata.float32).numpy())
    finite = (ties & 0x7F800000) != 0x7F800000
    rounded_up = (tie_results >> 16) != (ties >> 16)
    assert rounded_up[finite].any() and (~rounded_up[finite]).any()
    assert ((tie_results[finite] >> 16) & 1 == 0).all()  # every tie lands on an even bfloat16
    # Overflow past the largest bfloat16 rounds to infinity; bf16 -> f32 is exact.
    big = strata.tensor([3.4028235e38, -3.4028235e38], dtype=strata.float32).to(strata.bfloat16)
    assert big.tolist() == [float("inf"), float("-inf")]


def test_bfloat16_from_float64_matches_torch():
    rng = np.random.default_rng(7)
    f64 = np.concatenate([rng.normal(0, 1e3, 20_000), rng.uniform(-1, 1, 20_000) * 2.0 ** rng.integers(-140, 120, 20_000)])
    got = strata.from_numpy(f64).to(strata.bfloat16).to(strata.float64).numpy()
    expected = torch.from_numpy(f64).to(torch.bfloat16).to(torch.float64).numpy()
    np.testing.assert_array_equal(got, expected)


# ---- factories --------------------------------------------------------------------------------


ARANGE_CASES = [
    ((5,), {}),
    ((0,), {}),
    ((2, 10), {}),
    ((2, 10, 3), {}),
    ((10, 0, -2), {}),
    ((-5, 5, 2), {}),
    ((5, 5), {}),
    ((0.0, 5.0), {}),
    ((0, 5.0), {}),
    ((0, 1, 0.1), {}),
    ((1, 2.5, 0.5), {}),
    ((-3.5, 2.2, 0.7), {}),
    ((0.1, 0.9, 0.1), {}),
    ((1e6, 1e6 + 10, 0.75), {}),
    ((3, -4.5, -1.25), {}),
    ((0, 10, 3.0), {}),
    ((10,), {"dtype": "float64"}),
    ((0, 1, 0.125), {"dtype": "float64"}),
    ((0, 1, 0.1), {"dtype": "float64"}),
    ((0, 7), {"dtype": "int32"}),
    ((0.5, 7.5), {"dtype": "int64"}),
    ((-3, 300, 7), {"dtype": "bfloat16"}),
    ((0, 20), {"dtype": "uint8"}),
    (( ), {"start": 1, "end": 4}),
    ((2,), {"end": 9, "step": 2}),
]


@pytest.mark.parametrize("args,kwargs", ARANGE_CASES)
def test_arange_matches_torch(args, kwargs):
    skw = dict(kwargs)
    tkw = dict(kwargs)
    if "dtype" in kwargs:
        skw["dtype"] = getattr(strata, kwargs["dtype"])
        tkw["dtype"] = getattr(torch, kwargs["dtype"])
    if args == (2,):  # torch spells arange(start, end=...) as arange(start, end)
        s = strata.arange(start=2, **skw)
        t = torch.arange(2, kwargs["end"], kwargs["step"])
    else:
        s = strata.arange(*args, **skw)
        t = torch.arange(*args, **tkw)
    bounds = [*args, *(v for k, v in kwargs.items() if k != "dtype")]
    if all(float(v).is_integer() for v in bounds) or not t.dtype.is_floating_point:
        assert_same_tensor(s, t)  # every value is exact: no rounding involved
        return
    # Fractional steps: element i is start + i * step rounded to the dtype. PyTorch's kernel
    # computes it in SIMD-width-dependent ways (vector lanes add k * step to a per-vector base), so
    # its last bit differs between CPUs; compare to it, and to the exact value, within rounding.
    assert s.shape == tuple(t.shape) and s.stride() == t.stride() and TORCH_DTYPE[s.dtype] == t.dtype
    start = Fraction(kwargs.get("start", args[0] if len(args) > 1 else 0))
    step = Fraction(args[2] if len(args) > 2 else kwargs.get("step", 1))
    exact = np.array([float(start + i * step) for i in range(s.numel())])
    atol = np.finfo(values(t).dtype).eps * max(abs(float(v)) for v in bounds)
    np.testing.assert_allclose(values(s), values(t), rtol=0, atol=atol)
    np.testing.assert_allclose(values(s), exact, rtol=0, atol=atol)


def test_arange_errors():
    with pytest.raises(strata.StrataError, match="step must be finite and non-zero"):
        strata.arange(0, 1, 0)
    with pytest.raises(strata.StrataError, match="inconsistent with the sign of step"):
        strata.arange(0, 10, -1)
    with pytest.raises(strata.StrataError, match="dtype bool is not supported"):
        strata.arange(5, dtype=strata.bool)
    with pytest.raises(TypeError, match="missing the required argument 'end'"):
        strata.arange()
    with pytest.raises(TypeError, match="unexpected keyword argument 'stop'"):
        strata.arange(0, stop=3)
    with pytest.raises(TypeError, match="multiple values for argument 'end'"):
        strata.arange(0, 3, end=4)


@pytest.mark.parametrize("name", ["zeros", "ones", "empty"])
def test_sized_factories(name):
    f, tf = getattr(strata, name), getattr(torch, name)
    for size in [(2, 3), ((2, 3),), ([4],), ((),), (0, 5), (1,)]:
        for d in [None, strata.float64, strata.int32, strata.bool, strata.bfloat16, strata.uint8]:
            s = f(*size) if d is None else f(*size, dtype=d)
            t = tf(*size) if d is None else tf(*size, dtype=TORCH_DTYPE[d])
            assert s.shape == tuple(t.shape) and TORCH_DTYPE[s.dtype] == t.dtype
            assert s.stride() == t.stride() and s.is_contiguous()
            if name != "empty":
                np.testing.assert_array_equal(values(s), values(t))
    with pytest.raises(TypeError, match="missing the required argument 'size'"):
        f()
    with pytest.raises(TypeError, match="must be ints or one tuple of ints"):
        f(2, 2.5)
    with pytest.raises(strata.StrataError, match=r"negative size -1 at dim 1 in sizes \[2, -1\]"):
        f(2, -1)


def test_full_and_like_factories():
    for size, value, d in [((2, 2), 7, None), ((3,), 1.5, None), ((1, 2), True, None),
                           ((2,), 3, strata.float64), ((2, 3), -1.75, strata.bfloat16), ((), 4.0, strata.int32)]:
        s = strata.full(size, value) if d is None else strata.full(size, value, dtype=d)
        t = torch.full(size, value) if d is None else torch.full(size, value, dtype=TORCH_DTYPE[d])
        assert s.shape == tuple(t.shape) and TORCH_DTYPE[s.dtype] == t.dtype
        np.testing.assert_array_equal(values(s), values(t))
    base = strata.ones(2, 3, dtype=strata.int32).t()
    for fn, fill in [(strata.zeros_like, 0), (strata.ones_like, 1), (strata.empty_like, None)]:
        r = fn(base)
        assert r.shape == (3, 2) and r.dtype is strata.int32 and r.is_contiguous()
        if fill is not None:
            assert (r.numpy() == fill).all()
        assert fn(base, dtype=strata.float64).dtype is strata.float64
    f = strata.full_like(base, 2.5, dtype=strata.float32)
    assert f.shape == (3, 2) and f.tolist() == [[2.5, 2.5]] * 3
    assert strata.full_like(base, 9).tolist() == [[9, 9]] * 3


def test_random_factories_shapes_and_dtypes():
    assert strata.rand(2, 3).shape == (2, 3) and strata.rand(2, 3).dtype is strata.float32
    assert strata.rand((4,), dtype=strata.float64).dtype is strata.float64
    assert strata.randn(5, dtype=strata.bfloat16).dtype is strata.bfloat16
    assert strata.randn(()).shape == ()
    r = strata.randint(5, (3, 4))
    assert r.shape == (3, 4) and r.dtype is strata.int64
    assert strata.randint(0, 10, size=(2, 2)).shape == (2, 2)
    assert strata.randint(-3, 3, (7,), dtype=strata.int32).dtype is strata.int32
    assert strata.randint(high=4, size=[6], dtype=strata.uint8).dtype is strata.uint8
    u = strata.rand(100_000, dtype=strata.float64).numpy()
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.01
    n = strata.randn(100_000).numpy()
    assert abs(n.mean()) < 0.02 and abs(n.std() - 1.0) < 0.02
    i = strata.randint(-3, 4, (10_000,)).numpy()
    assert set(np.unique(i).tolist()) == set(range(-3, 4))
    with pytest.raises(strata.StrataError, match="rand: expects a floating dtype"):
        strata.rand(3, dtype=strata.int64)
    with pytest.raises(strata.StrataError, match="randint: expects low < high, got low 3, high 2"):
        strata.randint(3, 2, (2,))
    with pytest.raises(strata.StrataError, match="does not fit dtype u8"):
        strata.randint(0, 1000, (2,), dtype=strata.uint8)
    with pytest.raises(TypeError, match="missing the required argument 'size'"):
        strata.randint(5)


@pytest.mark.parametrize("draw", [
    lambda: strata.rand(1000),
    lambda: strata.randn(999, dtype=strata.float64),
    lambda: strata.randint(-50, 50, (1001,)),
    lambda: strata.rand(3, 7, dtype=strata.bfloat16),
])
def test_manual_seed_reproducibility(draw):
    strata.manual_seed(1234)
    a, b = values(draw()), values(draw())
    strata.manual_seed(1234)
    a2, b2 = values(draw()), values(draw())
    np.testing.assert_array_equal(a, a2)
    np.testing.assert_array_equal(b, b2)
    assert not np.array_equal(a, b)  # the generator moves on between draws
    strata.manual_seed(4321)
    assert not np.array_equal(values(draw()), a)
    assert strata.initial_seed() == 4321


def test_random_values_do_not_depend_on_thread_count():
    results = []
    for n in (1, 2):
        strata.set_num_threads(n)
        assert strata.get_num_threads() == n
        strata.manual_seed(99)
        results.append((strata.rand(300_000).numpy(), strata.randn(200_001).numpy(),
                        strata.randint(0, 1 << 40, (100_003,)).numpy()))
    for x, y in zip(*results):
        np.testing.assert_array_equal(x, y)


def test_manual_seed_arguments():
    strata.manual_seed(-1)  # wraps modulo 2**64, like torch
    assert strata.initial_seed() == 2**64 - 1
    strata.manual_seed(np.int64(5))
    assert strata.initial_seed() == 5
    with pytest.raises(TypeError, match="seed must be an int"):
        strata.manual_seed(1.5)


def test_threads():
    strata.set_num_threads(1)
    assert strata.get_num_threads() == 1
    with pytest.raises(strata.StrataError, match=r"set_num_threads\(\): expected a thread count in \[1, 4096\], got 0"):
        strata.set_num_threads(0)
    assert strata.get_num_threads() == 1
    strata.set_num_threads(np.int64(2))
    assert strata.get_num_threads() == 2


@pytest.mark.parametrize("n, shown", [(-3, "-3"), (4097, "4097"), (10**9, "1000000000"), (10**12, "1000000000000"),
                                      (2**63, "an int of 64 bits"), (10**30, "an int of 100 bits"),
                                      (-(10**30), "a negative int of 100 bits"), (10**10000, "an int of 33220 bits")],
                         ids=["-3", "4097", "1e9", "1e12", "2**63", "1e30", "-1e30", "1e10000"])
def test_thread_counts_are_bounded_with_one_message(n, shown):
    strata.set_num_threads(2)
    # A ValueError (not pybind's TypeError about incompatible arguments) even beyond C's int.
    with pytest.raises(ValueError) as info:
        strata.set_num_threads(n)
    assert isinstance(info.value, strata.StrataValueError)
    assert str(info.value) == f"set_num_threads(): expected a thread count in [1, 4096], got {shown}"
    assert strata.get_num_threads() == 2
    with pytest.raises(TypeError, match="n must be an int, got float"):
        strata.set_num_threads(2.0)
    with pytest.raises(TypeError, match="n must be an int, got bool"):
        strata.set_num_threads(True)


def test_messages_cut_long_values_and_escape_nul_bytes():
    with pytest.raises(strata.StrataError) as info:
        strata.zeros(2, dtype="flo\0at" + "x" * 2_000_000)
    message = str(info.value)
    assert "unknown dtype 'flo\\x00at" in message, message[:200]
    assert "\u2026' (2000006 bytes) (expected one of f32" in message, message[:200]  # goes on after the NUL
    assert len(message) < 1000


def test_bad_strata_num_threads_names_the_variable():
    code = "import strata\ntry:\n    strata.get_num_threads()\nexcept strata.StrataError as e:\n    print(e)\n"
    for value, shown in [("1000000000", "'1000000000'"), ("0", "'0'"), ("lots", "'lots'"), ("8\n", "'8\\n'")]:
        env = {k: v for k, v in os.environ.items() if k != "STRATA_NUM_THREADS"}
        env["STRATA_NUM_THREADS"] = value
        proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert f"STRATA_NUM_THREADS: expected a thread count in [1, 4096], got {shown}" in proc.stdout, proc.stdout


# ---- errors -----------------------------------------------------------------------------------


def test_error_hierarchy():
    assert issubclass(strata.StrataError, RuntimeError)
    for cls, builtin in [(strata.StrataIndexError, IndexError), (strata.StrataTypeError, TypeError),
                         (strata.StrataValueError, ValueError)]:
        assert issubclass(cls, strata.StrataError) and issubclass(cls, builtin)
    assert strata.StrataError.__module__ == "strata"


def test_view_and_shape_errors_name_op_and_shapes():
    s = strata.arange(6, dtype=strata.float32).view(2, 3)
    with pytest.raises(strata.StrataError, match=r"view: shape \[5\] is invalid for input of 6 elements"):
        s.view(5)
    with pytest.raises(strata.StrataError, match=r"view: size \[6\] is not compatible .* sizes \[3, 2\] and strides \[1, 3\].*reshape"):
        s.t().view(6)
    assert s.t().reshape(6).tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    with pytest.raises(strata.StrataError, match="reshape: only one dimension can be -1"):
        s.reshape(-1, -1)
    with pytest.raises(strata.StrataError, match=r"expand: the size 2 at dim 0 of Tensor\[2, 3\] f32 must match 4"):
        s.expand(4, 3)
    with pytest.raises(strata.StrataError, match="permute: dim 0 appears more than once"):
        s.permute(0, 0)
    with pytest.raises(strata.StrataError, match=r"permute: got 3 dims"):
        s.permute(0, 1, 2)
    with pytest.raises(strata.StrataError, match=r"t: expects a tensor of rank <= 2, got Tensor\[1, 2, 3\] f32"):
        s.unsqueeze(0).t()
    with pytest.raises(strata.StrataError, match="narrow: start 1 \\+ length 3 exceeds size 3 of dim 1"):
        s.narrow(1, 1, 3)
    with pytest.raises(strata.StrataError, match="flatten: start_dim 1 must not come after end_dim 0"):
        s.flatten(1, 0)
    with pytest.raises(strata.StrataError, match=r"copy_: source Tensor\[4\] f32 cannot be broadcast|copy_: shapes \[2, 3\] and \[4\]"):
        s.copy_(strata.zeros(4))
    with pytest.raises(strata.StrataError, match="more than one element of the written-to tensor refers to a single "
                                                  "memory location"):  # PyTorch's message
        strata.zeros(1, 3).expand(2, 3).copy_(s)
    with pytest.raises(strata.StrataError, match=r"item: a tensor with 6 elements cannot be converted"):
        s.item()
    with pytest.raises(strata.StrataError, match="more than one value is ambiguous"):
        bool(s)
    with pytest.raises(TypeError, match="must be ints or one tuple of ints.*float"):
        s.view(2.0, 3)
    with pytest.raises(TypeError):
        strata.Tensor()


def test_index_errors_are_index_errors():
    s = strata.zeros(3, 4)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        s[3]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with size 4"):
        s[0, -5]
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 1 with size 4"):
        s[None, ..., 4]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        s[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        s[..., ...]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        s[::-1]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        s[::0]
    with pytest.raises(IndexError, match="tensors used as indices must be long, int, byte or bool tensors"):
        s[s]
    with pytest.raises(IndexError, match="only integers, slices"):
        s[0.5]
    with pytest.raises(TypeError, match="slice indices must be integers"):
        s[0.5:]
    with pytest.raises(strata.StrataIndexError, match=r"Dimension out of range|dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"):
        s.size(2)
    with pytest.raises(IndexError, match="out of range"):
        s.stride(-3)
    with pytest.raises(IndexError, match="out of range"):
        s.transpose(0, 2)
    with pytest.raises(IndexError, match="out of range"):
        s.unsqueeze(3)
    with pytest.raises(IndexError, match="out of range"):
        s.squeeze(2)
    with pytest.raises(IndexError, match=r"select\(\): index 3 out of range"):
        s.select(0, 3)
    with pytest.raises(IndexError, match=r"start out of range \(expected to be in range of \[-4, 4\], but got 5\)"):
        s.narrow(1, 5, 0)
    with pytest.raises(IndexError, match="but the tensor has no dimensions"):
        strata.tensor(1.0).size(0)
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 0"):
        strata.tensor(1.0)[0]
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(strata.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(strata.tensor(1.0))
    with pytest.raises(strata.StrataError):  # also a StrataError
        s[7]


def test_to_accepts_dtype_tensor_and_cpu():
    s = strata.arange(4)
    assert s.to(strata.float32).dtype is strata.float32
    assert s.to(strata.zeros(1, dtype=strata.uint8)).dtype is strata.uint8
    assert s.to(dtype=strata.int64).data_ptr() == s.data_ptr()  # no copy when it already matches
    assert s.to(strata.int64, copy=True).data_ptr() != s.data_ptr()
    assert s.to("cpu").data_ptr() == s.data_ptr()
    assert s.float().dtype is strata.float32 and s.double().dtype is strata.float64
    assert s.long().dtype is strata.int64 and s.int().dtype is strata.int32
    assert s.bool().dtype is strata.bool and s.bfloat16().dtype is strata.bfloat16
    assert s.byte().dtype is strata.uint8
    with pytest.raises(strata.StrataError, match="unknown dtype 'cuda'"):
        s.to("cuda")


# ---- packaging --------------------------------------------------------------------------------


def test_installed_extension_loads_outside_the_source_tree(tmp_path):
    code = "import strata, numpy; t = strata.ones(2, 2); print(strata._C.__file__, t.numpy().sum())"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin"})
    so_path, total = out.stdout.split()
    assert float(total) == 4.0
    assert not pathlib.Path(so_path).resolve().is_relative_to(pathlib.Path(__file__).resolve().parents[2] / "python")
    if shutil.which("ldd"):
        ldd = subprocess.run(["ldd", so_path], capture_output=True, text=True, check=True,
                             env={"PATH": "/usr/bin:/bin"})
        assert "not found" not in ldd.stdout, ldd.stdout

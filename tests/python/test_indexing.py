"""Issue 26 part 2: indexing as PyTorch 2.13's. A table of indexing expressions (basic, advanced,
masks, several index tensors, mixed with slices, None and Ellipsis) is read and written on both
libraries and compared: values, shapes, dtypes and gradients; then the indexed ops (masked_fill,
masked_select, scatter/scatter_add/scatter_reduce, index_add, index_put, nonzero, one_hot,
take_along_dim) and their in-place forms, and the errors bad input raises."""

import numpy as np
import pytest
import torch

import strata
import strata.nn.functional as SF

LIBS = (strata, torch)


def data(shape, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).astype(dtype)


def both(array):
    """The same values as a strata and a torch tensor."""
    return strata.tensor(array.copy()), torch.tensor(array.copy())


def leaves(array):
    s, t = both(array)
    return s.requires_grad_(), t.requires_grad_()


def np_of(x):
    return x.detach().numpy() if isinstance(x, torch.Tensor) else x.numpy()


def same(s, t, rtol=1e-12):
    assert isinstance(s, strata.Tensor), type(s)
    assert str(s.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (s.dtype, t.dtype)
    assert tuple(s.shape) == tuple(t.shape), (tuple(s.shape), tuple(t.shape))
    np.testing.assert_allclose(np_of(s).astype(np.float64), np_of(t).astype(np.float64), rtol=rtol, atol=1e-12)


def backward_both(s_out, t_out, seed=7):
    """Backpropagates the same random weighting of both outputs."""
    w = data(tuple(t_out.shape), seed)
    (s_out * strata.tensor(w)).sum().backward()
    (t_out * torch.tensor(w)).sum().backward()


# ---- reads ------------------------------------------------------------------------------------------

# name -> (shape, key builder: lib -> key). Every entry is a key a PyTorch user types.
READS = {
    "int": ((4, 5), lambda L: 2),
    "negative_int_pair": ((4, 5), lambda L: (-1, 3)),
    "slice_step": ((6, 5), lambda L: slice(1, None, 2)),
    "none_ellipsis": ((3, 4, 5), lambda L: (None, ..., 1)),
    "list": ((5, 3), lambda L: [0, 4, 4, 1]),
    "tensor_2d": ((5, 3), lambda L: L.tensor([[0, 1], [4, -1]])),
    "int32_tensor": ((5, 3), lambda L: L.tensor([3, 0], dtype=L.int32)),
    "bool_mask_1d": ((4, 3), lambda L: L.tensor([True, False, True, True])),
    "bool_mask_full": ((3, 4), lambda L: L.tensor(data((3, 4), 1) > 0)),
    "bool_list": ((3, 2), lambda L: [True, False, True]),
    "slice_then_tensor": ((3, 5, 2), lambda L: (slice(None), L.tensor([4, 0, 0]))),
    "two_adjacent_broadcast": ((3, 5, 4), lambda L: (slice(None), L.tensor([[0], [2]]), L.tensor([1, 3, 0]))),
    "two_separated": ((3, 4, 5), lambda L: (L.tensor([0, 2]), slice(None), L.tensor([1, 4]))),
    "int_separates_tensors": ((3, 4, 5, 2), lambda L: (L.tensor([0, 2]), 1, slice(1, 3), L.tensor([1, 0]))),
    "int_and_tensor": ((3, 4, 5), lambda L: (slice(None), 0, L.tensor([1, 2]))),
    "mask_and_tensor": ((3, 4), lambda L: (L.tensor([True, False, True]), L.tensor([3, 0]))),
    "ellipsis_tensor": ((2, 3, 4), lambda L: (..., L.tensor([0, 3, 3]))),
    "none_and_tensors": ((3, 4), lambda L: (None, L.tensor([1, 2]), None, L.tensor([0, 3]))),
    "bool_scalar": ((2, 3), lambda L: True),
    "false_scalar": ((2, 3), lambda L: (False, 0)),
    "zero_dim_int_tensor": ((4, 2), lambda L: L.tensor(-2)),
    "empty_list": ((4, 2), lambda L: L.tensor([], dtype=L.int64)),
    "mask_2d_then_slice": ((2, 3, 4), lambda L: (L.tensor(data((2, 3), 2) > 0), slice(1, 3))),
}


@pytest.mark.parametrize("name", sorted(READS))
def test_reads_and_gradients_match_torch(name):
    shape, key = READS[name]
    s, t = leaves(data(shape))
    s_out, t_out = s[key(strata)], t[key(torch)]
    same(s_out, t_out)
    backward_both(s_out, t_out)
    same(s.grad, t.grad)


def test_basic_index_is_a_view_and_advanced_a_copy():
    s = strata.zeros(4, 3)
    v = s[1:3, None]
    v[0, 0, 1] = 5.0
    assert s[1, 1].item() == 5.0
    c = s[[1, 2]]
    c[0, 0] = 7.0
    assert s[1, 0].item() == 0.0


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool", "float16"])
def test_reads_on_other_dtypes(dtype):
    s, t = both(np.abs(data((4, 3))) * 3)  # non-negative: float -> uint8 of negatives is not the point here
    s, t = s.to(getattr(strata, dtype)), t.to(getattr(torch, dtype))
    for key in (lambda L: L.tensor([3, 1, 3]), lambda L: (slice(None), L.tensor([True, False, True]))):
        same(s[key(strata)], t[key(torch)])


# ---- writes -----------------------------------------------------------------------------------------

# name -> (shape, key builder, value builder: lib -> value)
WRITES = {
    "int_number": ((4, 3), lambda L: 1, lambda L: 2.5),
    "slice_tensor_value": ((4, 3), lambda L: slice(1, 3), lambda L: L.tensor([1.0, 2.0, 3.0], dtype=L.float64)),
    "list_number": ((5,), lambda L: [0, 3], lambda L: -1.0),
    "tensor_broadcast_value": ((4, 3), lambda L: L.tensor([2, 0]), lambda L: L.tensor([[9.0], [8.0]], dtype=L.float64)),
    "mask_number": ((3, 4), lambda L: L.tensor(data((3, 4), 3) > 0), lambda L: 0.0),
    "mask_values": ((3, 4), lambda L: L.tensor(data((3, 4), 3) > 0),
                    lambda L: L.arange(int((data((3, 4), 3) > 0).sum()), dtype=L.float64)),
    "two_tensors": ((3, 4), lambda L: (L.tensor([0, 2]), L.tensor([3, 1])), lambda L: L.tensor([5.0, 6.0], dtype=L.float64)),
    "separated": ((3, 4, 5), lambda L: (L.tensor([0, 2]), slice(None), L.tensor([1, 4])), lambda L: 4.0),
    "basic_int_value_converted": ((4,), lambda L: slice(1, 3), lambda L: L.tensor([7, 8])),
    "bool_scalar": ((2, 3), lambda L: True, lambda L: 1.0),
    "ellipsis_none": ((2, 3), lambda L: (..., None, 1), lambda L: L.tensor([[3.0], [4.0]], dtype=L.float64)),
}


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_match_torch(name):
    shape, key, value = WRITES[name]
    s, t = both(data(shape))
    s[key(strata)] = value(strata)
    t[key(torch)] = value(torch)
    same(s, t)


def test_write_into_int_tensor_through_mask_and_list():
    s, t = both(np.arange(6).reshape(2, 3))
    for L, x in ((strata, s), (torch, t)):
        x[x > 2] = 0
        x[[1, 0], [0, 0]] = 9
    same(s, t)


def test_index_put_accumulates_duplicates_like_torch():
    idx = np.array([1, 3, 1, 1])
    vals = data((4, 2), 4)
    s, t = both(np.zeros((5, 2)))
    s.index_put_((strata.tensor(idx),), strata.tensor(vals), accumulate=True)
    t.index_put_((torch.tensor(idx),), torch.tensor(vals), accumulate=True)
    same(s, t)


def test_writes_into_tensors_that_require_grad_raise():
    s = strata.zeros(3).requires_grad_()
    for write in (lambda x: x.__setitem__(0, 1.0), lambda x: x.__setitem__(strata.tensor([True, False, True]), 1.0),
                  lambda x: x.masked_fill_(strata.tensor([True, False, True]), 1.0),
                  lambda x: x.index_put_((strata.tensor([0]),), strata.ones(1))):
        with pytest.raises(strata.StrataError, match="leaf Variable that requires grad"):
            write(s)
    # Into a non-leaf, or a value that requires grad: recorded (tests/python/test_inplace_autograd.py).
    grads = []
    for L in (strata, torch):
        leaf = L.tensor([1.0, 2.0, 3.0]).requires_grad_()
        h = leaf * 2
        h[L.tensor([0, 1])] = 1.0
        buf = L.zeros(3)
        buf[0:2] = leaf[0:2]
        (h * buf).sum().backward()
        grads.append(leaf.grad.tolist())
    assert grads[0] == grads[1]
    with strata.no_grad():
        s[strata.tensor([0, 2])] = 4.0
    assert s.tolist() == [4.0, 0.0, 4.0]


# ---- the indexed ops --------------------------------------------------------------------------------

def idx(L, values, shape=None):
    t = L.tensor(np.array(values))
    return t.reshape(shape) if shape is not None else t


SCATTER_INDEX = [[0, 0, 2, 1], [0, 2, 2, 1], [1, 0, 2, 0]]

# name -> (float inputs (numpy), op: (lib, *tensors) -> output)
OPS = {
    "masked_fill_scalar": ([data((3, 4))], lambda L, x: x.masked_fill(L.tensor([True, False, False, True]), -2.0)),
    "masked_fill_tensor": ([data((3, 4)), np.array(1.5)],
                           lambda L, x, v: L.masked_fill(x, L.tensor(data((3, 4), 5) > 0), v)),
    "masked_fill_broadcast_self": ([data((4,))], lambda L, x: L.masked_fill(x, L.tensor(data((2, 4), 6) > 0), 3.0)),
    "masked_select": ([data((3, 4))], lambda L, x: L.masked_select(x, L.tensor(data((4,), 8) > 0))),
    "scatter_src": ([data((3, 4)), data((2, 4), 1)],  # torch's backward needs src of index's shape
                    lambda L, x, s: L.scatter(x, 0, idx(L, [[0, 1, 2, 0], [2, 0, 1, 1]]), s)),
    "scatter_value": ([data((3, 4))], lambda L, x: x.scatter(1, idx(L, [[3, 0], [1, 1], [2, 2]]), 0.5)),
    "scatter_add": ([data((3, 4)), data((3, 4), 1)], lambda L, x, s: L.scatter_add(x, 0, idx(L, SCATTER_INDEX), s)),
    "index_add_alpha": ([data((3, 4)), data((3, 3), 1)],
                        lambda L, x, s: L.index_add(x, 1, idx(L, [3, 0, 3]), s, alpha=-2.0)),
    "index_put_accumulate": ([data((5, 3)), data((4, 3), 1)],
                             lambda L, x, v: L.index_put(x, (idx(L, [1, 3, 1, 0]),), v, accumulate=True)),
    "index_put_two_tensors": ([data((4, 5)), data((2,), 1)],
                              lambda L, x, v: x.index_put((idx(L, [0, 2]), idx(L, [4, 1])), v)),
    "take_along_dim": ([data((3, 4))], lambda L, x: L.take_along_dim(x, idx(L, [[3, 1]]), dim=1)),
    "take_along_dim_argsort": ([data((3, 4))], lambda L, x: L.take_along_dim(x, L.argsort(x.detach(), dim=0), dim=0)),
    "take_along_dim_flat": ([data((2, 3))], lambda L, x: L.take_along_dim(x, idx(L, [5, 0, 5]))),
}
for reduce in ("sum", "prod", "mean", "amax", "amin"):
    for include_self in (True, False):
        OPS[f"scatter_reduce_{reduce}_{include_self}"] = (
            [data((3, 4)), data((3, 4), 1)],
            lambda L, x, s, r=reduce, i=include_self: x.scatter_reduce(0, idx(L, SCATTER_INDEX), s, r, include_self=i))


@pytest.mark.parametrize("name", sorted(OPS))
def test_indexed_ops_and_gradients_match_torch(name):
    inputs, op = OPS[name]
    pairs = [leaves(a) for a in inputs]
    s_out = op(strata, *[p[0] for p in pairs])
    t_out = op(torch, *[p[1] for p in pairs])
    same(s_out, t_out)
    backward_both(s_out, t_out)
    for s, t in pairs:
        same(s.grad, t.grad)


def test_nonzero_and_one_hot_match_torch():
    a = (data((3, 4), 9) > 0.3) * data((3, 4), 10)
    s, t = both(a)
    same(strata.nonzero(s), torch.nonzero(t))
    for u, v in zip(s.nonzero(as_tuple=True), t.nonzero(as_tuple=True)):
        same(u, v)
    for u, v in zip(strata.nonzero(strata.tensor(2.0), as_tuple=True), torch.nonzero(torch.tensor(2.0), as_tuple=True)):
        same(u, v)
    labels = np.array([[2, 0], [3, 2]])
    same(SF.one_hot(strata.tensor(labels)), torch.nn.functional.one_hot(torch.tensor(labels)))
    same(SF.one_hot(strata.tensor(labels), num_classes=6), torch.nn.functional.one_hot(torch.tensor(labels), 6))


def test_in_place_methods_match_torch():
    s, t = both(data((3, 4)))
    for L, x in ((strata, s), (torch, t)):
        x.masked_fill_(L.tensor([True, False, False, True]), 1.0)
        x.scatter_(0, idx(L, [[2, 1, 0, 0]]), L.tensor(data((1, 4), 2)))
        x.scatter_(1, idx(L, [[1], [0], [3]]), -1.0)
        x.scatter_add_(0, idx(L, SCATTER_INDEX), L.tensor(data((3, 4), 3)))
        x.index_add_(0, idx(L, [2, 2]), L.tensor(data((2, 4), 4)), alpha=0.5)
        x.index_put_((idx(L, [0, 1]), idx(L, [2, 2])), L.tensor(data((2,), 5)), accumulate=True)
    same(s, t)


def test_integer_scatter_reduce_mean_rounds_like_torch():
    x, src, index = np.array([[1, 2], [3, 4]]), np.array([[2, 3], [4, 4]]), np.array([[0, 0], [0, 0]])
    for r in ("mean", "sum", "prod", "amax", "amin"):
        same(strata.tensor(x).scatter_reduce(0, strata.tensor(index), strata.tensor(src), r),
             torch.tensor(x).scatter_reduce(0, torch.tensor(index), torch.tensor(src), r))


# ---- bad input ----------------------------------------------------------------------------------------

BAD = {
    "index_out_of_range": lambda L, x: x[L.tensor([0, 4])],
    "int_out_of_range": lambda L, x: x[:, 5],
    "float_index_tensor": lambda L, x: x[L.tensor([0.0])],
    "float_key": lambda L, x: x[1.5],
    "mask_shape": lambda L, x: x[L.tensor([True, False])],
    "no_broadcast": lambda L, x: x[L.tensor([0, 1]), L.tensor([0, 1, 2])],
    "too_many": lambda L, x: x[0, 0, 0],
    "negative_step": lambda L, x: x[::-1],
    "setitem_value_shape": lambda L, x: x.__setitem__(L.tensor([0, 1]), L.ones(3, dtype=L.float64)),
    "setitem_advanced_value_dtype": lambda L, x: x.__setitem__(L.tensor([0, 1]), L.tensor([7, 8])),
    "setitem_out_of_range": lambda L, x: x.__setitem__(L.tensor([7]), 1.0),
    "index_put_dtype": lambda L, x: x.index_put_((L.tensor([0]),), L.ones(1, dtype=L.float32)),
    "masked_fill_float_mask": lambda L, x: x.masked_fill(L.ones(4, dtype=L.float64), 1.0),
    "masked_fill_value_dims": lambda L, x: x.masked_fill(L.ones(4, dtype=L.bool), L.ones(2, dtype=L.float64)),
    "masked_fill_inplace_broadcast": lambda L, x: L.zeros(4, dtype=L.float64).masked_fill_(L.ones(3, 4, dtype=L.bool), 1.0),
    "scatter_out_of_range": lambda L, x: x.scatter(0, L.tensor([[0, 3]]), 1.0),
    "scatter_rank": lambda L, x: x.scatter(0, L.tensor([0]), 1.0),
    "scatter_src_dtype": lambda L, x: x.scatter(0, L.tensor([[0]]), L.ones(1, 1, dtype=L.float32)),
    "scatter_reduce_unknown": lambda L, x: x.scatter_reduce(0, L.tensor([[0]]), x, "median"),
    "index_add_shape": lambda L, x: x.index_add(0, L.tensor([0, 1]), L.ones(3, 4, dtype=L.float64)),
    "take_along_dim_rank": lambda L, x: L.take_along_dim(x, L.tensor([0]), dim=1),
    "one_hot_too_few_classes": lambda L, x: (SF if L is strata else torch.nn.functional).one_hot(L.tensor([0, 3]), 2),
    "one_hot_negative": lambda L, x: (SF if L is strata else torch.nn.functional).one_hot(L.tensor([-1, 3])),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises_the_builtin_torch_raises(name):
    s, t = both(data((3, 4)))
    with pytest.raises(Exception) as te:
        BAD[name](torch, t)
    builtin = next(c for c in (IndexError, TypeError, ValueError, RuntimeError) if isinstance(te.value, c))
    with pytest.raises(builtin):
        BAD[name](strata, s)

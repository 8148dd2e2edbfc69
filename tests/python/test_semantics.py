"""Issue 26 part 1: tensor semantics as PyTorch 2.13's. Comparisons and logical ops return bool
tensors (never Python identity), integer and bool tensors have arithmetic and reductions, type
promotion follows torch.result_type for every operand pair (tensors with dims, zero-dim tensors,
Python numbers), float16 is stored and converted, and the index-returning reductions (argmax,
argmin, max/min(dim), topk, sort, any, all) match torch in values, indices, dtypes and gradients."""

import itertools
import pickle

import numpy as np
import pytest
import torch

import strata

DTYPES = ["float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8", "bool"]
S = {name: getattr(strata, name) for name in DTYPES}
T = {name: getattr(torch, name) for name in DTYPES}


def name_of(dtype):
    return str(dtype).split(".")[1]


def pair(values, dtype, shape=None):
    """The same values as a strata and a torch tensor of `dtype` (through float64 / int64)."""
    t = torch.tensor(values).to(T[dtype])
    if shape is not None:
        t = t.reshape(shape)
    s = strata.tensor(t.to(torch.float32).numpy() if dtype == "bfloat16" else t.numpy()).to(S[dtype])
    return s, t


def as_np(x):
    """Values as float64 NumPy (bf16 and f16 widened exactly), for either library."""
    if isinstance(x, strata.Tensor):
        x = x.to(strata.float32) if x.dtype in (strata.bfloat16,) else x
        return x.numpy().astype(np.float64)
    x = x.detach()
    return (x.to(torch.float32) if x.dtype == torch.bfloat16 else x).numpy().astype(np.float64)


def same(s, t, rtol=0.0):
    assert isinstance(s, strata.Tensor)
    assert name_of(s.dtype) == name_of(t.dtype), (s.dtype, t.dtype)
    assert tuple(s.shape) == tuple(t.shape)
    np.testing.assert_allclose(as_np(s), as_np(t), rtol=rtol, equal_nan=True)


def outcome(fn, *args):
    """fn's result, or the exception type's category: 'error'."""
    try:
        return fn(*args)
    except Exception:  # noqa: BLE001 - any refusal counts; which builtin is checked elsewhere
        return "error"


def like_torch(fs, ft, s_args, t_args, where, rtol=0.0):
    """fs(*s_args) refuses where ft(*t_args) does and otherwise matches it (same()). True when
    torch computed something."""
    rt, rs = outcome(ft, *t_args), outcome(fs, *s_args)
    if isinstance(rt, str):
        assert isinstance(rs, str), f"{where}: torch refuses, strata gave {rs}"
        return False
    assert not isinstance(rs, str), f"{where}: strata refuses, torch gave {rt}"
    same(rs, rt, rtol=rtol)
    return True


# ---- the promotion table --------------------------------------------------------------------------

BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "truediv": lambda a, b: a / b,
    "floordiv": lambda a, b: a // b,
    "mod": lambda a, b: a % b,
    "pow": lambda a, b: a ** b,
    "eq": lambda a, b: a == b,
    "lt": lambda a, b: a < b,
    "and": lambda a, b: a & b,
    "xor": lambda a, b: a ^ b,
}
TORCH_ONLY = {"maximum": torch.maximum, "where": lambda a, b: torch.where(torch.tensor(True), a, b)}
STRATA_ONLY = {"maximum": strata.maximum, "where": lambda a, b: strata.where(strata.tensor(True), a, b)}


def operand(kind, dtype):
    """(strata, torch) operands: a tensor with dims, a zero-dim tensor, or a Python number."""
    if kind == "dims":
        return pair([1, 2, 3], dtype)
    if kind == "zero_dim":
        s, t = pair([2], dtype)
        return s.reshape(()), t.reshape(())
    value = {"bool": True, "int": 2, "float": 1.5}[kind]
    return value, value


KINDS = ["dims", "zero_dim"]
NUMBERS = ["bool", "int", "float"]


@pytest.mark.parametrize("op", sorted(BINARY) + ["maximum", "where"])
def test_result_dtypes_match_pytorch_for_every_operand_pair(op):
    checked = 0
    combos = [(ka, da, kb, db) for ka, kb in itertools.product(KINDS, KINDS) for da in DTYPES for db in DTYPES]
    combos += [(ka, da, n, None) for ka in KINDS for da in DTYPES for n in NUMBERS]
    combos += [(n, None, kb, db) for kb in KINDS for db in DTYPES for n in NUMBERS]
    for ka, da, kb, db in combos:
        (sa, ta), (sb, tb) = operand(ka, da), operand(kb, db)
        if op in ("maximum",) and (ka in NUMBERS or kb in NUMBERS):
            continue  # torch.maximum takes tensors only
        fs = STRATA_ONLY.get(op) or BINARY[op]
        ft = TORCH_ONLY.get(op) or BINARY[op]
        rt = outcome(ft, ta, tb)
        rs = outcome(fs, sa, sb)
        where = f"{op}: {ka} {da} with {kb} {db}"
        if isinstance(rt, str):
            assert isinstance(rs, str), f"{where}: torch refuses, strata gave {rs.dtype}"
            continue
        assert not isinstance(rs, str), f"{where}: strata refused, torch gave {rt.dtype}"
        assert name_of(rs.dtype) == name_of(rt.dtype), where
        if not rt.dtype.is_floating_point or rt.dtype == torch.float64 or op in ("pow",):
            np.testing.assert_allclose(as_np(rs), as_np(rt), rtol=1e-6, equal_nan=True, err_msg=where)
        checked += 1
    assert checked > 50


def test_result_type_promote_types_and_can_cast_match_pytorch():
    for a, b in itertools.product(DTYPES, DTYPES):
        assert strata.promote_types(S[a], S[b]) is S[name_of(torch.promote_types(T[a], T[b]))], (a, b)
        assert strata.can_cast(S[a], S[b]) == torch.can_cast(T[a], T[b]), (a, b)
    for ka, kb in itertools.product(KINDS + NUMBERS, KINDS):
        for da, db in itertools.product(DTYPES, DTYPES):
            (sa, ta), (sb, tb) = operand(ka, da), operand(kb, db)
            want = torch.result_type(ta, tb)
            assert strata.result_type(sa, sb) is S[name_of(want)], (ka, da, kb, db)
    with pytest.raises(TypeError, match="must be Tensor or a number"):
        strata.result_type(strata.ones(2), "a")
    with pytest.raises(TypeError):
        strata.promote_types(strata.float32, 3)


# ---- the one-line habits of issue 26 --------------------------------------------------------------

def test_one_liners():
    pred, y = [0, 2, 1, 1, 3], [0, 1, 1, 1, 3]
    same((strata.tensor(pred) == strata.tensor(y)).sum(), (torch.tensor(pred) == torch.tensor(y)).sum())
    same((strata.tensor(pred) == strata.tensor(y)).float().mean(), (torch.tensor(pred) == torch.tensor(y)).float().mean())
    a, b = np.array([-1.0, 0.5, 2.0]), np.array([0.0, 0.7, 3.0])
    same((strata.tensor(a) > 0) & (strata.tensor(b) < 1), (torch.tensor(a) > 0) & (torch.tensor(b) < 1))
    same(strata.arange(5).sum(), torch.arange(5).sum())
    same(strata.ones(2) + strata.ones(2, dtype=strata.float64), torch.ones(2) + torch.ones(2, dtype=torch.float64))
    same(strata.tensor([1, 2]) + 1.5, torch.tensor([1, 2]) + 1.5)
    assert isinstance(strata.tensor([1.0, 2.0]) == strata.tensor([1.0, 2.0]), strata.Tensor)
    assert (strata.tensor([1.0, 2.0]) == strata.tensor([1.0, 2.0])).all()
    logits = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    same(strata.tensor(logits).argmax(1), torch.tensor(logits).argmax(1))
    labels = [0, 1, 2, 3, 0, 1]
    correct = (strata.tensor(logits).argmax(dim=1) == strata.tensor(labels)).sum().item()
    assert correct == (torch.tensor(logits).argmax(dim=1) == torch.tensor(labels)).sum().item()
    assert isinstance(correct, int)
    same(~(strata.tensor(a) > 0), ~(torch.tensor(a) > 0))
    same(strata.tensor(a).abs(), torch.tensor(a).abs())
    same(-strata.arange(3), -torch.arange(3))
    same(strata.arange(7) // 2, torch.arange(7) // 2)
    same(strata.arange(-3, 4) % 3, torch.arange(-3, 4) % 3)
    same(2 ** strata.arange(4), 2 ** torch.arange(4))
    same(strata.arange(6).reshape(2, 3).max(), torch.arange(6).reshape(2, 3).max())
    same(strata.tensor([True, False, True]).sum(), torch.tensor([True, False, True]).sum())


def test_comparisons_are_tensors_and_hashing_stays_identity():
    x = strata.tensor([1.0, 2.0])
    assert hash(x) == hash(x) and hash(x) != hash(strata.tensor([1.0, 2.0]))
    assert {x: 1}[x] == 1
    assert (x == None) is False and (x != None) is True  # noqa: E711 - PyTorch's behaviour
    assert (x == "a") is False
    for op in ("eq", "ne", "lt", "le", "gt", "ge"):
        s, t = getattr(strata, op)(x, 1.5), getattr(torch, op)(torch.tensor([1.0, 2.0]), 1.5)
        same(s, t)
        same(getattr(x, op)(strata.tensor([2.0])), getattr(torch.tensor([1.0, 2.0]), op)(torch.tensor([2.0])))
    same(1 < x, 1 < torch.tensor([1.0, 2.0]))
    same(strata.greater_equal(x, 2), torch.greater_equal(torch.tensor([1.0, 2.0]), 2))
    xr = strata.tensor([1.0, 2.0]).requires_grad_()
    assert not (xr > 1).requires_grad
    nan = float("nan")
    same(strata.tensor([nan]) == strata.tensor([nan]), torch.tensor([nan]) == torch.tensor([nan]))
    with pytest.raises(strata.StrataError, match="cannot broadcast"):
        strata.ones(2) == strata.ones(3)
    with pytest.raises(TypeError, match="must be Tensor or a number"):
        strata.eq(strata.ones(2), "a")


def test_logical_and_bitwise_ops_match_pytorch():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=4)
    a[0, 0] = 0.0
    for op in ("logical_and", "logical_or", "logical_xor"):
        same(getattr(strata, op)(strata.tensor(a), strata.tensor(b)), getattr(torch, op)(torch.tensor(a), torch.tensor(b)))
        same(getattr(strata.tensor(a), op)(strata.tensor(b) > 0), getattr(torch.tensor(a), op)(torch.tensor(b) > 0))
    same(strata.logical_not(strata.tensor(a)), torch.logical_not(torch.tensor(a)))
    i, j = [12, -7, 255, 0], [10, 3, 1, -1]
    for dtype in ("int32", "int64", "uint8", "bool"):
        (si, ti), (sj, tj) = pair(i, dtype), pair(j, dtype)
        for f in (lambda p, q: p & q, lambda p, q: p | q, lambda p, q: p ^ q, lambda p, q: ~p, lambda p, q: p & 1,
                  lambda p, q: 3 | p, lambda p, q: p ^ True):
            like_torch(f, f, (si, sj), (ti, tj), f"bitwise on {dtype}")
    with pytest.raises(RuntimeError, match="only integer and bool"):
        strata.ones(2) & strata.ones(2)
    with pytest.raises(TypeError, match="integer and Boolean"):
        ~strata.ones(2)


# ---- integer and bool arithmetic ------------------------------------------------------------------

INT_OPS = {name: BINARY[name] for name in ("add", "sub", "mul", "truediv", "floordiv", "mod")} | {
    "pow": lambda a, b: a ** b.abs() if not isinstance(b, (int, float)) else a ** abs(b),
    "neg": lambda a, b: -a,
    "abs": lambda a, b: a.abs(),
    "maximum": lambda a, b: torch.maximum(a, b) if isinstance(a, torch.Tensor) else strata.maximum(a, b),
    "minimum": lambda a, b: torch.minimum(a, b) if isinstance(a, torch.Tensor) else strata.minimum(a, b),
    "add_alpha": lambda a, b: a.add(b, alpha=3),
    "rsub_number": lambda a, b: 7 - a,
    "rfloordiv_number": lambda a, b: 7 // b,
}


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("op", sorted(INT_OPS))
def test_integer_and_bool_arithmetic_matches_pytorch(op, dtype):
    a_vals, b_vals = [7, -7, 100, 0, 3, 2**31 - 1 if dtype == "int64" else 5], [2, 3, -3, 5, 1, 2]
    (sa, ta), (sb, tb) = pair(a_vals, dtype), pair(b_vals, dtype)
    like_torch(INT_OPS[op], INT_OPS[op], (sa, sb), (ta, tb), f"{op} on {dtype}", rtol=1e-6)


def test_integer_overflow_wraps_and_zero_division_raises():
    same(strata.tensor([2**31 - 1], dtype=strata.int32) + 1, torch.tensor([2**31 - 1], dtype=torch.int32) + 1)
    same(strata.tensor([3, 7], dtype=strata.uint8) * 100, torch.tensor([3, 7], dtype=torch.uint8) * 100)
    same(strata.tensor([3]) ** 40, torch.tensor([3]) ** 40)
    for f in (lambda a: a // 0, lambda a: a % 0, lambda a: a // strata.tensor([1, 0]) if isinstance(a, strata.Tensor)
              else a // torch.tensor([1, 0])):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f(torch.tensor([1, 2]))
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f(strata.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="negative integer powers"):
        strata.tensor([2]) ** -1
    with pytest.raises(RuntimeError, match="bool"):
        strata.tensor([True]) - strata.tensor([True])
    with pytest.raises(RuntimeError, match="logical_not"):
        -strata.tensor([True])
    with pytest.raises(RuntimeError, match="alpha"):
        strata.add(strata.tensor([1]), strata.tensor([1]), alpha=0.5)


def test_float_floor_division_and_remainder_match_pytorch():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-5, 5, 40), rng.uniform(-2, 2, 40)
    b[:3] = [0.0, -0.0, 2.0]
    a[2] = float("inf")
    for f in (lambda x, y: x // y, lambda x, y: x % y, lambda x, y: x.div(y, rounding_mode="floor"),
              lambda x, y: x % 1.5, lambda x, y: 2.5 // y, lambda x, y: 2.5 % y):
        for dt in ("float32", "float64"):
            same(f(strata.tensor(a).to(S[dt]), strata.tensor(b).to(S[dt])), f(torch.tensor(a).to(T[dt]), torch.tensor(b).to(T[dt])),
                 rtol=1e-6)
    x = strata.tensor([5.5, -3.2]).requires_grad_()
    xt = torch.tensor([5.5, -3.2], requires_grad=True)
    y, yt = x % 2.0, xt % 2.0
    y.sum().backward()
    yt.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy())
    with pytest.raises(RuntimeError, match="not implemented"):
        (x // 2.0).sum().backward()
    with pytest.raises(NotImplementedError, match="trunc"):
        strata.div(strata.ones(2), 2, rounding_mode="trunc")


def test_inplace_ops_follow_can_cast():
    x, xt = strata.ones(2), torch.ones(2)
    x += strata.ones(2, dtype=strata.float64)
    xt += torch.ones(2, dtype=torch.float64)
    same(x, xt)
    i = strata.tensor([1, 2])
    i += 3
    same(i, torch.tensor([4, 5]))
    with pytest.raises(RuntimeError, match="can't be cast"):
        i += 1.5
    with pytest.raises(RuntimeError, match="can't be cast"):
        i /= 2
    w = strata.ones(3).requires_grad_()
    y = w * 1.0
    y *= strata.tensor([2.0, 2.0, 2.0], dtype=strata.float64)
    y.sum().backward()
    assert w.grad.dtype is strata.float32
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0, 2.0])


# ---- reductions -------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_on_every_dtype_match_pytorch(dtype):
    values = [3, 0, 7, 1, 0, 5, 2, 9, 4, 6, 8, 1]
    s, t = pair(values, dtype, (3, 4))
    fns = [lambda x: x.sum(), lambda x: x.sum(0), lambda x: x.sum(dim=(0, 1), keepdim=True), lambda x: x.prod(),
           lambda x: x.prod(1), lambda x: x.mean(), lambda x: x.amax(1), lambda x: x.amin(0), lambda x: x.max(),
           lambda x: x.min(), lambda x: x.any(), lambda x: x.all(1), lambda x: x.any(dim=0, keepdim=True),
           lambda x: x.argmax(), lambda x: x.argmin(1), lambda x: x.sum(dtype=S[dtype] if isinstance(x, strata.Tensor)
                                                                          else T[dtype])]
    for k, f in enumerate(fns):
        like_torch(f, f, (s,), (t,), f"reduction {k} on {dtype}", rtol=1e-3 if dtype in ("float16", "bfloat16") else 1e-6)
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        strata.arange(5).mean()


def test_any_all_on_empty_and_u8_and_nan():
    same(strata.zeros(0).any(), torch.zeros(0).any())
    same(strata.zeros(0).all(), torch.zeros(0).all())
    same(strata.tensor([0, 3], dtype=strata.uint8).any(), torch.tensor([0, 3], dtype=torch.uint8).any())
    same(strata.tensor([float("nan")]).all(), torch.tensor([float("nan")]).all())
    same(strata.zeros(2, 0).any(1), torch.zeros(2, 0).any(1))


def test_prod_gradient_matches_pytorch_with_zeros():
    for values in ([[2.0, 3.0, 4.0], [1.5, -2.0, 0.5]], [[2.0, 0.0, 4.0], [0.0, 0.0, 1.0]]):
        x = strata.tensor(values).requires_grad_()
        xt = torch.tensor(values, requires_grad=True)
        for f in (lambda a: a.prod(), lambda a: a.prod(1), lambda a: a.prod(0, keepdim=True)):
            x.grad, xt.grad = None, None
            f(x).sum().backward()
            f(xt).sum().backward()
            np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-6)


# ---- index-returning reductions ---------------------------------------------------------------------

def test_max_min_with_dim_return_named_tuples_like_pytorch():
    x = np.array([[1.0, 3.0, 3.0], [2.0, float("nan"), 5.0]])
    for fn in ("max", "min"):
        rs, rt = getattr(strata, fn)(strata.tensor(x), 1), getattr(torch, fn)(torch.tensor(x), 1)
        assert type(rs).__name__ == fn and rs._fields == ("values", "indices")
        same(rs.values, rt.values)
        same(rs.indices, rt.indices)
        values, indices = getattr(strata.tensor(x), fn)(dim=0, keepdim=True)
        same(values, getattr(torch.tensor(x), fn)(dim=0, keepdim=True).values)
        same(indices, getattr(torch.tensor(x), fn)(dim=0, keepdim=True).indices)
    same(strata.max(strata.tensor(x), strata.zeros(3, dtype=strata.float64)),
         torch.max(torch.tensor(x), torch.zeros(3, dtype=torch.float64)))
    same(strata.min(strata.tensor(x), strata.zeros(3, dtype=strata.float64)),
         torch.min(torch.tensor(x), torch.zeros(3, dtype=torch.float64)))
    assert pickle.loads(pickle.dumps(tuple(strata.max(strata.tensor(x), 1))))[1].dtype is strata.int64


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "uint8"])
def test_topk_sort_argsort_match_pytorch(dtype):
    rng = np.random.default_rng(5)
    values = rng.permutation(60).reshape(3, 4, 5)  # distinct: no tie order to argue about
    s, t = pair(values.tolist(), dtype)
    for f in (lambda x: x.topk(2), lambda x: x.topk(3, dim=0, largest=False), lambda x: x.sort(1),
              lambda x: x.sort(dim=-1, descending=True), lambda x: x.argsort(0), lambda x: x.argmax(2, keepdim=True)):
        rs, rt = f(s), f(t)
        if isinstance(rt, torch.Tensor):
            same(rs, rt)
        else:
            same(rs.values, rt.values)
            same(rs.indices, rt.indices)


def test_sort_is_stable_and_orders_nan_like_pytorch():
    x = [3.0, float("nan"), 1.0, 3.0, -float("inf"), 1.0, float("nan")]
    for descending in (False, True):
        rs = strata.sort(strata.tensor(x), descending=descending, stable=True)
        rt = torch.sort(torch.tensor(x), descending=descending, stable=True)
        same(rs.values, rt.values)
        same(rs.indices, rt.indices)
    bools = [True, False, True, False]
    same(strata.sort(strata.tensor(bools)).indices, torch.sort(torch.tensor(bools), stable=True).indices)


def test_values_gradients_of_index_reductions_match_pytorch():
    rng = np.random.default_rng(6)
    x = rng.normal(size=(4, 6))
    cot = rng.normal(size=(4, 6))
    fns = [lambda a: a.max(1).values, lambda a: a.min(0, keepdim=True).values, lambda a: a.topk(3).values,
           lambda a: a.topk(2, dim=0, largest=False).values, lambda a: a.sort(1, descending=True).values,
           lambda a: a.amin(1), lambda a: a.max(), lambda a: a.abs(), lambda a: -a, lambda a: a.prod(1)]
    for f in fns:
        xs, xt = strata.tensor(x).requires_grad_(), torch.tensor(x, requires_grad=True)
        ys, yt = f(xs), f(xt)
        c = cot.ravel()[: yt.numel()].reshape(tuple(yt.shape))
        ys.backward(strata.tensor(c.copy()))
        yt.backward(torch.tensor(c.copy()))
        np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-10)
    assert not strata.tensor(x).requires_grad_().max(1).indices.requires_grad


def test_index_reduction_bad_input_raises_like_pytorch():
    x = strata.ones(2, 3)
    with pytest.raises(IndexError, match="out of range"):
        x.max(2)
    with pytest.raises(IndexError, match="out of range"):
        x.argmax(-3)
    with pytest.raises(RuntimeError, match="k out of range"):
        x.topk(4)
    with pytest.raises(RuntimeError, match="bool"):
        strata.tensor([True]).argmax()
    with pytest.raises(RuntimeError, match="bool"):
        strata.tensor([True, False]).topk(1)
    with pytest.raises(RuntimeError, match="size 0"):
        strata.zeros(0, 3).argmax()
    with pytest.raises(TypeError):
        strata.topk(x, 1.5)
    with pytest.raises(TypeError, match="keepdim needs a dim"):
        strata.max(x, keepdim=True)


# ---- float16 ----------------------------------------------------------------------------------------

def test_float16_storage_and_conversion_match_pytorch_and_numpy():
    rng = np.random.default_rng(8)
    v = np.concatenate([rng.normal(scale=100.0, size=2000), rng.normal(scale=1e-5, size=2000),
                        [65504.0, 65519.0, 65520.0, 1e6, -1e6, 6e-8, 3e-8, 0.0, -0.0, np.inf, np.nan]]).astype(np.float32)
    with np.errstate(over="ignore"):  # 1e6 and 65520 overflow to inf, as intended
        v16 = v.astype(np.float16)
    h = strata.tensor(v).half()
    assert h.dtype is strata.float16 and h.element_size() == 2
    np.testing.assert_array_equal(h.numpy(), v16)
    np.testing.assert_array_equal(h.numpy(), torch.tensor(v).half().numpy())
    np.testing.assert_array_equal(strata.tensor(v).to(strata.float16).float().numpy(), v16.astype(np.float32))
    assert strata.from_numpy(v16).dtype is strata.half
    assert strata.tensor(v16).dtype is strata.float16
    assert strata.zeros(3, dtype=strata.float16).dtype is strata.float16
    assert strata.full((1,), 1.0009765625, dtype=strata.float16).item() == 1.0009765625
    assert strata.ones(2, dtype=strata.float16).tolist() == [1.0, 1.0]
    assert strata.randn(100, dtype=strata.float16).dtype is strata.float16
    assert np.asarray(strata.ones(2, dtype=strata.float16)).dtype == np.float16
    back = pickle.loads(pickle.dumps(h))
    np.testing.assert_array_equal(back.numpy(), h.numpy())
    assert repr(strata.float16) == "strata.float16" and strata.half is strata.float16


def test_float16_arithmetic_matches_pytorch():
    rng = np.random.default_rng(9)
    a, b = rng.normal(size=(8, 16)).astype(np.float32), rng.normal(size=16).astype(np.float32)
    sa, sb = strata.tensor(a).half(), strata.tensor(b).half()
    ta, tb = torch.tensor(a).half(), torch.tensor(b).half()
    for f in (lambda x, y: x + y, lambda x, y: x * y, lambda x, y: x / y, lambda x, y: x - 2.5 * y,
              lambda x, y: x > y, lambda x, y: torch.maximum(x, y) if isinstance(x, torch.Tensor) else strata.maximum(x, y),
              lambda x, y: x.sum(1), lambda x, y: x.mean(0), lambda x, y: x.amax(1), lambda x, y: x + y.float(),
              lambda x, y: x.sort(1).values, lambda x, y: x.argmax(1)):
        same(f(sa, sb), f(ta, tb), rtol=1e-3)
    x = strata.tensor(a).half().requires_grad_()
    xt = torch.tensor(a).half().requires_grad_()
    (x * sb).sum().backward()
    (xt * tb).sum().backward()
    assert x.grad.dtype is strata.float16
    np.testing.assert_array_equal(x.grad.numpy(), xt.grad.numpy())
    with pytest.raises(RuntimeError, match="f16"):
        strata.exp(sa)  # the other ops take f32/f64 and name the dtype they refuse

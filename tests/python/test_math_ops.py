"""Issue 26 part 4: the missing ops against PyTorch 2.13 — values, result dtypes, gradients and bad
input errors. Element-wise math (sin ... reciprocal, atan2, round with decimals) on every dtype."""

import numpy as np
import pytest
import torch

import strata

DTYPES = ["float32", "float64", "bfloat16", "float16", "int32", "int64", "uint8", "bool"]
S = {name: getattr(strata, name) for name in DTYPES}
T = {name: getattr(torch, name) for name in DTYPES}


def name_of(dtype):
    return str(dtype).split(".")[1]


def as_np(x):
    """Values as float64 NumPy (bf16 widened exactly), for either library."""
    if isinstance(x, strata.Tensor):
        x = x.to(strata.float32) if x.dtype == strata.bfloat16 else x
        return x.numpy().astype(np.float64)
    x = x.detach()
    return (x.to(torch.float32) if x.dtype == torch.bfloat16 else x).numpy().astype(np.float64)


def to_strata(t, requires_grad=False):
    """A strata tensor with torch tensor t's values and dtype."""
    s = strata.tensor(t.detach().to(torch.float32).numpy() if t.dtype == torch.bfloat16 else t.detach().numpy())
    s = s.to(S[name_of(t.dtype)])
    return s.requires_grad_() if requires_grad else s


def same(s, t, rtol=1e-6, atol=0.0):
    assert isinstance(s, strata.Tensor), type(s)
    assert name_of(s.dtype) == name_of(t.dtype), (s.dtype, t.dtype)
    assert tuple(s.shape) == tuple(t.shape)
    np.testing.assert_allclose(as_np(s), as_np(t), rtol=rtol, atol=atol, equal_nan=True)


def raises_like(fs, ft):
    """Both refuse; strata's error derives from the builtin class torch raised."""
    with pytest.raises(Exception) as te:
        ft()
    with pytest.raises(Exception) as se:
        fs()
    expected = type(te.value) if type(te.value) in (TypeError, ValueError, IndexError) else RuntimeError
    assert isinstance(se.value, expected), (se.value, te.value)
    return str(se.value)


# ---- element-wise math --------------------------------------------------------------------------

# name -> (values inside the domain, tolerance for f32)
UNARY = {
    "sin": [-3.0, -0.5, 0.0, 1.0, 2.5],
    "cos": [-3.0, -0.5, 0.0, 1.0, 2.5],
    "tan": [-1.2, -0.5, 0.0, 0.3, 1.0],
    "asin": [-0.9, -0.5, 0.0, 0.3, 0.8],
    "acos": [-0.9, -0.5, 0.0, 0.3, 0.8],
    "atan": [-3.0, -0.5, 0.0, 1.0, 4.0],
    "sinh": [-2.0, -0.5, 0.0, 1.0, 1.5],
    "cosh": [-2.0, -0.5, 0.0, 1.0, 1.5],
    "floor": [-2.5, -0.7, 0.0, 1.2, 2.5],
    "ceil": [-2.5, -0.7, 0.0, 1.2, 2.5],
    "trunc": [-2.5, -0.7, 0.0, 1.2, 2.5],
    "round": [-2.5, -0.5, 0.5, 1.5, 2.6],
    "sign": [-2.0, -0.0, 0.0, 0.5, 3.0],
    "expm1": [-2.0, -1e-7, 0.0, 1e-6, 1.5],
    "log1p": [-0.5, -1e-7, 0.0, 1e-6, 2.0],
    "rsqrt": [0.25, 0.5, 1.0, 2.0, 9.0],
    "erf": [-2.0, -0.5, 0.0, 0.3, 1.5],
    "square": [-2.0, -0.5, 0.0, 0.3, 1.5],
    "reciprocal": [-2.0, -0.5, 0.25, 1.0, 3.0],
}
SMOOTH = ["sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "expm1", "log1p", "rsqrt", "erf", "square",
          "reciprocal"]


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary_math_values_and_dtypes_match_pytorch(name, dtype):
    t = torch.tensor(UNARY[name], dtype=torch.float64)
    if dtype in ("int32", "int64"):
        t = torch.tensor([-3, -1, 0, 1, 2])
    elif dtype == "uint8":
        t = torch.tensor([0, 1, 2, 3, 200])
    elif dtype == "bool":
        t = torch.tensor([True, False, True])
    t = t.to(T[dtype])
    ft = getattr(torch, name)
    fs = getattr(strata, name)
    try:
        expected = ft(t)
    except Exception:  # noqa: BLE001 - torch refuses (floor of bool ...): strata must refuse too
        raises_like(lambda: fs(to_strata(t)), lambda: ft(t))
        return
    tol = {"bfloat16": 1e-2, "float16": 1e-3, "float32": 2e-6}.get(name_of(expected.dtype), 1e-12)
    same(fs(to_strata(t)), expected, rtol=tol, atol=tol)
    same(getattr(to_strata(t), name)(), expected, rtol=tol, atol=tol)  # the Tensor method


@pytest.mark.parametrize("name", SMOOTH)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_unary_math_gradients_match_pytorch(name, dtype):
    t = torch.tensor(UNARY[name], dtype=T[dtype]).reshape(5, 1).expand(5, 3) * torch.tensor([1.0, 0.9, 0.7], dtype=T[dtype])
    t = t.detach().requires_grad_()
    s = to_strata(t, requires_grad=True)
    w = torch.linspace(-1, 2, 15, dtype=T[dtype]).reshape(5, 3)
    (getattr(torch, name)(t) * w).sum().backward()
    (getattr(strata, name)(s) * to_strata(w)).sum().backward()
    tol = 1e-5 if dtype == "float32" else 1e-12
    same(s.grad, t.grad, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "round", "sign"])
def test_rounding_gradients_are_zero_like_pytorch(name):
    t = torch.tensor([-1.3, 0.4, 2.7], requires_grad=True)
    s = to_strata(t, requires_grad=True)
    getattr(torch, name)(t).sum().backward()
    getattr(strata, name)(s).sum().backward()
    same(s.grad, t.grad)


def test_round_decimals_matches_pytorch():
    for dtype in ("float32", "float64"):
        t = torch.tensor([0.125, 1234.5678, -2.675, 1250.0, 1350.0, -0.049], dtype=T[dtype])
        for d in (-2, -1, 1, 2, 3):
            same(strata.round(to_strata(t), decimals=d), torch.round(t, decimals=d), rtol=1e-7)
            same(to_strata(t).round(decimals=d), t.round(decimals=d), rtol=1e-7)
    raises_like(lambda: strata.round(strata.tensor([1, 2]), decimals=1), lambda: torch.round(torch.tensor([1, 2]), decimals=1))
    raises_like(lambda: strata.round(strata.tensor([1.0]), 1), lambda: torch.round(torch.tensor([1.0]), 1))  # keyword-only
    raises_like(lambda: strata.round(strata.tensor([1.0]), decimals=1.5), lambda: torch.round(torch.tensor([1.0]), decimals=1.5))


def test_nonfinite_values_match_pytorch():
    t = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.0, -1.0])
    for name in UNARY:
        same(getattr(strata, name)(to_strata(t)), getattr(torch, name)(t), rtol=1e-6)


ATAN2_PAIRS = [("float32", "float32"), ("float32", "float64"), ("int64", "int32"), ("int64", "bool"), ("float16", "int64"),
               ("bfloat16", "float16"), ("uint8", "float32")]


@pytest.mark.parametrize("da,db", ATAN2_PAIRS)
def test_atan2_promotes_and_broadcasts_like_pytorch(da, db):
    a = torch.tensor([[-2.0], [0.0], [1.0], [3.0]]).to(T[da])
    b = torch.tensor([-1.0, 0.0, 2.0]).to(T[db])
    expected = torch.atan2(a, b)
    tol = 1e-2 if "bfloat16" in (da, db) else 1e-3 if "float16" in (da, db) else 1e-6
    same(strata.atan2(to_strata(a), to_strata(b)), expected, rtol=tol, atol=tol)
    same(to_strata(a).atan2(to_strata(b)), expected, rtol=tol, atol=tol)
    same(strata.arctan2(to_strata(a), to_strata(b)), expected, rtol=tol, atol=tol)


def test_atan2_gradients_match_pytorch():
    a = torch.tensor([[-2.0], [0.5], [1.0]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([-1.0, 0.7, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    sa, sb = to_strata(a, True), to_strata(b, True)
    (torch.atan2(a, b) ** 2).sum().backward()
    (strata.atan2(sa, sb) ** 2).sum().backward()
    same(sa.grad, a.grad, rtol=1e-12)
    same(sb.grad, b.grad, rtol=1e-12)


def test_atan2_bad_input_raises_like_pytorch():
    raises_like(lambda: strata.atan2(strata.ones(2), 2.0), lambda: torch.atan2(torch.ones(2), 2.0))
    raises_like(lambda: strata.atan2(strata.ones(2, 3), strata.ones(4)), lambda: torch.atan2(torch.ones(2, 3), torch.ones(4)))


def test_aliases_match_pytorch():
    t = torch.tensor([-0.5, 0.25, 0.75])
    for name in ("arcsin", "arccos", "arctan", "fix"):
        same(getattr(strata, name)(to_strata(t)), getattr(torch, name)(t))
        same(getattr(to_strata(t), name)(), getattr(t, name)())


def test_unary_math_bad_input_raises_like_pytorch():
    for name in UNARY:
        msg = raises_like(lambda: getattr(strata, name)("a"), lambda: getattr(torch, name)("a"))
        assert name in msg and "Tensor" in msg
        raises_like(lambda: getattr(strata, name)(), lambda: getattr(torch, name)())


@pytest.mark.parametrize("name", sorted(UNARY))
def test_inplace_unary_math_matches_pytorch(name):
    t = torch.tensor(UNARY[name])
    s = to_strata(t)
    out = getattr(s, name + "_")()
    getattr(t, name + "_")()
    assert out is s
    same(s, t, rtol=2e-6, atol=1e-7)
    # Integers: an op that makes floats cannot write into them (can_cast), one that keeps them can.
    ti, si = torch.tensor([-2, 0, 3]), strata.tensor([-2, 0, 3])
    try:
        getattr(ti, name + "_")()
    except RuntimeError:
        with pytest.raises(RuntimeError, match="can't be cast"):
            getattr(si, name + "_")()
    else:
        getattr(si, name + "_")()
        same(si, ti)


@pytest.mark.parametrize("name", SMOOTH)
def test_inplace_unary_math_gradients_match_pytorch(name):
    base = torch.tensor(UNARY[name], dtype=torch.float64, requires_grad=True)
    sbase = to_strata(base, True)
    t = base * 1.0
    getattr(t, name + "_")()
    (t * t).sum().backward()
    s = sbase * 1.0
    getattr(s, name + "_")()
    (s * s).sum().backward()
    same(sbase.grad, base.grad, rtol=1e-12)


def test_inplace_unary_math_on_leaf_requiring_grad_raises_like_pytorch():
    raises_like(lambda: strata.ones(3).requires_grad_().sin_(), lambda: torch.ones(3, requires_grad=True).sin_())


# ---- reductions: var, std, norm, logsumexp, cumsum -------------------------------------------------

def grad_pair(values, dtype=torch.float64):
    t = torch.tensor(values, dtype=dtype, requires_grad=True)
    return to_strata(t, True), t


def check_reduction(fs, ft, values, rtol=1e-10, dtype=torch.float64):
    """Values, dtype and the gradient of a weighted sum of fs against ft."""
    s, t = grad_pair(values, dtype)
    rs, rt = fs(s), ft(t)
    same(rs, rt, rtol=rtol, atol=rtol)
    w = torch.linspace(0.5, 1.5, rt.numel(), dtype=rt.dtype).reshape(rt.shape)
    (rt * w).sum().backward()
    (rs * to_strata(w)).sum().backward()
    if t.grad is None:  # recorded without a gradient (norm with p=0)
        assert s.grad is None
        return
    same(s.grad, t.grad, rtol=rtol, atol=rtol)


X34 = [[0.5, -1.0, 2.0, 0.25], [1.5, 3.0, -0.5, 0.0], [-2.0, 0.75, 1.0, -1.25]]


@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std_match_pytorch(name):
    fs, ft = getattr(strata, name), getattr(torch, name)
    check_reduction(lambda x: fs(x), lambda x: ft(x), X34)
    check_reduction(lambda x: fs(x, 1), lambda x: ft(x, 1), X34)
    check_reduction(lambda x: fs(x, dim=0, keepdim=True), lambda x: ft(x, dim=0, keepdim=True), X34)
    check_reduction(lambda x: fs(x, (0, 1), correction=0), lambda x: ft(x, (0, 1), correction=0), X34)
    check_reduction(lambda x: fs(x, 1, unbiased=False), lambda x: ft(x, 1, unbiased=False), X34)
    check_reduction(lambda x: fs(x, False), lambda x: ft(x, False), X34)
    check_reduction(lambda x: fs(x, [-1], True, True), lambda x: ft(x, [-1], True, True), X34)
    check_reduction(lambda x: getattr(x, name)(1, correction=2), lambda x: getattr(x, name)(1, correction=2), X34)
    check_reduction(lambda x: fs(x, 1), lambda x: ft(x, 1), X34, rtol=1e-6, dtype=torch.float32)
    t = torch.tensor(X34).to(torch.float16)
    same(fs(to_strata(t), 1), ft(t, 1), rtol=2e-3)
    with pytest.warns(UserWarning):
        expected = ft(torch.ones(1))  # one element: N - 1 = 0, nan as torch
    same(fs(strata.ones(1)), expected)


def test_var_std_bad_input_raises_like_pytorch():
    for name in ("var", "std"):
        fs, ft = getattr(strata, name), getattr(torch, name)
        raises_like(lambda: fs(strata.tensor([1, 2])), lambda: ft(torch.tensor([1, 2])))
        raises_like(lambda: fs(strata.ones(2, 3), 2), lambda: ft(torch.ones(2, 3), 2))
        raises_like(lambda: fs(strata.ones(2, 3), 1, unbiased=True, correction=0),
                    lambda: ft(torch.ones(2, 3), 1, unbiased=True, correction=0))
        raises_like(lambda: fs(strata.ones(2, 3), "a"), lambda: ft(torch.ones(2, 3), "a"))


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, float("inf"), -float("inf"), "fro", None])
def test_norm_matches_pytorch(p):
    values = [[0.5, -1.0, 2.0, 0.25], [1.5, 3.0, -0.5, 0.1], [-2.0, 0.75, 1.0, -1.25]]
    kw = {} if p is None else {"p": p}
    check_reduction(lambda x: strata.norm(x, **kw), lambda x: torch.norm(x, **kw), values)
    check_reduction(lambda x: strata.norm(x, dim=1, **kw), lambda x: torch.norm(x, dim=1, **kw), values)
    check_reduction(lambda x: x.norm(dim=0, keepdim=True, **kw), lambda x: x.norm(dim=0, keepdim=True, **kw), values)


def test_norm_special_cases_match_pytorch():
    check_reduction(lambda x: strata.norm(x), lambda x: torch.norm(x), [[0.0, 0.0], [0.0, 0.0]])  # gradient 0 at 0
    check_reduction(lambda x: strata.norm(x, p=0, dim=1), lambda x: torch.norm(x, p=0, dim=1), [[0.0, 2.0], [1.0, -1.0]])
    t = torch.tensor([[3.0, 4.0]], dtype=torch.float16)
    same(strata.norm(to_strata(t)), torch.norm(t))
    same(strata.norm(to_strata(t), dtype=strata.float64), torch.norm(t, dtype=torch.float64))
    raises_like(lambda: strata.norm(strata.tensor([1, 2])), lambda: torch.norm(torch.tensor([1, 2])))
    raises_like(lambda: strata.norm(strata.ones(2), p="abc"), lambda: torch.norm(torch.ones(2), p="abc"))
    raises_like(lambda: strata.norm(strata.ones(2), dim=3), lambda: torch.norm(torch.ones(2), dim=3))


def test_logsumexp_matches_pytorch():
    check_reduction(lambda x: strata.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1), X34)
    check_reduction(lambda x: strata.logsumexp(x, (0, 1), keepdim=True), lambda x: torch.logsumexp(x, (0, 1), keepdim=True), X34)
    check_reduction(lambda x: x.logsumexp(-2), lambda x: x.logsumexp(-2), X34)
    big = [[1000.0, 1000.0], [-1000.0, -999.0]]
    check_reduction(lambda x: strata.logsumexp(x, 1), lambda x: torch.logsumexp(x, 1), big)
    inf = float("inf")
    t = torch.tensor([[-inf, -inf], [inf, 1.0], [float("nan"), 0.0]])
    same(strata.logsumexp(to_strata(t), 1), torch.logsumexp(t, 1))
    i = torch.tensor([[1, 2], [3, 4]])
    same(strata.logsumexp(to_strata(i), 1), torch.logsumexp(i, 1), rtol=1e-6)
    raises_like(lambda: strata.logsumexp(strata.ones(2)), lambda: torch.logsumexp(torch.ones(2)))
    raises_like(lambda: strata.logsumexp(strata.ones(2), 1), lambda: torch.logsumexp(torch.ones(2), 1))


def test_cumsum_matches_pytorch():
    check_reduction(lambda x: strata.cumsum(x, 1), lambda x: torch.cumsum(x, 1), X34)
    check_reduction(lambda x: x.cumsum(0), lambda x: x.cumsum(0), X34)
    check_reduction(lambda x: x.cumsum(-1, dtype=strata.float32), lambda x: x.cumsum(-1, dtype=torch.float32), X34, rtol=1e-6)
    for dtype in ("int32", "int64", "uint8", "bool", "float16", "bfloat16"):
        t = torch.tensor([[1, 0, 3], [2, 1, 1]]).to(T[dtype])
        same(strata.cumsum(to_strata(t), 1), torch.cumsum(t, 1))
        same(strata.cumsum(to_strata(t), 0, dtype=strata.float64), torch.cumsum(t, 0, dtype=torch.float64))
    same(strata.cumsum(strata.tensor(2.5), 0), torch.cumsum(torch.tensor(2.5), 0))
    raises_like(lambda: strata.cumsum(strata.ones(2, 3), 2), lambda: torch.cumsum(torch.ones(2, 3), 2))
    raises_like(lambda: strata.cumsum(strata.ones(2, 3)), lambda: torch.cumsum(torch.ones(2, 3)))


# ---- shape ops --------------------------------------------------------------------------------------

def check_shape_op(fs, ft, shapes, dtype=torch.float64):
    """fs and ft on tensors of `shapes` (values and the gradients of a weighted sum)."""
    ts = [torch.linspace(-1, 1, int(np.prod(s)), dtype=dtype).reshape(s).requires_grad_() for s in shapes]
    ss = [to_strata(t, True) for t in ts]
    rt, rs = ft(*ts), fs(*ss)
    if isinstance(rt, torch.Tensor):
        rt, rs = [rt], [rs]
    assert len(rs) == len(rt)
    loss_t = 0
    loss_s = 0
    for a, b in zip(rs, rt):
        same(a, b, atol=1e-12)  # sums to 0 differ in rounding
        w = torch.linspace(0.5, 2, b.numel(), dtype=dtype).reshape(b.shape)
        loss_t = loss_t + (b * w).sum()
        loss_s = loss_s + (a * to_strata(w)).sum()
    loss_t.backward()
    loss_s.backward()
    for s, t in zip(ss, ts):
        same(s.grad, t.grad, rtol=1e-12)


def test_stack_matches_pytorch():
    for dim in (0, 1, 2, -1, -3):
        check_shape_op(lambda a, b: strata.stack([a, b], dim), lambda a, b: torch.stack([a, b], dim), [(2, 3), (2, 3)])
    check_shape_op(lambda a: strata.stack((a,)), lambda a: torch.stack((a,)), [(4,)])
    raises_like(lambda: strata.stack([strata.ones(2), strata.ones(3)]), lambda: torch.stack([torch.ones(2), torch.ones(3)]))
    raises_like(lambda: strata.stack([]), lambda: torch.stack([]))
    raises_like(lambda: strata.stack([strata.ones(2)], 2), lambda: torch.stack([torch.ones(2)], 2))
    raises_like(lambda: strata.stack(strata.ones(2)), lambda: torch.stack(torch.ones(2)))


def test_chunk_matches_pytorch():
    for n, dim in ((3, 0), (2, 1), (4, -1), (7, 0), (1, 1)):
        check_shape_op(lambda a: strata.chunk(a, n, dim), lambda a: torch.chunk(a, n, dim), [(5, 4)])
        check_shape_op(lambda a: a.chunk(n, dim=dim), lambda a: a.chunk(n, dim=dim), [(5, 4)])
    assert isinstance(strata.ones(4).chunk(2), tuple)
    raises_like(lambda: strata.chunk(strata.ones(4), 0), lambda: torch.chunk(torch.ones(4), 0))
    raises_like(lambda: strata.chunk(strata.ones(4), 2, 1), lambda: torch.chunk(torch.ones(4), 2, 1))


def test_flip_roll_match_pytorch():
    check_shape_op(lambda a: strata.flip(a, (0, 2)), lambda a: torch.flip(a, (0, 2)), [(2, 3, 4)])
    check_shape_op(lambda a: a.flip(-1), lambda a: a.flip(-1), [(2, 3)])
    check_shape_op(lambda a: a.flip(0, 1), lambda a: a.flip(0, 1), [(2, 3)])
    check_shape_op(lambda a: strata.flip(a, [1]), lambda a: torch.flip(a, [1]), [(4, 1)])  # nothing moves: a copy
    check_shape_op(lambda a: strata.roll(a, 2), lambda a: torch.roll(a, 2), [(3, 4)])
    check_shape_op(lambda a: strata.roll(a, -1, 1), lambda a: torch.roll(a, -1, 1), [(3, 4)])
    check_shape_op(lambda a: a.roll((1, 5), (0, 1)), lambda a: a.roll((1, 5), (0, 1)), [(3, 4)])
    check_shape_op(lambda a: strata.roll(a, 0, 0), lambda a: torch.roll(a, 0, 0), [(3,)])
    t = torch.tensor([[True, False], [False, False]])
    same(strata.flip(to_strata(t), [0]), torch.flip(t, [0]))
    same(strata.roll(to_strata(t), 1, 1), torch.roll(t, 1, 1))
    raises_like(lambda: strata.flip(strata.ones(2, 2), (0, 0)), lambda: torch.flip(torch.ones(2, 2), (0, 0)))
    raises_like(lambda: strata.flip(strata.ones(2, 2), (2,)), lambda: torch.flip(torch.ones(2, 2), (2,)))
    raises_like(lambda: strata.roll(strata.ones(2, 2), (1, 2), (0,)), lambda: torch.roll(torch.ones(2, 2), (1, 2), (0,)))
    raises_like(lambda: strata.roll(strata.ones(2, 2), 1, 3), lambda: torch.roll(torch.ones(2, 2), 1, 3))


def test_repeat_and_repeat_interleave_match_pytorch():
    check_shape_op(lambda a: a.repeat(2, 3), lambda a: a.repeat(2, 3), [(2, 3)])
    check_shape_op(lambda a: a.repeat((2, 1, 2)), lambda a: a.repeat((2, 1, 2)), [(2, 3)])
    check_shape_op(lambda a: a.repeat(3), lambda a: a.repeat(3), [()])
    check_shape_op(lambda a: a.repeat(0, 2), lambda a: a.repeat(0, 2), [(2,)])
    check_shape_op(lambda a: strata.repeat_interleave(a, 2), lambda a: torch.repeat_interleave(a, 2), [(2, 3)])
    check_shape_op(lambda a: a.repeat_interleave(3, dim=1), lambda a: a.repeat_interleave(3, dim=1), [(2, 3)])
    reps = torch.tensor([1, 0, 2])
    check_shape_op(lambda a: strata.repeat_interleave(a, to_strata(reps), dim=0),
                   lambda a: torch.repeat_interleave(a, reps, dim=0), [(3, 2)])
    check_shape_op(lambda a: a.repeat_interleave(strata.tensor([2]), 1), lambda a: a.repeat_interleave(torch.tensor([2]), 1),
                   [(3, 2)])
    t = torch.tensor([1, 2, 3])
    same(to_strata(t).repeat(2), t.repeat(2))
    same(strata.repeat_interleave(to_strata(t), 2), torch.repeat_interleave(t, 2))
    raises_like(lambda: strata.ones(2, 2).repeat(2), lambda: torch.ones(2, 2).repeat(2))
    raises_like(lambda: strata.ones(2).repeat(-1), lambda: torch.ones(2).repeat(-1))
    raises_like(lambda: strata.repeat_interleave(strata.ones(3), strata.tensor([1, 2]), dim=0),
                lambda: torch.repeat_interleave(torch.ones(3), torch.tensor([1, 2]), dim=0))
    raises_like(lambda: strata.repeat_interleave(strata.ones(2), strata.tensor([1, -1]), dim=0),
                lambda: torch.repeat_interleave(torch.ones(2), torch.tensor([1, -1]), dim=0))
    raises_like(lambda: strata.repeat_interleave(strata.ones(2), -1), lambda: torch.repeat_interleave(torch.ones(2), -1))


@pytest.mark.parametrize("k", [0, 1, -1, 5, -5])
def test_tril_triu_match_pytorch(k):
    for name in ("tril", "triu"):
        check_shape_op(lambda a: getattr(strata, name)(a, k), lambda a: getattr(torch, name)(a, k), [(3, 4)])
        check_shape_op(lambda a: getattr(a, name)(diagonal=k), lambda a: getattr(a, name)(diagonal=k), [(2, 4, 3)])
        t = torch.ones(3, 3, dtype=torch.int32)
        same(getattr(strata, name)(to_strata(t), k), getattr(torch, name)(t, k))
        s, tt = to_strata(torch.ones(3, 3)), torch.ones(3, 3)
        assert getattr(s, name + "_")(k) is s
        getattr(tt, name + "_")(k)
        same(s, tt)
    raises_like(lambda: strata.tril(strata.ones(3)), lambda: torch.tril(torch.ones(3)))


# ---- einsum -----------------------------------------------------------------------------------------

EINSUM = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 2)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("i,i->", [(6,), (6,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]),
    ("ij->", [(3, 4)]),
    ("ii", None),
    ("ij,ij->ij", [(3, 4), (3, 4)]),
    ("abc,cd->ad", [(2, 3, 4), (4, 3)]),
    ("ab,bc,cd->da", [(2, 3), (3, 4), (4, 2)]),
    ("Ab,bC->CA", [(2, 3), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", [e for e in EINSUM if e[1] is not None])
def test_einsum_matches_pytorch(eq, shapes):
    check_shape_op(lambda *a: strata.einsum(eq, *a), lambda *a: torch.einsum(eq, *a), shapes)
    check_shape_op(lambda *a: strata.einsum(eq, list(a)), lambda *a: torch.einsum(eq, list(a)), shapes)


def test_einsum_bad_input_raises():
    raises_like(lambda: strata.einsum("ij,jk->ik", strata.ones(2, 3), strata.ones(4, 2)),
                lambda: torch.einsum("ij,jk->ik", torch.ones(2, 3), torch.ones(4, 2)))
    raises_like(lambda: strata.einsum("ij,jk->ik", strata.ones(2, 3)), lambda: torch.einsum("ij,jk->ik", torch.ones(2, 3)))
    raises_like(lambda: strata.einsum("ij->k", strata.ones(2, 3)), lambda: torch.einsum("ij->k", torch.ones(2, 3)))
    raises_like(lambda: strata.einsum("ij->i", strata.ones(2)), lambda: torch.einsum("ij->i", torch.ones(2)))
    raises_like(lambda: strata.einsum(1, strata.ones(2)), lambda: torch.einsum(1, torch.ones(2)))
    # Beyond Strata's einsum (torch supports them): a clear error, never a wrong value.
    with pytest.raises(RuntimeError, match="ellipsis"):
        strata.einsum("...ij->...ji", strata.ones(2, 2))
    with pytest.raises(RuntimeError, match="repeats within one operand"):
        strata.einsum("ii->i", strata.ones(2, 2))


# ---- factories --------------------------------------------------------------------------------------

def test_eye_linspace_match_pytorch():
    for args in ((3,), (2, 4), (4, 2), (0,)):
        same(strata.eye(*args), torch.eye(*args))
        same(strata.eye(*args, dtype=strata.int64), torch.eye(*args, dtype=torch.int64))
    same(strata.eye(3, dtype=strata.bool), torch.eye(3, dtype=torch.bool))
    for start, end, steps in ((0, 1, 5), (-2.5, 7, 11), (3, -1, 4), (1, 1, 1), (0, 1, 0), (0, 10, 2)):
        same(strata.linspace(start, end, steps), torch.linspace(start, end, steps))
        same(strata.linspace(start, end, steps, dtype=strata.float64), torch.linspace(start, end, steps, dtype=torch.float64))
        same(strata.linspace(start, end, steps, dtype=strata.int64), torch.linspace(start, end, steps, dtype=torch.int64))
    raises_like(lambda: strata.linspace(0, 1, -1), lambda: torch.linspace(0, 1, -1))
    raises_like(lambda: strata.eye(-1), lambda: torch.eye(-1))
    raises_like(lambda: strata.linspace(0, 1), lambda: torch.linspace(0, 1))


def test_randperm_is_a_seeded_permutation():
    for n in (0, 1, 2, 17, 1000):
        p = strata.randperm(n)
        assert p.dtype == strata.int64 and tuple(p.shape) == (n,)
        assert sorted(p.tolist()) == list(range(n))
    g1, g2 = strata.Generator().manual_seed(5), strata.Generator().manual_seed(5)
    assert strata.randperm(50, generator=g1).tolist() == strata.randperm(50, generator=g2).tolist()
    assert strata.randperm(50, generator=g1).tolist() != strata.randperm(50, generator=g2.manual_seed(6)).tolist()
    strata.manual_seed(3)
    a = strata.randperm(30)
    strata.manual_seed(3)
    assert a.tolist() == strata.randperm(30).tolist()
    assert strata.randperm(5, dtype=strata.float32).dtype == strata.float32
    raises_like(lambda: strata.randperm(-1), lambda: torch.randperm(-1))
    raises_like(lambda: strata.randperm(300, dtype=strata.uint8), lambda: torch.randperm(300, dtype=torch.uint8))
    raises_like(lambda: strata.randperm(3, generator=1), lambda: torch.randperm(3, generator=1))


def test_random_like_factories():
    x = strata.ones(3, 4, dtype=strata.float64)
    for fn in (strata.rand_like, strata.randn_like):
        r = fn(x)
        assert r.dtype == strata.float64 and tuple(r.shape) == (3, 4)
        assert fn(x, dtype=strata.float32).dtype == strata.float32
    assert float(strata.rand_like(x).min()) >= 0 and float(strata.rand_like(x).max()) < 1
    r = strata.randint_like(x, 5)
    assert r.dtype == strata.float64 and set(r.numpy().ravel()) <= set(range(5))
    r = strata.randint_like(strata.ones(100, dtype=strata.int32), 3, 6)
    assert r.dtype == strata.int32 and set(r.tolist()) <= {3, 4, 5}
    raises_like(lambda: strata.rand_like(strata.ones(2, dtype=strata.int64)), lambda: torch.rand_like(torch.ones(2, dtype=torch.int64)))


FACTORIES = [
    ("zeros", lambda m, **kw: m.zeros(2, 3, **kw)),
    ("ones", lambda m, **kw: m.ones((2, 3), **kw)),
    ("empty", lambda m, **kw: m.empty(2, **kw)),
    ("full", lambda m, **kw: m.full((2,), 1.5, **kw)),
    ("rand", lambda m, **kw: m.rand(2, 3, **kw)),
    ("randn", lambda m, **kw: m.randn(2, **kw)),
    ("arange", lambda m, **kw: m.arange(0.0, 3.0, **kw)),
    ("tensor", lambda m, **kw: m.tensor([1.0, 2.0], **kw)),
    ("eye", lambda m, **kw: m.eye(2, **kw)),
    ("linspace", lambda m, **kw: m.linspace(0, 1, 3, **kw)),
    ("zeros_like", lambda m, **kw: m.zeros_like(m.ones(2), **kw)),
    ("ones_like", lambda m, **kw: m.ones_like(m.ones(2), **kw)),
    ("empty_like", lambda m, **kw: m.empty_like(m.ones(2), **kw)),
    ("full_like", lambda m, **kw: m.full_like(m.ones(2), 3.0, **kw)),
    ("rand_like", lambda m, **kw: m.rand_like(m.ones(2), **kw)),
    ("randn_like", lambda m, **kw: m.randn_like(m.ones(2), **kw)),
    ("randint_like", lambda m, **kw: m.randint_like(m.ones(2), 4, **kw)),
    ("randperm", lambda m, **kw: m.randperm(4, **kw)),
    ("randint", lambda m, **kw: m.randint(0, 5, (2,), **kw)),
]


@pytest.mark.parametrize("name,make", FACTORIES, ids=[f[0] for f in FACTORIES])
def test_factories_take_dtype_device_and_requires_grad_like_pytorch(name, make):
    for kw in ({}, {"device": "cpu"}, {"dtype": "float64"}, {"requires_grad": True}, {"dtype": "float64", "requires_grad": True},
               {"dtype": "int32"}, {"dtype": "int64", "requires_grad": True}):
        skw = {k: (getattr(strata, v) if k == "dtype" else v) for k, v in kw.items()}
        tkw = {k: (getattr(torch, v) if k == "dtype" else v) for k, v in kw.items()}
        try:
            rt = make(torch, **tkw)
        except Exception:  # noqa: BLE001 - torch refuses (an integer tensor requiring grad ...): strata too
            raises_like(lambda: make(strata, **skw), lambda: make(torch, **tkw))
            continue
        rs = make(strata, **skw)
        assert name_of(rs.dtype) == name_of(rt.dtype), (kw, rs.dtype, rt.dtype)
        assert tuple(rs.shape) == tuple(rt.shape)
        assert rs.requires_grad == rt.requires_grad, kw
        assert rs.is_leaf
    with pytest.raises(ValueError, match="not available"):
        make(strata, device="cuda")
    make(strata, device="cpu:0")


def test_factory_requires_grad_tensors_train():
    w = strata.zeros(3, requires_grad=True)
    (w * strata.tensor([1.0, 2.0, 3.0])).sum().backward()
    same(w.grad, torch.tensor([1.0, 2.0, 3.0]))


LAYERS = [
    ("Linear", (3, 4)),
    ("Conv2d", (2, 3, 3)),
    ("BatchNorm1d", (4,)),
    ("LayerNorm", (5,)),
    ("Embedding", (6, 3)),
    ("MultiheadAttention", (8, 2)),
]


@pytest.mark.parametrize("name,args", LAYERS, ids=[n for n, _ in LAYERS])
def test_layers_take_dtype_and_device_like_pytorch(name, args):
    ms = getattr(strata.nn, name)(*args, dtype=strata.float64, device="cpu")
    mt = getattr(torch.nn, name)(*args, dtype=torch.float64, device="cpu")
    s_state, t_state = ms.state_dict(), mt.state_dict()
    assert sorted(s_state) == sorted(t_state)
    for k in t_state:
        assert name_of(s_state[k].dtype) == name_of(t_state[k].dtype), k
    assert getattr(strata.nn, name)(*args).state_dict()[next(iter(t_state))].dtype == strata.float32
    with pytest.raises(ValueError, match="not available"):
        getattr(strata.nn, name)(*args, device="cuda")


def test_layer_dtype_keyword_in_a_subclass_and_training():
    class Net(strata.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = strata.nn.Linear(3, 2, dtype=strata.float64)

        def forward(self, x):
            return self.fc(x)

    net = Net()
    out = net(strata.ones(4, 3, dtype=strata.float64))
    assert out.dtype == strata.float64
    out.sum().backward()
    assert net.fc.weight.grad.dtype == strata.float64

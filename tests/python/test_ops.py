"""The op bindings (strata.<op>, Tensor methods and operators, differentiable views, in-place
methods) against PyTorch 2.13: the same NumPy inputs through both, forward values and gradients."""
import numpy as np
import pytest
import torch

import strata

RNG = np.random.default_rng(0)
TOL = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-10, atol=1e-10)}


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def pair(*arrays, grad=True):
    """The same arrays as strata and torch leaves (requiring grad when floating and `grad`)."""
    s, t = [], []
    for a in arrays:
        req = grad and np.issubdtype(a.dtype, np.floating)
        s.append(strata.tensor(a).requires_grad_(req))
        t.append(torch.tensor(a, requires_grad=req))
    return s, t


def check(fn_s, fn_t, *arrays, dtype=np.float32, grad=True, seed_grad=True):
    """Runs fn on both frameworks, compares the outputs, then backpropagates the same random
    cotangent and compares every input's gradient."""
    s, t = pair(*arrays, grad=grad)
    out_s, out_t = fn_s(*s), fn_t(*t)
    tol = TOL[dtype]
    np.testing.assert_allclose(out_s.numpy(), out_t.detach().numpy(), **tol)
    assert tuple(out_s.shape) == tuple(out_t.shape)
    if not grad:
        return out_s, out_t
    g = rand(*out_t.shape, dtype=dtype) if seed_grad else np.ones(out_t.shape, dtype)
    out_s.backward(strata.tensor(g))
    out_t.backward(torch.tensor(g))
    for xs, xt in zip(s, t):
        if xt.requires_grad:
            assert xs.grad is not None, "no gradient reached a strata input"
            np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), **tol)
    return out_s, out_t


# ---- element-wise ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["relu", "sigmoid", "tanh", "exp"])
def test_unary_functions_and_methods(name, dtype):
    x = rand(3, 5, dtype=dtype)
    check(getattr(strata, name), getattr(torch, name), x, dtype=dtype)
    check(lambda a: getattr(a, name)(), lambda a: getattr(a, name)(), x, dtype=dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_sqrt_on_positive_inputs(dtype):
    x = rand(4, 3, dtype=dtype, low=0.5, high=2.0)
    check(strata.log, torch.log, x, dtype=dtype)
    check(lambda a: a.sqrt(), lambda a: a.sqrt(), x, dtype=dtype)


def test_leaky_relu_gelu_clamp_pow():
    x = rand(4, 6)
    check(lambda a: strata.leaky_relu(a, 0.2), lambda a: torch.nn.functional.leaky_relu(a, 0.2), x)
    check(strata.gelu, torch.nn.functional.gelu, x)
    check(lambda a: strata.gelu(a, approximate="tanh"),
          lambda a: torch.nn.functional.gelu(a, approximate="tanh"), x)
    check(lambda a: a.clamp(-0.3, 0.4), lambda a: a.clamp(-0.3, 0.4), x)
    check(lambda a: strata.clamp(a, min=0.1), lambda a: torch.clamp(a, min=0.1), x)
    check(lambda a: a.clamp(max=0.1), lambda a: a.clamp(max=0.1), x)
    p = rand(4, 6, low=0.5, high=2.0)
    check(lambda a: a.pow(3), lambda a: a.pow(3), p)
    check(lambda a: a ** 2.5, lambda a: a ** 2.5, p)
    check(lambda a, b: strata.pow(a, b), lambda a, b: torch.pow(a, b), p, rand(6, low=0.5, high=2.0))
    check(lambda a: 2.0 ** a, lambda a: 2.0 ** a, x)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_ops_broadcast(dtype):
    a, b = rand(2, 3, 4, dtype=dtype), rand(3, 1, dtype=dtype)
    check(lambda x, y: x + y, lambda x, y: x + y, a, b, dtype=dtype)
    check(lambda x, y: x - y, lambda x, y: x - y, a, b, dtype=dtype)
    check(lambda x, y: x * y, lambda x, y: x * y, a, b, dtype=dtype)
    c = rand(3, 1, dtype=dtype, low=0.5, high=2.0)
    check(lambda x, y: x / y, lambda x, y: x / y, a, c, dtype=dtype)
    check(lambda x, y: strata.add(x, y, alpha=2.5), lambda x, y: torch.add(x, y, alpha=2.5), a, b, dtype=dtype)
    check(lambda x, y: x.sub(y, alpha=-0.5), lambda x, y: x.sub(y, alpha=-0.5), a, b, dtype=dtype)
    check(strata.maximum, torch.maximum, a, b, dtype=dtype)
    check(lambda x, y: x.max(y), lambda x, y: x.max(y), a, b, dtype=dtype)


def test_operators_with_python_numbers_on_both_sides_keep_the_dtype():
    a = rand(3, 4)
    check(lambda x: 2 + x, lambda x: 2 + x, a)
    check(lambda x: x + 1.5, lambda x: x + 1.5, a)
    check(lambda x: 3 - x, lambda x: 3 - x, a)
    check(lambda x: x - 3, lambda x: x - 3, a)
    check(lambda x: 0.5 * x, lambda x: 0.5 * x, a)
    check(lambda x: x * 4, lambda x: x * 4, a)
    c = rand(3, 4, low=0.5, high=2.0)
    check(lambda x: 2.0 / x, lambda x: 2.0 / x, c)
    check(lambda x: x / 4, lambda x: x / 4, a)
    check(lambda x: -x, lambda x: -x, a)
    check(lambda x: strata.sub(1.0, x, alpha=2), lambda x: torch.sub(1.0, x, alpha=2), a)
    out = strata.tensor(a) * 2.0
    assert out.dtype == strata.float32
    out = strata.tensor(a.astype(np.float64)) + 1
    assert out.dtype == strata.float64
    # A 0-dim tensor does not promote (PyTorch's rule).
    out = strata.tensor(a) * strata.tensor(2.0, dtype=strata.float64)
    assert out.dtype == strata.float32
    np.testing.assert_allclose(out.numpy(), a * 2)
    # numpy scalars count as numbers
    np.testing.assert_allclose((strata.tensor(a) * np.float32(3)).numpy(), a * 3)


def test_operators_refuse_what_they_do_not_know():
    x = strata.ones(2)
    with pytest.raises(TypeError):
        x + "a"
    with pytest.raises(TypeError):
        "a" * x
    with pytest.raises(TypeError, match="must be Tensor or a number"):
        strata.add(x, "a")
    with pytest.raises(TypeError, match="two numbers"):
        strata.mul(2, 3)
    with pytest.raises(strata.StrataError, match="cannot broadcast"):
        x + strata.ones(3, dtype=strata.float64)


def test_where_and_dropout():
    a, b = rand(3, 4), rand(4)
    cond = RNG.uniform(size=(3, 4)) > 0.5
    s, t = pair(a, b)
    out_s = strata.where(strata.tensor(cond), s[0], s[1])
    out_t = torch.where(torch.tensor(cond), t[0], t[1])
    np.testing.assert_allclose(out_s.numpy(), out_t.detach().numpy())
    out_s.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(s[1].grad.numpy(), t[1].grad.numpy())
    np.testing.assert_allclose(strata.where(strata.tensor(cond), s[0], 0.0).detach().numpy(),
                               np.where(cond, a, 0.0))
    with pytest.raises(TypeError, match="bool"):
        strata.where(strata.tensor(a), s[0], s[0])
    x = strata.ones(1000)
    y = strata.dropout(x, 0.25, True)
    kept = y.numpy() != 0
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.75)
    assert 0.6 < kept.mean() < 0.9
    np.testing.assert_array_equal(strata.dropout(x, 0.5, False).numpy(), x.numpy())
    with pytest.raises(ValueError, match="between 0 and 1"):
        strata.dropout(x, 1.5)


# ---- linear algebra, conv, pooling, normalization ------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_linear_bmm(dtype):
    a, b = rand(2, 3, 4, dtype=dtype), rand(4, 5, dtype=dtype)
    check(strata.matmul, torch.matmul, a, b, dtype=dtype)
    check(lambda x, y: x @ y, lambda x, y: x @ y, a, b, dtype=dtype)
    check(lambda x, y: x.matmul(y), lambda x, y: x.matmul(y), rand(5, dtype=dtype), rand(5, 2, dtype=dtype),
          dtype=dtype)
    w, bias = rand(6, 4, dtype=dtype), rand(6, dtype=dtype)
    check(strata.linear, torch.nn.functional.linear, a, w, bias, dtype=dtype)
    check(lambda x, y: strata.linear(x, y), lambda x, y: torch.nn.functional.linear(x, y), a, w, dtype=dtype)
    check(strata.bmm, torch.bmm, a, rand(2, 4, 3, dtype=dtype), dtype=dtype)
    with pytest.raises(strata.StrataError):
        strata.matmul(strata.ones(2, 3), strata.ones(2, 3))
    with pytest.raises(TypeError, match="argument 'other' must be Tensor, not list"):
        strata.matmul(strata.ones(2, 2), [[1.0]])


def test_conv2d_and_pools():
    x, w, b = rand(2, 4, 9, 8), rand(6, 2, 3, 3), rand(6)
    check(lambda *a: strata.conv2d(*a, stride=2, padding=1, groups=2),
          lambda *a: torch.nn.functional.conv2d(*a, stride=2, padding=1, groups=2), x, w, b)
    check(lambda *a: strata.conv2d(*a, padding="same", dilation=(2, 1)),
          lambda *a: torch.nn.functional.conv2d(*a, padding="same", dilation=(2, 1)), x, rand(3, 4, 3, 3))
    check(lambda *a: strata.conv2d(*a, padding="valid"),
          lambda *a: torch.nn.functional.conv2d(*a, padding="valid"), x, rand(3, 4, 2, 2))
    check(lambda a: strata.max_pool2d(a, 3, 2, 1), lambda a: torch.nn.functional.max_pool2d(a, 3, 2, 1), x)
    check(lambda a: strata.max_pool2d(a, 2, ceil_mode=True),
          lambda a: torch.nn.functional.max_pool2d(a, 2, ceil_mode=True), x)
    check(lambda a: strata.avg_pool2d(a, (3, 2), padding=1, count_include_pad=False),
          lambda a: torch.nn.functional.avg_pool2d(a, (3, 2), padding=1, count_include_pad=False), x)
    check(lambda a: strata.adaptive_avg_pool2d(a, (3, None)),
          lambda a: torch.nn.functional.adaptive_avg_pool2d(a, (3, None)), x)
    check(lambda a: strata.adaptive_avg_pool2d(a, 1), lambda a: torch.nn.functional.adaptive_avg_pool2d(a, 1), x)
    with pytest.raises(NotImplementedError, match="return_indices"):
        strata.max_pool2d(strata.tensor(x), 2, return_indices=True)
    with pytest.raises(NotImplementedError, match="divisor_override"):
        strata.avg_pool2d(strata.tensor(x), 2, divisor_override=3)
    with pytest.raises(ValueError, match="pair of ints"):
        strata.max_pool2d(strata.tensor(x), (2, 2, 2))
    with pytest.raises(ValueError, match="invalid padding string"):
        strata.conv2d(strata.tensor(x), strata.tensor(w), padding="full")
    with pytest.raises(strata.StrataError):
        strata.conv2d(strata.ones(4, 9, 8), strata.tensor(w))


def test_batch_norm_and_layer_norm():
    x, w, b = rand(4, 3, 5, 2), rand(3), rand(3)
    rm, rv = rand(3), rand(3, low=0.5, high=1.5)
    rm_s, rv_s = strata.tensor(rm), strata.tensor(rv)
    rm_t, rv_t = torch.tensor(rm), torch.tensor(rv)
    check(lambda a, ww, bb: strata.batch_norm(a, rm_s, rv_s, ww, bb, training=True, momentum=0.2),
          lambda a, ww, bb: torch.nn.functional.batch_norm(a, rm_t, rv_t, ww, bb, training=True, momentum=0.2),
          x, w, b)
    np.testing.assert_allclose(rm_s.numpy(), rm_t.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rv_s.numpy(), rv_t.numpy(), rtol=1e-5, atol=1e-6)
    check(lambda a: strata.batch_norm(a, rm_s, rv_s), lambda a: torch.nn.functional.batch_norm(a, rm_t, rv_t), x)
    check(lambda a, ww, bb: strata.layer_norm(a, (5, 2), ww, bb),
          lambda a, ww, bb: torch.nn.functional.layer_norm(a, (5, 2), ww, bb), x, rand(5, 2), rand(5, 2))
    check(lambda a: strata.layer_norm(a, [2], eps=1e-3),
          lambda a: torch.nn.functional.layer_norm(a, [2], eps=1e-3), x)


# ---- reductions, softmax, losses ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reductions(dtype):
    x = rand(3, 4, 5, dtype=dtype)
    check(lambda a: a.sum(), lambda a: a.sum(), x, dtype=dtype)
    check(lambda a: a.sum(1), lambda a: a.sum(1), x, dtype=dtype)
    check(lambda a: strata.sum(a, (0, -1), keepdim=True), lambda a: torch.sum(a, (0, -1), keepdim=True), x,
          dtype=dtype)
    check(lambda a: a.mean(), lambda a: a.mean(), x, dtype=dtype)
    check(lambda a: a.mean(dim=2, keepdim=True), lambda a: a.mean(dim=2, keepdim=True), x, dtype=dtype)
    check(lambda a: a.amax(1), lambda a: a.amax(1), x, dtype=dtype)
    check(lambda a: strata.amax(a), lambda a: torch.amax(a), x, dtype=dtype)
    check(lambda a: a.amax((0, 2), keepdim=True), lambda a: a.amax((0, 2), keepdim=True), x, dtype=dtype)
    check(lambda a: a.max(), lambda a: a.max(), x, dtype=dtype)
    with pytest.raises(IndexError, match="dimension out of range"):
        strata.tensor(x).sum(3)
    # max(dim) gives (values, indices) and sum(dtype=) converts first: tests/python/test_semantics.py.
    assert strata.tensor(x).sum(dtype=strata.float64).dtype is strata.float64


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_and_losses(dtype):
    x = rand(4, 5, dtype=dtype)
    check(lambda a: strata.softmax(a, 1), lambda a: torch.softmax(a, 1), x, dtype=dtype)
    check(lambda a: a.log_softmax(-1), lambda a: a.log_softmax(-1), x, dtype=dtype)
    check(lambda a: a.softmax(0), lambda a: a.softmax(0), x, dtype=dtype)
    y = rand(4, 5, dtype=dtype)
    for red in ["mean", "sum", "none"]:
        check(lambda a, b: strata.mse_loss(a, b, reduction=red),
              lambda a, b: torch.nn.functional.mse_loss(a, b, reduction=red), x, y, dtype=dtype)
    p, t = rand(4, 5, dtype=dtype, low=0.05, high=0.95), rand(4, 5, dtype=dtype, low=0, high=1)
    check(lambda a, b: strata.binary_cross_entropy(a, b),
          lambda a, b: torch.nn.functional.binary_cross_entropy(a, b), p, t, dtype=dtype)
    pw = rand(5, dtype=dtype, low=0.5, high=2)
    check(lambda a, b: strata.binary_cross_entropy_with_logits(a, b, pos_weight=strata.tensor(pw), reduction="sum"),
          lambda a, b: torch.nn.functional.binary_cross_entropy_with_logits(a, b, pos_weight=torch.tensor(pw),
                                                                              reduction="sum"), x, t, dtype=dtype)
    target = np.array([0, 4, 2, 4])
    ts, tt = strata.tensor(target), torch.tensor(target)
    check(lambda a: strata.cross_entropy(a, ts, label_smoothing=0.1),
          lambda a: torch.nn.functional.cross_entropy(a, tt, label_smoothing=0.1), x, dtype=dtype)
    wt = rand(5, dtype=dtype, low=0.5, high=1.5)
    check(lambda a: strata.nll_loss(a.log_softmax(1), ts, weight=strata.tensor(wt), ignore_index=2),
          lambda a: torch.nn.functional.nll_loss(a.log_softmax(1), tt, weight=torch.tensor(wt), ignore_index=2),
          x, dtype=dtype)
    with pytest.raises(ValueError, match="avg is not a valid value for reduction"):
        strata.mse_loss(strata.tensor(x), strata.tensor(y), reduction="avg")
    with pytest.raises(NotImplementedError, match="probability"):
        strata.cross_entropy(strata.tensor(x), strata.tensor(y))
    with pytest.raises(IndexError, match="dimension out of range"):
        strata.softmax(strata.tensor(x), 2)


# ---- shapes and indexing -----------------------------------------------------------------------------

def test_shape_functions():
    x = rand(2, 3, 4)
    check(lambda a: strata.reshape(a, (4, -1)), lambda a: torch.reshape(a, (4, -1)), x)
    check(lambda a: strata.flatten(a, 1), lambda a: torch.flatten(a, 1), x)
    check(lambda a: strata.transpose(a, 0, 2), lambda a: torch.transpose(a, 0, 2), x)
    check(lambda a: strata.permute(a, (2, 0, 1)), lambda a: torch.permute(a, (2, 0, 1)), x)
    check(lambda a, b: strata.cat([a, b], 1), lambda a, b: torch.cat([a, b], 1), x, rand(2, 2, 4))
    check(lambda a: strata.narrow(a, 2, 1, 2), lambda a: torch.narrow(a, 2, 1, 2), x)
    check(lambda a: strata.split(a, 2, 2)[1] * 2, lambda a: torch.split(a, 2, 2)[1] * 2, x)
    check(lambda a: strata.split(a, [1, 3], dim=-1)[1], lambda a: torch.split(a, [1, 3], dim=-1)[1], x)
    idx = np.array([2, 0, 2])
    check(lambda a: strata.index_select(a, 1, strata.tensor(idx)),
          lambda a: torch.index_select(a, 1, torch.tensor(idx)), x)
    gi = RNG.integers(0, 3, (2, 2, 4))
    check(lambda a: strata.gather(a, 1, strata.tensor(gi)), lambda a: torch.gather(a, 1, torch.tensor(gi)), x)
    with pytest.raises(TypeError, match="int64 or int32"):
        strata.index_select(strata.tensor(x), 0, strata.tensor(idx.astype(np.float32)))
    with pytest.raises(TypeError, match="must be a tuple or list of Tensors"):
        strata.cat(strata.tensor(x))
    with pytest.raises(ValueError, match="must be positive"):
        strata.split(strata.tensor(x), 0)


def test_dot_interaction_matches_a_reference():
    feats = [rand(3, 4) for _ in range(3)]
    s, t = pair(*feats)
    out = strata.dot_interaction(s)
    T = torch.stack(t, 1)
    Z = T @ T.transpose(1, 2)
    li, lj = zip(*[(i, j) for i in range(3) for j in range(i)])
    ref = torch.cat([t[0], Z[:, list(li), list(lj)]], 1)
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ref.sum().backward()
    for a, b in zip(s, t):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_tensor_views_are_differentiable_when_recording():
    x = rand(2, 3, 4)
    check(lambda a: a.view(6, 4), lambda a: a.view(6, 4), x)
    check(lambda a: a.reshape(4, 6), lambda a: a.reshape(4, 6), x)
    check(lambda a: a.flatten(), lambda a: a.flatten(), x)
    check(lambda a: a.transpose(0, 1), lambda a: a.transpose(0, 1), x)
    check(lambda a: a.permute(1, 2, 0), lambda a: a.permute(1, 2, 0), x)
    check(lambda a: a.T, lambda a: a.permute(2, 1, 0), x)
    check(lambda a: a[0].t(), lambda a: a[0].t(), x)
    check(lambda a: a.unsqueeze(1), lambda a: a.unsqueeze(1), x)
    check(lambda a: a.unsqueeze(1).squeeze(), lambda a: a.unsqueeze(1).squeeze(), x)
    check(lambda a: a.expand(5, 2, 3, 4), lambda a: a.expand(5, 2, 3, 4), x)
    check(lambda a: a.expand(-1, 2, 4), lambda a: a.expand(-1, 2, 4), rand(3, 1, 4))
    check(lambda a: a.narrow(1, 1, 2), lambda a: a.narrow(1, 1, 2), x)
    check(lambda a: a.select(2, -1), lambda a: a.select(2, -1), x)
    check(lambda a: a[1, :, 1::2], lambda a: a[1, :, 1::2], x)
    check(lambda a: a[..., None, -2], lambda a: a[..., None, -2], x)
    check(lambda a: a[strata.tensor([1, 0, 1, -1])], lambda a: a[torch.tensor([1, 0, 1, -1])], x)
    check(lambda a: a.clone(), lambda a: a.clone(), x)
    check(lambda a: a.transpose(0, 2).contiguous(), lambda a: a.transpose(0, 2).contiguous(), x)
    check(lambda a: a.double().float(), lambda a: a.double().float(), x)
    with pytest.raises(IndexError, match="out of bounds"):
        strata.tensor(x)[strata.tensor([0, 2])]
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        strata.tensor(x)[strata.tensor([1.0, 0.0])]


def test_views_stay_raw_zero_copy_without_grad():
    x = strata.tensor(rand(2, 3, 4))
    for v in [x.view(6, 4), x.transpose(0, 1), x[1, :, ::2], x.unsqueeze(0), x.expand(2, 2, 3, 4)]:
        assert v._shares_storage(x) and v.grad_fn is None
    xr = strata.tensor(rand(2, 3)).requires_grad_()
    with strata.no_grad():
        v = xr.view(3, 2)
    assert v.grad_fn is None and v._shares_storage(xr)
    v = xr.view(3, 2)
    assert v.grad_fn.name() == "ReshapeBackward" and v._shares_storage(xr)


def test_non_contiguous_inputs():
    base = rand(4, 6)
    check(lambda a: a.t() @ a, lambda a: a.t() @ a, base)
    check(lambda a: (a[:, ::2].exp() * a[:, 1::2]).sum(0), lambda a: (a[:, ::2].exp() * a[:, 1::2]).sum(0), base)
    check(lambda a: strata.softmax(a.t(), 1), lambda a: torch.softmax(a.t(), 1), base)


# ---- in-place ------------------------------------------------------------------------------------------

def test_inplace_methods_values_and_version_bumps():
    a = rand(3, 4)
    x = strata.tensor(a)
    v0 = x._version
    assert x.add_(1.0) is x
    x.sub_(strata.tensor(a), alpha=2).mul_(3).div_(2.0).clamp_(-1, 0.5)
    ref = np.clip((a + 1 - 2 * a) * 3 / 2, -1, 0.5)
    np.testing.assert_allclose(x.numpy(), ref, rtol=1e-6)
    assert x._version > v0
    x += 1
    x *= strata.ones(4)
    x -= 0.5
    x /= 2
    np.testing.assert_allclose(x.numpy(), (ref + 0.5) / 2, rtol=1e-6)
    y = strata.tensor(a)
    y.fill_(2.0)
    np.testing.assert_array_equal(y.numpy(), np.full((3, 4), 2.0, np.float32))
    y.copy_(strata.tensor(a[0]))
    np.testing.assert_array_equal(y.numpy(), np.broadcast_to(a[0], (3, 4)))
    y.relu_()
    np.testing.assert_array_equal(y.numpy(), np.maximum(np.broadcast_to(a[0], (3, 4)), 0))
    with pytest.raises(strata.StrataError, match="doesn't match the broadcast shape"):
        strata.ones(4).add_(strata.ones(3, 4))


def test_inplace_refuses_a_leaf_that_requires_grad_unless_no_grad():
    w = strata.ones(3).requires_grad_()
    for f in [lambda: w.add_(1), lambda: w.mul_(2), lambda: w.zero_(), lambda: w.fill_(1),
              lambda: w.copy_(strata.ones(3)), lambda: w.clamp_(0, 1)]:
        with pytest.raises(strata.StrataError, match="a leaf Variable that requires grad is being used in an "
                                                     "in-place operation."):
            f()
    with pytest.raises(strata.StrataError, match="leaf Variable"):
        w += 1
    with strata.no_grad():
        w.sub_(0.5)
        w[0] = 4.0
    np.testing.assert_array_equal(w.numpy(), [4.0, 0.5, 0.5])
    assert w.is_leaf and w.requires_grad


def test_inplace_on_non_leaf_is_recorded_like_pytorch():
    a, b = rand(3, 4), rand(4)
    s, t = pair(a, b)
    outs = []
    for (x, y) in [s, t]:
        h = x * 2
        h.mul_(y)
        h += 1
        h.clamp_(max=1.5)
        h.relu_()
        outs.append(h * 1)
    np.testing.assert_allclose(outs[0].detach().numpy(), outs[1].detach().numpy(), rtol=1e-6)
    outs[0].sum().backward()
    outs[1].sum().backward()
    np.testing.assert_allclose(s[0].grad.numpy(), t[0].grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(s[1].grad.numpy(), t[1].grad.numpy(), rtol=1e-6)
    # copy_ into a plain tensor makes it depend on src
    for xs, mod in [(s[1], strata), (t[1], torch)]:
        xs.grad = None
    buf_s, buf_t = strata.zeros(3, 4), torch.zeros(3, 4)
    buf_s.copy_(s[1])
    buf_t.copy_(t[1])
    (buf_s * strata.tensor(a)).sum().backward()
    (buf_t * torch.tensor(a)).sum().backward()
    np.testing.assert_allclose(s[1].grad.numpy(), t[1].grad.numpy(), rtol=1e-6)


def test_inplace_after_a_save_is_detected_by_backward():
    x = strata.tensor(rand(3)).requires_grad_()
    y = x.sigmoid()  # saves its output
    y.mul_(2)
    with pytest.raises(strata.StrataError, match="modified by an in-?place operation"):
        y.sum().backward()


def test_inplace_on_a_differentiable_view_is_recorded_like_pytorch():
    a = rand(3, 4)
    grads = []
    for L in (strata, torch):
        x = L.tensor(a).requires_grad_()
        h = x * 1
        h[0].mul_(2)
        h[1] = 1.0
        (h * h).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)

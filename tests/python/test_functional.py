"""strata.nn.functional against torch.nn.functional 2.13 (same NumPy inputs, forward and gradients),
and its refusals: unsupported arguments raise NotImplementedError naming them, bad input raises."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import strata
import strata.nn.functional as F

RNG = np.random.default_rng(2)


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    return RNG.uniform(low, high, shape).astype(dtype)


def check(fs, ft, *arrays, dtype=np.float32, tol=None):
    tol = tol or (dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-10, atol=1e-10))
    s = [strata.tensor(a).requires_grad_(np.issubdtype(a.dtype, np.floating)) for a in arrays]
    t = [torch.tensor(a, requires_grad=bool(np.issubdtype(a.dtype, np.floating))) for a in arrays]
    os_, ot = fs(*s), ft(*t)
    np.testing.assert_allclose(os_.detach().numpy(), ot.detach().numpy(), **tol)
    g = rand(*ot.shape, dtype=dtype)
    os_.backward(strata.tensor(g))
    ot.backward(torch.tensor(g))
    for a, b in zip(s, t):
        if b.requires_grad:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **tol)


def test_namespace():
    assert strata.nn.functional is F
    for name in F.__all__:
        assert callable(getattr(F, name)), name
    assert strata.matmul is strata._C.matmul and "matmul" in strata.__all__


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_activations(dtype):
    x = rand(4, 7, dtype=dtype)
    for fs, ft in [(F.relu, TF.relu), (F.sigmoid, TF.sigmoid), (F.tanh, TF.tanh), (F.gelu, TF.gelu),
                   (lambda a: F.gelu(a, approximate="tanh"), lambda a: TF.gelu(a, approximate="tanh")),
                   (lambda a: F.leaky_relu(a, 0.1), lambda a: TF.leaky_relu(a, 0.1)),
                   (lambda a: F.softmax(a, dim=0), lambda a: TF.softmax(a, dim=0)),
                   (lambda a: F.log_softmax(a, 1), lambda a: TF.log_softmax(a, 1)),
                   (lambda a: F.flatten(a.reshape(2, 2, 7), 1), lambda a: torch.flatten(a.reshape(2, 2, 7), 1))]:
        check(fs, ft, x, dtype=dtype)


def test_inplace_relu_on_a_non_leaf():
    x = rand(3, 4)
    check(lambda a: F.relu(a * 2, inplace=True), lambda a: TF.relu(a * 2, inplace=True), x)
    check(lambda a: F.leaky_relu(a * 2, 0.2, inplace=True), lambda a: TF.leaky_relu(a * 2, 0.2, inplace=True), x)
    w = strata.ones(3).requires_grad_()
    with pytest.raises(strata.StrataError, match="leaf Variable"):
        F.relu(w, inplace=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_layers(dtype):
    x = rand(2, 3, 8, 8, dtype=dtype)
    w, b = rand(4, 3, 3, 3, dtype=dtype), rand(4, dtype=dtype)
    check(lambda a, ww, bb: F.conv2d(a, ww, bb, stride=(2, 1), padding=1),
          lambda a, ww, bb: TF.conv2d(a, ww, bb, stride=(2, 1), padding=1), x, w, b, dtype=dtype,
          tol=dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else None)
    check(lambda a: F.max_pool2d(a, 2), lambda a: TF.max_pool2d(a, 2), x, dtype=dtype)
    check(lambda a: F.avg_pool2d(a, 3, stride=2, padding=1), lambda a: TF.avg_pool2d(a, 3, stride=2, padding=1), x,
          dtype=dtype)
    check(lambda a: F.adaptive_avg_pool2d(a, (2, 3)), lambda a: TF.adaptive_avg_pool2d(a, (2, 3)), x, dtype=dtype)
    lw, lb = rand(5, 8, dtype=dtype), rand(5, dtype=dtype)
    check(F.linear, TF.linear, x, lw, lb, dtype=dtype)
    check(lambda a, ww, bb: F.layer_norm(a, (8,), ww, bb), lambda a, ww, bb: TF.layer_norm(a, (8,), ww, bb),
          x, rand(8, dtype=dtype), rand(8, dtype=dtype), dtype=dtype)
    rm, rv = np.zeros(3, dtype), np.ones(3, dtype)
    rms, rvs, rmt, rvt = strata.tensor(rm), strata.tensor(rv), torch.tensor(rm), torch.tensor(rv)
    check(lambda a, ww, bb: F.batch_norm(a, rms, rvs, ww, bb, training=True),
          lambda a, ww, bb: TF.batch_norm(a, rmt, rvt, ww, bb, training=True), x, rand(3, dtype=dtype),
          rand(3, dtype=dtype), dtype=dtype, tol=dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else None)
    np.testing.assert_allclose(rms.numpy(), rmt.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rvs.numpy(), rvt.numpy(), rtol=1e-5, atol=1e-6)


def test_dropout():
    x = strata.ones(2000)
    y = F.dropout(x, 0.3)
    kept = y.numpy() != 0
    np.testing.assert_allclose(y.numpy()[kept], 1 / 0.7, rtol=1e-6)
    assert 0.6 < kept.mean() < 0.8
    np.testing.assert_array_equal(F.dropout(x, 0.3, training=False).numpy(), x.numpy())
    with pytest.raises(ValueError, match="between 0 and 1, but got -0.1"):
        F.dropout(x, -0.1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout(x, 1.01)
    with pytest.raises(TypeError, match="p must be a number"):
        F.dropout(x, "0.5")


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    x, y = rand(6, 4), rand(6, 4)
    check(lambda a, b: F.mse_loss(a, b, reduction=reduction), lambda a, b: TF.mse_loss(a, b, reduction=reduction),
          x, y)
    p, t = rand(6, 4, low=0.05, high=0.95), rand(6, 4, low=0.0, high=1.0)
    w = rand(4, low=0.5, high=1.5)
    check(lambda a, b: F.binary_cross_entropy(a, b, weight=strata.tensor(w), reduction=reduction),
          lambda a, b: TF.binary_cross_entropy(a, b, weight=torch.tensor(w), reduction=reduction), p, t)
    check(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
          lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction), x, t)
    tgt = np.array([0, 3, 1, 1, 2, -100])
    check(lambda a: F.cross_entropy(a, strata.tensor(tgt), reduction=reduction),
          lambda a: TF.cross_entropy(a, torch.tensor(tgt), reduction=reduction), x)
    check(lambda a: F.nll_loss(F.log_softmax(a, 1), strata.tensor(tgt), reduction=reduction),
          lambda a: TF.nll_loss(TF.log_softmax(a, 1), torch.tensor(tgt), reduction=reduction), x)


def test_cross_entropy_spatial_and_weighted():
    x = rand(2, 3, 4, 5)
    tgt = RNG.integers(0, 3, (2, 4, 5))
    w = rand(3, low=0.5, high=2.0)
    check(lambda a: F.cross_entropy(a, strata.tensor(tgt), weight=strata.tensor(w), label_smoothing=0.2),
          lambda a: TF.cross_entropy(a, torch.tensor(tgt), weight=torch.tensor(w), label_smoothing=0.2), x)


def test_embedding_bag_modes_and_shapes():
    weight = rand(10, 3)
    idx = np.array([1, 2, 4, 5, 4, 3, 2, 9])
    offs = np.array([0, 3, 3, 6])
    for mode in ["mean", "sum"]:
        check(lambda w: F.embedding_bag(strata.tensor(idx), w, strata.tensor(offs), mode=mode),
              lambda w: TF.embedding_bag(torch.tensor(idx), w, torch.tensor(offs), mode=mode), weight)
    # default mode is 'mean'
    check(lambda w: F.embedding_bag(strata.tensor(idx), w, strata.tensor(offs)),
          lambda w: TF.embedding_bag(torch.tensor(idx), w, torch.tensor(offs)), weight)
    check(lambda w: F.embedding_bag(strata.tensor(idx), w, strata.tensor(np.array([0, 3, 8])),
                                    include_last_offset=True, mode="sum"),
          lambda w: TF.embedding_bag(torch.tensor(idx), w, torch.tensor(np.array([0, 3, 8])),
                                     include_last_offset=True, mode="sum"), weight)
    idx2 = idx.reshape(2, 4)
    psw = rand(2, 4)
    check(lambda w, p: F.embedding_bag(strata.tensor(idx2), w, mode="sum", per_sample_weights=p),
          lambda w, p: TF.embedding_bag(torch.tensor(idx2), w, mode="sum", per_sample_weights=p), weight, psw)
    check(lambda w: F.embedding_bag(strata.tensor(idx2), w), lambda w: TF.embedding_bag(torch.tensor(idx2), w),
          weight)


def test_unsupported_arguments_raise_not_implemented_naming_them():
    x = strata.tensor(rand(1, 2, 4, 4))
    w = strata.tensor(rand(10, 3))
    idx, offs = strata.tensor(np.array([1, 2])), strata.tensor(np.array([0]))
    cases = [
        (lambda: F.embedding_bag(idx, w, offs, mode="max"), "max"),
        (lambda: F.embedding_bag(idx, w, offs, max_norm=1.0), "max_norm"),
        (lambda: F.embedding_bag(idx, w, offs, sparse=True), "sparse"),
        (lambda: F.embedding_bag(idx, w, offs, padding_idx=0), "padding_idx"),
        (lambda: F.embedding_bag(idx, w, offs, scale_grad_by_freq=True), "scale_grad_by_freq"),
        (lambda: F.embedding_bag(idx, w, offs, per_sample_weights=strata.ones(2)), "per_sample_weights"),
        (lambda: F.max_pool2d(x, 2, return_indices=True), "return_indices"),
        (lambda: F.avg_pool2d(x, 2, divisor_override=2), "divisor_override"),
        (lambda: F.mse_loss(x, x, size_average=True), "size_average"),
        (lambda: F.nll_loss(x, x, reduce=False), "reduce"),
        (lambda: F.softmax(x, 1, dtype=strata.float64), "dtype"),
        (lambda: F.cross_entropy(x, x), "probability"),
        (lambda: F.batch_norm(x, None, None, training=True, momentum=None), "momentum"),
    ]
    for fn, name in cases:
        with pytest.raises(NotImplementedError, match=name):
            fn()


def test_bad_input():
    x = strata.tensor(rand(4, 5))
    t = strata.tensor(np.array([0, 1, 2, 3]))
    with pytest.raises(ValueError, match="foo is not a valid value for reduction"):
        F.cross_entropy(x, t, reduction="foo")
    with pytest.raises(ValueError, match="bar is not a valid value for reduction"):
        F.mse_loss(x, x, reduction="bar")
    with pytest.raises(TypeError, match="argument 'reduction' must be str"):
        F.nll_loss(x, t, reduction=1)
    with pytest.raises(IndexError, match="dimension out of range"):
        F.softmax(x, 2)
    with pytest.raises(IndexError, match="dimension out of range"):
        F.log_softmax(x, -3)
    with pytest.raises(strata.StrataError):  # wrong rank for conv2d
        F.conv2d(x, strata.tensor(rand(2, 1, 3, 3)))
    with pytest.raises(strata.StrataError):  # wrong rank for max_pool2d
        F.max_pool2d(x.reshape(20), 2)
    with pytest.raises(strata.StrataError):  # integer input
        F.relu(t)
    with pytest.raises(strata.StrataError):  # dtype mismatch
        F.linear(x, strata.tensor(rand(3, 5).astype(np.float64)))
    with pytest.raises(strata.StrataError):  # target out of range
        F.cross_entropy(x, strata.tensor(np.array([0, 1, 2, 7])))
    with pytest.raises(ValueError, match="approximate"):
        F.gelu(x, approximate="fast")
    with pytest.raises(TypeError, match="argument 'input' must be Tensor, not list"):
        F.linear([1.0], x)
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, t, label_smoothing=1.5)
    w = strata.tensor(rand(10, 3))
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(strata.tensor(np.zeros((2, 2), np.int64)), w, strata.tensor(np.array([0])))
    with pytest.raises(ValueError, match="offsets has to be a 1-D Tensor but got None"):
        F.embedding_bag(strata.tensor(np.array([1, 2])), w)
    with pytest.raises(ValueError, match="weight has to be a 2-D"):
        F.embedding_bag(strata.tensor(np.array([1, 2])), strata.ones(10), strata.tensor(np.array([0])))
    with pytest.raises(ValueError, match="mode has to be one of"):
        F.embedding_bag(strata.tensor(np.array([1, 2])), w, strata.tensor(np.array([0])), mode="avg")
    with pytest.raises(strata.StrataError):  # index out of range
        F.embedding_bag(strata.tensor(np.array([1, 20])), w, strata.tensor(np.array([0])))

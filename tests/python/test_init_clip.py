"""strata.nn.init, strata.nn.utils.clip_grad_* and strata.Generator against torch."""

import math
import re

import numpy as np
import pytest
import torch

import strata
import strata.nn as nn


def check(exc, pattern, fn, *args, **kwargs):
    with pytest.raises(exc, match=re.escape(pattern)):
        fn(*args, **kwargs)


# ---- nn.init -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,args", [("linear", ()), ("conv2d", ()), ("sigmoid", ()), ("tanh", ()), ("relu", ()),
                                       ("leaky_relu", ()), ("leaky_relu", (0.2,)), ("leaky_relu", (3,)),
                                       ("selu", ())])
def test_calculate_gain_matches_torch(name, args):
    assert nn.init.calculate_gain(name, *args) == pytest.approx(torch.nn.init.calculate_gain(name, *args), rel=1e-15)


SHAPE = (256, 128, 3)  # fan_in 384, fan_out 768


def moments_of(fn_name, lib_init, make, **kwargs):
    t = make()
    getattr(lib_init, fn_name)(t, **kwargs)
    a = np.asarray(t.detach().numpy() if hasattr(t, "detach") else t.numpy(), dtype=np.float64)
    return a.mean(), a.std(), a.min(), a.max()


@pytest.mark.parametrize("fn_name,kwargs", [
    ("uniform_", dict(a=-0.5, b=2.0)),
    ("normal_", dict(mean=0.3, std=0.7)),
    ("xavier_uniform_", dict(gain=2.0)),
    ("xavier_normal_", dict()),
    ("kaiming_uniform_", dict(a=math.sqrt(5))),
    ("kaiming_uniform_", dict(mode="fan_out", nonlinearity="relu")),
    ("kaiming_normal_", dict(nonlinearity="tanh")),
    ("kaiming_normal_", dict(a=0.1, mode="fan_out")),
    ("trunc_normal_", dict(mean=0.1, std=0.5, a=-0.4, b=0.9)),
    ("trunc_normal_", dict(std=0.02)),
])
def test_random_inits_follow_torchs_distribution(fn_name, kwargs):
    mean_s, std_s, lo_s, hi_s = moments_of(fn_name, nn.init, lambda: strata.empty(*SHAPE), **kwargs)
    mean_t, std_t, lo_t, hi_t = moments_of(fn_name, torch.nn.init, lambda: torch.empty(*SHAPE), **kwargs)
    n = np.prod(SHAPE)
    # Moments within a few standard errors of torch's; bounds of bounded draws within the same range.
    assert abs(mean_s - mean_t) < 6 * std_t / math.sqrt(n) + 1e-12
    assert std_s == pytest.approx(std_t, rel=0.01)
    # Bounded draws reach the same bounds (trunc_normal_ with std=0.02 never nears its ±2).
    if fn_name in ("uniform_", "xavier_uniform_", "kaiming_uniform_") or "b" in kwargs:
        span = hi_t - lo_t
        assert lo_s >= lo_t - 1e-3 * span and hi_s <= hi_t + 1e-3 * span
        assert lo_s < lo_t + 0.01 * span and hi_s > hi_t - 0.01 * span


def test_inits_are_in_place_deterministic_and_take_a_generator():
    lin = nn.Linear(20, 30)
    w = lin.weight
    assert nn.init.xavier_uniform_(w) is w
    strata.manual_seed(7)
    nn.init.kaiming_normal_(lin.weight)
    first = lin.weight.numpy().copy()
    strata.manual_seed(7)
    nn.init.kaiming_normal_(lin.weight)
    np.testing.assert_array_equal(lin.weight.numpy(), first)  # the module's own parameter changed
    g1, g2 = strata.Generator().manual_seed(3), strata.Generator().manual_seed(3)
    a, b = strata.empty(5, 4), strata.empty(5, 4)
    nn.init.normal_(a, generator=g1)
    strata.rand(100)  # the default generator's draws do not touch g2's stream
    nn.init.normal_(b, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not lin.weight.grad_fn  # no autograd history
    assert lin.weight.requires_grad


def test_deterministic_inits_match_torch_exactly():
    for fn, args in ((nn.init.constant_, (0.25,)), (nn.init.zeros_, ()), (nn.init.ones_, ()), (nn.init.eye_, ())):
        s, t = strata.empty(3, 5), torch.empty(3, 5)
        fn(s, *args)
        getattr(torch.nn.init, fn.__name__)(t, *args)
        np.testing.assert_array_equal(s.numpy(), t.numpy())
    d = strata.empty(4, 2, dtype=strata.float64)
    nn.init.eye_(d)
    np.testing.assert_array_equal(d.numpy(), np.eye(4, 2))


@pytest.mark.parametrize("shape", [(6, 6), (10, 4), (3, 7), (4, 2, 3)])
def test_orthogonal_gives_orthonormal_rows_or_columns(shape):
    t = strata.empty(*shape, dtype=strata.float64)
    nn.init.orthogonal_(t, gain=2.0)
    q = t.numpy().reshape(shape[0], -1) / 2.0
    small = min(q.shape)
    gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-12)


def test_init_bad_arguments_raise_torchs_errors():
    check(ValueError, "Unsupported nonlinearity softplus", nn.init.calculate_gain, "softplus")
    check(ValueError, "negative_slope x not a valid number", nn.init.calculate_gain, "leaky_relu", "x")
    check(ValueError, "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions",
          nn.init.xavier_uniform_, strata.empty(5))
    check(ValueError, "Mode fan_avg not supported, please use one of", nn.init.kaiming_uniform_, strata.empty(3, 3),
          mode="fan_avg")
    check(ValueError, "Only tensors with 2 dimensions are supported", nn.init.eye_, strata.empty(2, 2, 2))
    check(ValueError, "Only tensors with 2 or more dimensions are supported", nn.init.orthogonal_, strata.empty(4))
    check(TypeError, "argument 'tensor' must be a strata.Tensor, got ndarray", nn.init.normal_, np.zeros(3))
    check(TypeError, "generator must be a strata.Generator or None, got int", nn.init.uniform_, strata.empty(2),
          generator=3)
    check(ValueError, "expected a floating-point tensor", nn.init.normal_, strata.zeros(3, dtype=strata.int64))
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        nn.init.kaiming_uniform_(strata.empty(0, 3))
    with pytest.warns(UserWarning, match="mean is more than 2 std from"):
        nn.init.trunc_normal_(strata.empty(3), mean=10.0)


def test_generator_state_round_trip():
    g = strata.Generator().manual_seed(11)
    assert g.initial_seed() == 11
    state = g.get_state()
    a = strata.empty(6)
    nn.init.uniform_(a, generator=g)
    g.set_state(state)
    b = strata.empty(6)
    nn.init.uniform_(b, generator=g)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    check(ValueError, "expected the uint8 tensor of 16 bytes", g.set_state, strata.zeros(3))
    check(ValueError, "device 'cuda' is not available", strata.Generator, "cuda")
    check(TypeError, "seed must be an int", g.manual_seed, 1.5)


# ---- clip_grad -----------------------------------------------------------------------------------

def grads_pair(dtype=np.float32, seed=0, scale=3.0):
    rng = np.random.default_rng(seed)
    values = [np.asarray(rng.standard_normal(s) * scale, dtype=dtype) for s in ((4, 3), (5,), ())]
    pt = [torch.zeros(v.shape, dtype=torch.from_numpy(v).dtype, requires_grad=True) for v in values]
    ps = [strata.zeros(v.shape, dtype=strata.float32 if dtype == np.float32 else strata.float64)
          for v in values]
    for a, b, v in zip(pt, ps, values):
        a.grad = torch.tensor(v)
        b.grad = strata.tensor(v)
    return pt, ps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (100.0, 2.0), (0.5, 1.0), (2.0, float("inf")),
                                                (1.0, 3.5), (0.3, "inf")])
def test_clip_grad_norm_matches_torch(max_norm, norm_type, dtype):
    pt, ps = grads_pair(dtype)
    total_t = torch.nn.utils.clip_grad_norm_(pt, max_norm, norm_type)
    total_s = nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
    rtol = 1e-6 if dtype == np.float32 else 1e-12
    assert total_s.dtype == (strata.float32 if dtype == np.float32 else strata.float64)
    assert total_s.shape == ()
    np.testing.assert_allclose(total_s.item(), total_t.item(), rtol=rtol)
    for a, b in zip(pt, ps):
        np.testing.assert_allclose(b.grad.numpy(), a.grad.numpy(), rtol=rtol, atol=1e-7)


def test_clip_grad_norm_edge_cases():
    assert nn.utils.clip_grad_norm_([strata.zeros(3)], 1.0).item() == 0.0  # no gradients
    p = strata.zeros(2)
    p.grad = strata.tensor([3.0, 4.0])
    assert nn.utils.clip_grad_norm_(p, 10.0).item() == pytest.approx(5.0)  # a single tensor
    np.testing.assert_allclose(p.grad.numpy(), [3.0, 4.0], rtol=1e-6)  # below max_norm: ~unchanged
    p.grad = strata.tensor([float("nan"), 1.0])
    check(RuntimeError, "The total norm of order 2.0 for gradients from `parameters` is non-finite",
          nn.utils.clip_grad_norm_, [p], 1.0, error_if_nonfinite=True)
    assert np.isnan(p.grad.numpy()[0]) and p.grad.numpy()[1] == 1.0  # unchanged by the failed call
    check(TypeError, "max_norm must be a number, got NoneType", nn.utils.clip_grad_norm_, [p], None)
    check(TypeError, "parameters must hold Tensors, got int", nn.utils.clip_grad_norm_, [1, 2], 1.0)
    check(ValueError, "norm_type must be a number, got 'two'", nn.utils.clip_grad_norm_, [p], 1.0, "two")


def test_clip_grad_value_matches_torch():
    pt, ps = grads_pair(np.float64)
    torch.nn.utils.clip_grad_value_(pt, 1.5)
    assert nn.utils.clip_grad_value_(ps, 1.5) is None
    for a, b in zip(pt, ps):
        np.testing.assert_array_equal(b.grad.numpy(), a.grad.numpy())
    pt, ps = grads_pair(np.float64)
    torch.nn.utils.clip_grad_value_(pt, -0.5)  # torch's clamp with min > max
    nn.utils.clip_grad_value_(ps, -0.5)
    for a, b in zip(pt, ps):
        np.testing.assert_array_equal(b.grad.numpy(), a.grad.numpy())
    check(TypeError, "clip_value must be a number, got list", nn.utils.clip_grad_value_, ps, [1.0])

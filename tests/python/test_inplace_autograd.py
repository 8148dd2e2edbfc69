"""In-place ops and assignment under autograd (issue 26 part 3): the same scripts run with strata and
with torch 2.13, comparing values and gradients, the rebased histories and the errors."""

import numpy as np
import pytest
import torch

import strata

LIBS = (strata, torch)


def data(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape)


def leaves(L, *arrays):
    return [L.tensor(a).requires_grad_() for a in arrays]


def arr(t):
    return t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t.detach().numpy())


def run_both(script, *arrays):
    """Runs script(L, *leaves) -> output in both libraries, backward of sum(out * w); returns, per
    library, the output and the leaves' gradients."""
    w = data(script(torch, *leaves(torch, *arrays)).shape, 99)
    results = []
    for L in LIBS:
        ls = leaves(L, *arrays)
        out = script(L, *ls)
        (out * L.tensor(w)).sum().backward()
        results.append((arr(out), [arr(x.grad) if x.grad is not None else None for x in ls]))
    return results


def assert_same(script, *arrays):
    (out_s, grads_s), (out_t, grads_t) = run_both(script, *arrays)
    np.testing.assert_allclose(out_s, out_t, rtol=1e-6, atol=1e-9)
    for i, (gs, gt) in enumerate(zip(grads_s, grads_t)):
        assert (gs is None) == (gt is None), f"leaf {i}: strata {gs}, torch {gt}"
        if gs is not None:
            np.testing.assert_allclose(gs, gt, rtol=1e-6, atol=1e-9, err_msg=f"gradient of leaf {i}")


# ---- gradients through in-place writes -------------------------------------------------------------

def test_augmented_assignment_into_a_slice():
    def script(L, a, y):
        x = a * 1
        x[1:3] += y
        return x * x
    assert_same(script, data((5, 3), 0), data((2, 3), 1))


def test_mul_into_a_narrowed_view():
    def script(L, a, z):
        x = a * 1
        x.narrow(1, 1, 2).mul_(z)
        return x
    assert_same(script, data((3, 4), 2), data((3, 2), 3))


def test_two_writes_into_overlapping_views_and_a_stale_view_read_afterwards():
    def script(L, a, z1, z2):
        x = a * 1
        v1, v2 = x[0:3], x[2:5]
        v1.mul_(z1)
        v2.mul_(z2)
        return L.cat([x, v1 * 2])
    assert_same(script, data(5, 4), data(3, 5), data(3, 6))


def test_a_view_of_a_view():
    def script(L, a, z):
        x = (a * 1).reshape(4, 5)
        x[1:3][:, 2:4].t().div_(z)
        return x
    assert_same(script, data(20, 7), data((2, 2), 8) + 3.0)


def test_assignment_of_a_value_that_requires_grad_into_a_plain_tensor():
    def script(L, y):
        x = L.zeros(4, 3, dtype=L.float64)
        x[1:3] = y  # broadcast
        assert x.requires_grad and not x.is_leaf
        b = L.zeros(4, 3, dtype=L.float64)
        b[2:].copy_(y)
        b.narrow(0, 0, 2).add_(y * 3)
        return x * x + b
    assert_same(script, data((1, 3), 9))


def test_assignment_of_numbers_and_fills():
    def script(L, a):
        x = a * 1
        x[:, 0] = 2.5
        x[:, 1].fill_(1)
        x[2].zero_()
        return x * x
    assert_same(script, data((3, 3), 10))


def test_advanced_index_writes():
    def script(L, a, y, z, v):
        x = a * 1
        x[1] = y
        x[L.tensor([0, 3])] += z
        x[L.tensor([[True, False], [False, False], [False, True], [False, False]])] = v
        x.index_put_((L.tensor([2]),), y * 2, accumulate=True)
        return x
    assert_same(script, data((4, 2), 11), data(2, 12), data((2, 2), 13), data((), 14))


def test_indexed_in_place_ops_on_views():
    idx = np.array([2, 0])
    scatter_idx = np.array([[1, 0], [1, 1], [0, 0], [1, 0], [1, 1]])

    def script(L, a, src, value, s2):
        x = a * 1
        x[1:4].index_add_(0, L.tensor(idx), src)
        x.masked_fill_(a.detach() > 0, value)
        x[:, 0:2].scatter_add_(1, L.tensor(scatter_idx), s2)
        return x
    assert_same(script, data((5, 3), 15), data((2, 3), 16), data((), 17), data((5, 2), 18))


def test_unary_and_arithmetic_in_place_on_views():
    def script(L, a, y):
        x = a * 1
        x[0:4].clamp_(-0.5, 0.7)
        x.sub_(y, alpha=0.5)
        x[4:].add_(y[4:], alpha=2.0)
        x /= 3
        x[1].exp_()  # last: torch saves exp's output, the storage itself
        return x
    assert_same(script, data(6, 19), data(6, 20))


@pytest.mark.parametrize("method", ["tanh_", "sigmoid_", "relu_", "exp_", "sin_"])
def test_unary_in_place_methods_on_a_view(method):
    def script(L, a):
        x = a * 1
        getattr(x[1:3], method)()  # last write: torch saves some of these ops' output, the storage itself
        return x
    assert_same(script, data((4, 2), 25))


def test_a_stale_view_read_out_of_place_follows_the_base():
    def script(L, a):
        x = a * 1
        v = x[1:3]
        x.mul_(3)
        return v * v
    assert_same(script, data(4, 21))


def test_copy_into_a_view_converts_and_broadcasts():
    def script(L, a, y):
        x = a * 1
        x[0:2].copy_(y.float())
        return x
    assert_same(script, data((3, 4), 22), data(4, 23))


def test_histories_and_versions_match_pytorch():
    names = []
    for L in LIBS:
        a = L.tensor(data(3, 24)).requires_grad_()
        x = a * 1
        v = x[0:2]
        v0, x0 = v._version, x._version
        v.mul_(2)
        assert v._version == v0 + 1 and x._version == x0 + 1
        grad_fn_name = (lambda n: type(n).__name__) if L is torch else (lambda n: n.name())
        names.append((grad_fn_name(x.grad_fn), grad_fn_name(v.grad_fn).rstrip("0")))
    assert names[0] == names[1] == ("CopySlices", "AsStridedBackward")


def test_optimizer_style_updates_without_grad_stay_plain_writes():
    for L in LIBS:
        p = L.tensor([1.0, 2.0, 3.0]).requires_grad_()
        with L.no_grad():
            p.mul_(2)
            p[0:1] += 1
            p[2] = 0.0
        assert p.is_leaf and p.grad_fn is None
        assert p.tolist() == [3.0, 4.0, 0.0]


# ---- errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("write, message", [
    (lambda a: a.add_(1), "a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda a: a.masked_fill_(a.detach() > 0, 1.0), "a leaf Variable that requires grad is being used in an in-place"),
    (lambda a: a[0:2].mul_(2), "a view of a leaf Variable that requires grad is being used in an in-place operation."),
    (lambda a: a.__setitem__(0, 1.0), "a view of a leaf Variable that requires grad"),
    (lambda a: a.__setitem__(a.detach() > 0, 1.0), "a leaf Variable that requires grad"),
])
def test_writes_into_a_leaf_that_requires_grad_raise(write, message):
    for L in LIBS:
        a = L.tensor([1.0, -2.0, 3.0]).requires_grad_()
        with pytest.raises(RuntimeError, match=message):
            write(a)
        assert a.tolist() == [1.0, -2.0, 3.0]


def test_a_saved_value_modified_in_place_raises_at_backward():
    for L in LIBS:
        a = L.tensor([1.0, -2.0, 3.0]).requires_grad_()
        y = a.sigmoid()  # saves its output
        y.add_(1)
        with pytest.raises(RuntimeError, match="one of the variables needed for gradient computation has been "
                                               "modified by an inplace operation"):
            y.sum().backward()
        b = L.tensor([1.0, 2.0]).requires_grad_()
        x = b * 1
        z = x * b  # saves x for b's gradient
        x[1:].fill_(0)  # through a view: the version counter is shared
        with pytest.raises(RuntimeError, match="is at version .*; expected version .* instead"):
            z.sum().backward()


def test_writes_into_expanded_views_and_mismatched_results_raise():
    for L in LIBS:
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor refers to a single "
                                               "memory location"):
            L.zeros(3).expand(2, 3).add_(1)
        with pytest.raises(RuntimeError, match=r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]"):
            L.zeros(3).add_(L.zeros(2, 3))
        with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
            L.zeros(3, dtype=L.int64).add_(1.5)

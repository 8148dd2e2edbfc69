"""The autograd surface of strata.Tensor (requires_grad, grad, is_leaf, grad_fn, backward, detach)
and the grad-mode switches. Gradients of the ops themselves are tested with the op bindings."""
import numpy as np
import pytest

import strata


def test_requires_grad_on_leaves_and_grad_assignment():
    t = strata.ones(2, 3)
    assert not t.requires_grad and t.is_leaf and t.grad is None and t.grad_fn is None
    assert t.requires_grad_() is t
    assert t.requires_grad
    t.requires_grad = False
    assert not t.requires_grad
    t.grad = strata.full((2, 3), 2.0)
    np.testing.assert_array_equal(t.grad.numpy(), np.full((2, 3), 2.0, np.float32))
    t.grad = None
    assert t.grad is None


def test_grad_assignment_refuses_wrong_shape_type_and_dtype():
    t = strata.ones(2, 3)
    with pytest.raises(ValueError, match=r"different size: got \[3, 2\], expected \[2, 3\]"):
        t.grad = strata.ones(3, 2)
    with pytest.raises(TypeError, match="different type: got float64, expected float32"):
        t.grad = strata.ones(2, 3, dtype=strata.float64)
    with pytest.raises(TypeError, match="Tensor or None"):
        t.grad = np.ones((2, 3), np.float32)


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(strata.StrataError, match="floating"):
        strata.arange(3).requires_grad_()


def test_detach_shares_data_and_leaves_the_graph():
    t = strata.ones(4).requires_grad_()
    d = t.detach()
    assert not d.requires_grad and d._shares_storage(t)


def test_backward_of_a_leaf_accumulates_ones_and_refuses_a_missing_gradient():
    t = strata.ones(1).requires_grad_()
    t.backward()
    t.backward()
    np.testing.assert_array_equal(t.grad.numpy(), [2.0])
    u = strata.ones(3).requires_grad_()
    with pytest.raises(strata.StrataError):
        u.backward()
    u.backward(strata.full((3,), 0.5))
    np.testing.assert_array_equal(u.grad.numpy(), [0.5, 0.5, 0.5])


def test_grad_mode_switches_nest_restore_and_decorate():
    assert strata.is_grad_enabled()
    with strata.no_grad():
        assert not strata.is_grad_enabled()
        with strata.enable_grad():
            assert strata.is_grad_enabled()
        assert not strata.is_grad_enabled()
    assert strata.is_grad_enabled()

    @strata.no_grad()
    def f():
        return strata.is_grad_enabled()

    assert f() is False and strata.is_grad_enabled()
    with strata.set_grad_enabled(False):
        assert not strata.is_grad_enabled()
    assert strata.is_grad_enabled()
    strata.set_grad_enabled(False)
    assert not strata.is_grad_enabled()
    strata.set_grad_enabled(True)
    with pytest.raises(TypeError, match="must be a bool"):
        strata.set_grad_enabled("no")


def test_grad_mode_is_restored_after_an_exception():
    with pytest.raises(KeyError):
        with strata.no_grad():
            raise KeyError("x")
    assert strata.is_grad_enabled()

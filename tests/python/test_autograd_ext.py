"""Autograd extension against PyTorch 2.13: custom autograd.Function (ctx, saved tensors, dirty and
non-differentiable outputs, the checks on backward's results), gradcheck, tensor hooks,
retain_grad and inference_mode. Each script runs with only the module name changed."""
import warnings

import numpy as np
import pytest
import torch

import strata

LIBS = [strata, torch]


def t64(lib, values, requires_grad=False):
    return lib.tensor(np.asarray(values, np.float64)).requires_grad_(requires_grad)


def arr(t):
    return t.detach().numpy()


# ---- the user's script: a custom exp and a custom linear, checked with gradcheck ----------------

def custom_functions(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        @lib.autograd.function.once_differentiable
        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            return grad * y

    class Linear(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias=None):
            ctx.save_for_backward(x, weight, bias)
            out = x.matmul(weight.t())
            return out + bias if bias is not None else out

        @staticmethod
        def backward(ctx, grad):
            x, weight, bias = ctx.saved_tensors
            gx = grad.matmul(weight) if ctx.needs_input_grad[0] else None
            gw = grad.t().matmul(x) if ctx.needs_input_grad[1] else None
            gb = grad.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
            return gx, gw, gb

    return Exp, Linear


def run_script(lib):
    Exp, Linear = custom_functions(lib)
    rng = np.random.default_rng(0)
    x = t64(lib, rng.normal(size=(4, 3)), True)
    w = t64(lib, rng.normal(size=(2, 3)), True)
    b = t64(lib, rng.normal(size=(2,)), True)
    y = Exp.apply(Linear.apply(x, w, b))
    loss = (y * y).sum()
    loss.backward()
    ok = (lib.autograd.gradcheck(Exp.apply, (x,), eps=1e-6, atol=1e-5)
          and lib.autograd.gradcheck(Linear.apply, (x, w, b))
          and lib.autograd.gradcheck(lambda a, c: Linear.apply(a, c), (x, w)))
    return ok, type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name(), arr(loss), arr(x.grad), \
        arr(w.grad), arr(b.grad)


def test_custom_exp_and_linear_script_runs_as_in_torch():
    ours, theirs = run_script(strata), run_script(torch)
    assert ours[0] is True and theirs[0] is True
    assert ours[1] == theirs[1] == "ExpBackward"
    for a, b in zip(ours[2:], theirs[2:]):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_needs_input_grad_non_tensor_args_and_keywords(lib):
    seen = {}

    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k, y):
            seen["needs"] = ctx.needs_input_grad
            seen["grad_mode"] = lib.is_grad_enabled()
            ctx.k = k
            return x * k + y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None, None if not ctx.needs_input_grad[2] else g

    x = t64(lib, [1.0, 2.0], True)
    y = t64(lib, [0.5, 0.5])
    out = Scale.apply(x, 3.0, y=y) if lib is strata else Scale.apply(x, 3.0, y)
    assert seen == {"needs": (True, False, False), "grad_mode": False}
    out.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [3.0, 3.0])
    assert y.grad is None
    with lib.no_grad():
        assert Scale.apply(x, 2.0, y).grad_fn is None


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_several_outputs_non_differentiable_and_non_tensor_outputs(lib):
    received = {}

    class MaxAndIndex(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            doubled = x * 2
            mask = x > 0
            ctx.mark_non_differentiable(idx)
            return doubled, idx, mask, "label"

        @staticmethod
        def backward(ctx, g, g_idx, g_mask, g_label):
            received["idx"] = None if g_idx is None else arr(g_idx).tolist()
            received["label"] = g_label
            return g * 2

    x = t64(lib, [1.0, -3.0, 2.0], True)
    doubled, idx, mask, label = MaxAndIndex.apply(x)
    assert label == "label" and doubled.requires_grad and not idx.requires_grad and not mask.requires_grad
    assert int(idx.item()) == 2
    doubled.sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0, 2.0, 2.0])
    assert received == {"idx": 0, "label": None}


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_materialize_grads_off_passes_none(lib):
    got = []

    class Two(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            got.append((g1 is None, g2 is None))
            return g1 if g1 is not None else g2 * 2

    x = t64(lib, [1.0], True)
    a, b = Two.apply(x)
    b.sum().backward()
    assert got == [(True, False)]
    np.testing.assert_array_equal(arr(x.grad), [2.0])


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_mark_dirty_rewrites_the_input_history(lib):
    class DoubleInPlace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    leaf = t64(lib, [1.0, 2.0], True)
    a = leaf * 1
    b = DoubleInPlace.apply(a)
    assert b is a and a.grad_fn is not None and b.grad_fn.name() == "DoubleInPlaceBackward"
    np.testing.assert_array_equal(arr(a), [2.0, 4.0])
    b.sum().backward()
    np.testing.assert_array_equal(arr(leaf.grad), [2.0, 2.0])
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        DoubleInPlace.apply(t64(lib, [1.0], True))


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_saved_tensor_modified_in_place_raises_at_backward(lib):
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    a = t64(lib, [1.0, 2.0], True) * 1
    out = Square.apply(a)
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation|modified by an in-place operation"):
        out.sum().backward()


def make_bad(lib, backward, forward=None):
    class Bad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k if forward is None else forward(ctx, x, k)

    Bad.backward = staticmethod(backward)
    return Bad


BAD_BACKWARDS = [
    (lambda ctx, g: g, "returned an incorrect number of gradients \\(expected 2, got 1\\)"),
    (lambda ctx, g: (g, None, g), "returned an incorrect number of gradients \\(expected 2, got 3\\)"),
    (lambda ctx, g: (g, g), "returned a gradient different than None at position 2, but the corresponding "
                            "forward input was not a Variable"),
    (lambda ctx, g: (g.sum().expand(5), None), "returned an invalid gradient at index 0 - got \\[5\\] but "
                                               "expected shape compatible with \\[3\\]"),
    (lambda ctx, g: (3, None), "expected Variable or None \\(got int\\)"),
]


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
@pytest.mark.parametrize("case", range(len(BAD_BACKWARDS)))
def test_wrong_gradients_from_backward_raise_as_in_torch(lib, case):
    backward, message = BAD_BACKWARDS[case]
    x = t64(lib, [1.0, 2.0, 3.0], True)
    with pytest.raises(RuntimeError, match=message):
        make_bad(lib, backward).apply(x, 2.0).sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_backward_results_are_reduced_converted_or_dropped_as_in_torch(lib):
    x = t64(lib, [1.0, 2.0, 3.0], True)
    make_bad(lib, lambda ctx, g: (lib.ones(2, 3, dtype=lib.float32), None, None)).apply(x, 2.0).sum().backward()
    assert x.grad.dtype == lib.float64
    np.testing.assert_array_equal(arr(x.grad), [2.0, 2.0, 2.0])
    y = t64(lib, [1.0])  # needs no gradient: what backward returns for it is dropped
    z = t64(lib, [1.0], True)

    class Add(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a + b

        @staticmethod
        def backward(ctx, g):
            return g, g

    Add.apply(y, z).sum().backward()
    assert y.grad is None and arr(z.grad).tolist() == [1.0]


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_ctx_misuse_raises_as_in_torch(lib):
    x = t64(lib, [1.0], True)

    def save_int(ctx, x, k):
        ctx.save_for_backward(3)
        return x * k

    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 0 is of type int"):
        make_bad(lib, lambda ctx, g: (g, None), save_int).apply(x, 2.0)

    def dirty_not_returned(ctx, x, k):
        ctx.mark_dirty(x)
        return x * k

    with pytest.raises(RuntimeError, match="(?i)some elements marked as dirty during the forward method were not "
                                           "returned as output"):
        make_bad(lib, lambda ctx, g: (g, None), dirty_not_returned).apply(x * 1, 2.0)

    class NoBackward(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

    with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp method"):
        NoBackward.apply(x).sum().backward()
    with pytest.warns(DeprecationWarning, match="should not be instantiated"):
        instance = NoBackward()
    with pytest.raises(RuntimeError):
        instance(x)


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_setup_context_style(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * g * x * x

    x = t64(lib, [2.0], True)
    Cube.apply(x).sum().backward()
    assert arr(x.grad).tolist() == [12.0]


# ---- gradcheck ------------------------------------------------------------------------------------

@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_gradcheck_passes_fails_and_reports(lib):
    class WrongExp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.exp()

        @staticmethod
        def backward(ctx, g):
            return g  # misses the factor exp(x)

    x = t64(lib, [0.5, 1.0], True)
    assert lib.autograd.gradcheck(lambda a: (a * a).sum(), (x,))
    assert lib.autograd.gradcheck(lambda a, s: a * s, (x, 3.0))  # a non-tensor input is passed through
    assert lib.autograd.gradcheck(WrongExp.apply, (x,), raise_exception=False) is False
    with pytest.raises(RuntimeError, match="Jacobian mismatch for output 0 with respect to input 0") as info:
        lib.autograd.gradcheck(WrongExp.apply, (x,))
    assert "numerical:" in str(info.value) and "analytical:" in str(info.value)
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        lib.autograd.gradcheck(lambda a: a * 2, (t64(lib, [1.0]),))
    with pytest.warns(UserWarning, match="not a double precision floating point"):
        lib.autograd.gradcheck(lambda a: a * 2, (lib.ones(2).requires_grad_(),), eps=1e-2, atol=1e-2, rtol=1e-2)


# ---- tensor hooks, retain_grad, is_leaf, inference_mode -------------------------------------------

@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_register_hook_modifies_and_removes(lib):
    x = t64(lib, [1.0, 2.0], True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(arr(g).tolist()) or g * 10)
    y = x * x
    y_handle = y.register_hook(lambda g: g + 1)
    y.sum().backward()
    assert seen == [[4.0, 8.0]]  # (1 + 1) * 2x
    np.testing.assert_array_equal(arr(x.grad), [40.0, 80.0])
    handle.remove()
    y_handle.remove()
    handle.remove()  # twice: nothing happens
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0, 4.0])
    with x.register_hook(lambda g: g * 0):
        pass  # leaving the block removes it
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), [2.0, 4.0])


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_register_hook_bad_input(lib):
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        t64(lib, [1.0]).register_hook(lambda g: g)
    x = t64(lib, [1.0, 2.0], True)
    x.register_hook(lambda g: lib.ones(3, dtype=lib.float64))
    with pytest.raises(RuntimeError, match="hook"):
        (x * x).sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_retain_grad_and_is_leaf(lib):
    x = t64(lib, [1.0, 2.0], True)
    y = x * x
    assert x.is_leaf and not y.is_leaf and not y.retains_grad
    y.retain_grad()
    x.retain_grad()  # a no-op on a leaf
    assert y.retains_grad and not x.retains_grad
    (y * 3).sum().backward()
    np.testing.assert_array_equal(arr(y.grad), [3.0, 3.0])
    np.testing.assert_array_equal(arr(x.grad), [6.0, 12.0])
    with pytest.raises(RuntimeError, match="can't retain_grad on Tensor that has requires_grad=False|"
                                           "can't retain_grad on a tensor that has requires_grad=False"):
        t64(lib, [1.0]).retain_grad()


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_inference_mode_as_context_and_decorator(lib):
    x = t64(lib, [1.0], True)
    assert not lib.is_inference_mode_enabled()
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        assert not (x * 2).requires_grad
    assert not lib.is_inference_mode_enabled() and lib.is_grad_enabled()
    with lib.inference_mode(False):
        assert (x * 2).requires_grad

    @lib.inference_mode()
    def predict(a):
        return a * 2, lib.is_inference_mode_enabled()

    out, on = predict(x)
    assert on and not out.requires_grad


def test_inference_mode_rejects_non_bool():
    with pytest.raises(TypeError):
        strata.inference_mode("yes")


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_detect_anomaly_names_a_custom_function(lib):
    class NaNGrad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = t64(lib, [1.0], True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with lib.autograd.detect_anomaly():
            with pytest.raises(RuntimeError, match="Function 'NaNGradBackward' returned nan values in its 0th output"):
                NaNGrad.apply(x).sum().backward()


# ---- module hooks -----------------------------------------------------------------------------------

def hooked_net(lib):
    lib.manual_seed(0)
    net = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.ReLU(), lib.nn.Linear(4, 2)).double()
    with lib.no_grad():
        for p in net.parameters():
            p.copy_(lib.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape))))
    return net


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_forward_pre_and_forward_hooks_inside_sequential(lib):
    net = hooked_net(lib)
    calls = []
    h1 = net[0].register_forward_pre_hook(lambda m, args: (calls.append(("pre", type(m).__name__)), args[0] * 2)[1])
    h2 = net[2].register_forward_hook(lambda m, args, out: (calls.append(("fwd", tuple(out.shape))), out + 1)[1])
    h3 = net[2].register_forward_hook(lambda m, args, out: calls.append(("first", 0)), prepend=True)
    x = t64(lib, [[0.5, -0.25, 1.0]])
    out = net(x)
    assert calls == [("pre", "Linear"), ("first", 0), ("fwd", (1, 2))]
    for h in (h1, h2, h3):
        h.remove()
    plain = net(x)
    return_values = arr(out), arr(plain)
    ref = hooked_net(torch)(torch.tensor(np.asarray([[1.0, -0.5, 2.0]]))).detach().numpy() + 1
    np.testing.assert_allclose(return_values[0], ref, rtol=1e-12)
    assert not np.allclose(return_values[0], return_values[1])


@pytest.mark.parametrize("lib", LIBS, ids=["strata", "torch"])
def test_full_backward_hook_sees_and_replaces_gradients(lib):
    net = hooked_net(lib)
    seen = []

    def hook(module, grad_input, grad_output):
        seen.append((type(module).__name__, [None if g is None else tuple(g.shape) for g in grad_input],
                     [tuple(g.shape) for g in grad_output]))
        if module.in_features == 3 and grad_input[0] is not None:
            return (grad_input[0] * 0,)
        return None

    handles = [net[2].register_full_backward_hook(hook), net[0].register_full_backward_hook(hook)]
    x = t64(lib, [[0.5, -0.25, 1.0]], True)
    net(x).sum().backward()
    assert seen == [("Linear", [(1, 4)], [(1, 2)]), ("Linear", [(1, 3)], [(1, 4)])]
    np.testing.assert_array_equal(arr(x.grad), [[0.0, 0.0, 0.0]])  # zeroed by the hook on net[0]
    assert not np.allclose(arr(net[0].weight.grad), 0)  # computed beside the input gradient
    for h in handles:
        h.remove()
    seen.clear()
    y = t64(lib, [[0.5, -0.25, 1.0]])  # needs no gradient: grad_input is (None,)
    net[0].register_full_backward_hook(hook)
    net(y).sum().backward()
    assert seen == [("Linear", [None], [(1, 4)])]


def test_module_hook_bad_input():
    net = hooked_net(strata)
    with pytest.raises(TypeError, match="hook must be callable"):
        net.register_forward_hook(3)
    with pytest.raises(NotImplementedError, match="with_kwargs"):
        net.register_forward_pre_hook(lambda m, a, k: None, with_kwargs=True)
    net[0].register_forward_hook(lambda m, args, out: "not a tensor")
    with pytest.raises(TypeError, match="forward hook must return None or a Tensor"):
        net(t64(strata, [[1.0, 2.0, 3.0]]))
    lin = strata.nn.Linear(2, 2)
    lin.register_forward_hook(lambda m, args, out: None)
    with pytest.raises(NotImplementedError, match="one tensor"):
        lin(strata.ones(1, 2), strata.ones(1, 2))

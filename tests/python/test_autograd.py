"""strata.autograd from Python: backward/grad over several tensors, retain_graph, allow_unused,
grad_fn objects, no_grad, saved_tensors_hooks and tape introspection, against PyTorch 2.13."""
import threading

import numpy as np
import pytest
import torch

import strata
from strata.autograd import graph, tape

RNG = np.random.default_rng(1)


def rand(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def mlp(x, w1, b1, w2, b2, F):
    return F.linear(F.linear(x, w1, b1).relu(), w2, b2).sigmoid()


def mlp_arrays():
    return rand(5, 4), rand(8, 4), rand(8), rand(3, 8), rand(3)


def leaves(arrays, mod):
    if mod is strata:
        return [strata.tensor(a).requires_grad_(i > 0) for i, a in enumerate(arrays)]
    return [torch.tensor(a, requires_grad=i > 0) for i, a in enumerate(arrays)]


def test_autograd_backward_over_several_roots_matches_torch():
    arrays = mlp_arrays()
    s, t = leaves(arrays, strata), leaves(arrays, torch)
    ys = mlp(*s, strata), mlp(*t, torch.nn.functional)
    g = rand(5, 3)
    strata.autograd.backward([ys[0], ys[0].sum()], [strata.tensor(g), None])
    torch.autograd.backward([ys[1], ys[1].sum()], [torch.tensor(g), None])
    for a, b in zip(s[1:], t[1:]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_autograd_grad_matches_torch_and_leaves_grad_alone():
    arrays = mlp_arrays()
    s, t = leaves(arrays, strata), leaves(arrays, torch)
    out_s = mlp(*s, strata).sum()
    out_t = mlp(*t, torch.nn.functional).sum()
    gs = strata.autograd.grad(out_s, [s[1], s[4]])
    gt = torch.autograd.grad(out_t, [t[1], t[4]])
    assert isinstance(gs, tuple) and len(gs) == 2
    for a, b in zip(gs, gt):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)
    assert all(x.grad is None for x in s)


def test_grad_allow_unused_and_errors():
    a = strata.ones(3).requires_grad_()
    b = strata.ones(3).requires_grad_()
    y = (a * 2).sum()
    ga, gb = strata.autograd.grad(y, [a, b], allow_unused=True, retain_graph=True)
    np.testing.assert_array_equal(ga.numpy(), [2, 2, 2])
    assert gb is None
    with pytest.raises(strata.StrataError):
        strata.autograd.grad(y, [a, b])
    with pytest.raises(NotImplementedError, match="create_graph"):
        strata.autograd.grad(y, [a], create_graph=True)
    with pytest.raises(NotImplementedError, match="double backward"):
        y.backward(create_graph=True)
    with pytest.raises(TypeError, match="element 1 is str"):
        strata.autograd.grad(y, [a, "b"])
    with pytest.raises(strata.StrataError, match="implicitly created only for"):
        strata.autograd.backward([a * 2], [None])
    with pytest.raises(ValueError, match="got 2 gradients for 1 tensors"):
        strata.autograd.backward([y], [strata.ones(()), strata.ones(())])


def test_retain_graph():
    x = strata.tensor(rand(4)).requires_grad_()
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    first = x.grad.numpy().copy()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * first, rtol=1e-6)
    with pytest.raises(strata.StrataError, match="freed|released"):
        y.backward()
    z = (x.exp() * x).sum()
    strata.autograd.grad(z, [x])
    with pytest.raises(strata.StrataError, match="freed|released"):
        strata.autograd.grad(z, [x])


def test_grad_fn_objects():
    w = strata.ones(2, 2).requires_grad_()
    y = (w * 3).sum()
    fn = y.grad_fn
    assert isinstance(fn, graph.Node) and fn.name() == "SumBackward"
    assert str(fn) == repr(fn) == "<SumBackward object>"
    (mul, nr), = fn.next_functions
    assert mul.name() == "MulBackward" and nr == 0
    (acc, _), = mul.next_functions
    assert acc.name() == "AccumulateGrad" and acc.variable is not None
    assert acc.variable._shares_storage(w)
    assert y.grad_fn == fn and hash(y.grad_fn) == hash(fn)
    with pytest.raises(AttributeError, match="variable"):
        fn.variable


def test_no_grad_records_nothing():
    w = strata.ones(3).requires_grad_()
    with strata.no_grad():
        y = (w * 2 + 1).relu()[1:].reshape(2, 1)
    assert y.grad_fn is None and not y.requires_grad
    assert tape.recorded_nodes(y) == []
    y = w * 2
    assert y.requires_grad and y.grad_fn is not None


def test_saved_tensors_hooks_see_every_saved_value_of_an_mlp_and_feed_backward():
    arrays = mlp_arrays()
    s = leaves(arrays, strata)
    packed = []

    def pack(t):
        packed.append((tuple(t.shape), t.dtype))
        return ("stored", t.numpy().copy())  # any Python object

    unpacked = []

    def unpack(obj):
        tag, arr = obj
        assert tag == "stored"
        unpacked.append(arr.shape)
        return strata.tensor(arr)

    with graph.saved_tensors_hooks(pack, unpack):
        y = mlp(*s, strata).sum()
    nodes = tape.recorded_nodes(y)
    saved = [v for n in nodes for v in n["saved"] if v["tier"] != "undefined"]
    assert len(packed) == len(saved) > 0
    assert all(v["packed"] and v["tier"] == "packed" for v in saved)
    assert sorted(packed, key=str) == sorted([(v["shape"], v["dtype"]) for v in saved], key=str)
    assert ((5, 4), strata.float32) in packed  # the input x of the first linear
    y.backward()
    assert len(unpacked) == len(packed)
    t = leaves(arrays, torch)
    mlp(*t, torch.nn.functional).sum().backward()
    for a, b in zip(s[1:], t[1:]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_saved_tensors_hooks_results_are_what_backward_uses():
    a, b = strata.tensor([1.0, 2.0]).requires_grad_(), strata.tensor([3.0, 4.0]).requires_grad_()
    with graph.saved_tensors_hooks(lambda t: t, lambda t: t * 10):
        y = (a * b).sum()
    y.backward()
    np.testing.assert_allclose(a.grad.numpy(), [30.0, 40.0])
    np.testing.assert_allclose(b.grad.numpy(), [10.0, 20.0])
    # Outside the block: no hook.
    calls = []
    with graph.saved_tensors_hooks(lambda t: calls.append(1) or t, lambda t: t):
        pass
    (a * b).sum()
    assert calls == []


def test_saved_tensors_hooks_errors_propagate():
    a = strata.ones(2).requires_grad_()

    def bad_pack(t):
        raise KeyError("pack failed")

    with pytest.raises(KeyError, match="pack failed"):
        with graph.saved_tensors_hooks(bad_pack, lambda t: t):
            (a * a).sum()
    with graph.saved_tensors_hooks(lambda t: t, lambda t: "not a tensor"):
        y = (a * a).sum()
    with pytest.raises(TypeError, match="unpack_hook must return a Tensor"):
        y.backward()
    with pytest.raises(TypeError, match="callables"):
        graph.saved_tensors_hooks(1, 2)


def test_saved_tensors_hooks_with_backward_on_another_thread():
    a = strata.tensor(rand(64, 64)).requires_grad_()
    with graph.saved_tensors_hooks(lambda t: [t], lambda lst: lst[0]):
        y = (a @ a).tanh().sum()
    err = []

    def run():
        try:
            y.backward()
        except Exception as e:  # pragma: no cover - reported below
            err.append(e)

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert not err
    ta = torch.tensor(a.detach().numpy(), requires_grad=True)
    (ta @ ta).tanh().sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_tape_introspection_numbers():
    x = strata.tensor(rand(4, 3))
    w = strata.tensor(rand(5, 3)).requires_grad_()
    h = x @ w.t()           # saves x (for w's gradient)
    y = h.sigmoid().sum()   # sigmoid saves its output
    nodes = tape.recorded_nodes(y)
    names = [n["name"] for n in nodes]
    assert names[-1] == "SumBackward" and "MatmulBackward" in names and "SigmoidBackward" in names
    assert [n["sequence_nr"] for n in nodes] == sorted(n["sequence_nr"] for n in nodes)
    held = [v for n in nodes for v in n["saved"] if not v["released"] and v["tier"] != "undefined"]
    for v in held:
        assert v["bytes"] == int(np.prod(v["shape"])) * 4 and v["dtype"] == strata.float32
    assert tape.saved_bytes(y) == sum(v["bytes"] for v in held) > 0
    sig = next(n for n in nodes if n["name"] == "SigmoidBackward")
    assert sig["outputs"] == [{"shape": (4, 5), "dtype": strata.float32}]
    assert any(v["shape"] == (4, 5) for v in sig["saved"])
    text = tape.format_saved_residuals(y)
    assert "SigmoidBackward" in text and f"{tape.saved_bytes(y)} bytes" in text
    y.backward()
    assert tape.saved_bytes(y) == 0
    assert all(v["released"] for n in tape.recorded_nodes(y) for v in n["saved"] if v["tier"] != "undefined")


def test_tape_print(capsys):
    a = strata.ones(3).requires_grad_()
    y = (a * a).sum()
    tape.print_saved_residuals([y])
    assert "MulBackward" in capsys.readouterr().out
    with pytest.raises(TypeError):
        tape.saved_bytes(3)

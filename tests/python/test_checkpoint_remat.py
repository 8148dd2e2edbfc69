"""strata.utils.checkpoint against no checkpointing (bit for bit) and against PyTorch 2.13's
torch.utils.checkpoint on the same model (weights copied via state_dict): gradients, outputs, batch
norm's running statistics, dropout replay, non-Tensor arguments and outputs, and bad inputs."""

import numpy as np
import pytest
import torch
import torch.utils.checkpoint as tcp

import strata
from strata import nn
from strata.utils import checkpoint as scp

TOL = dict(rtol=1e-5, atol=1e-6)


def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def mlp_pair(seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)
    )
    s = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, 4))
    s.load_state_dict(np_state(t))
    return s, t


def cnn_pair(seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Sequential(
        torch.nn.Conv2d(3, 6, 3, padding=1),
        torch.nn.BatchNorm2d(6),
        torch.nn.ReLU(),
        torch.nn.Conv2d(6, 6, 3, padding=1),
        torch.nn.BatchNorm2d(6),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(6, 5),
    )
    s = nn.Sequential(
        nn.Conv2d(3, 6, 3, padding=1),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.Conv2d(6, 6, 3, padding=1),
        nn.BatchNorm2d(6),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(6, 5),
    )
    s.load_state_dict(np_state(t))
    return s, t


def grads(module):
    return {name: p.grad.numpy().copy() for name, p in module.named_parameters()}


def run_strata(model, x, forward, g):
    model.zero_grad()
    xs = strata.tensor(x).requires_grad_()
    out = forward(xs)
    out.backward(strata.tensor(g))
    return out.numpy().copy(), xs.grad.numpy().copy(), grads(model)


def run_torch(model, x, forward, g):
    model.zero_grad()
    xt = torch.tensor(x, requires_grad=True)
    out = forward(xt)
    out.backward(torch.tensor(g))
    return out.detach().numpy().copy(), xt.grad.numpy().copy(), {n: p.grad.numpy().copy() for n, p in model.named_parameters()}


def assert_equal_runs(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert list(a[2]) == list(b[2])
    for k in a[2]:
        np.testing.assert_array_equal(a[2][k], b[2][k], err_msg=k)


def assert_close_runs(a, b):
    np.testing.assert_allclose(a[0], b[0], **TOL)
    np.testing.assert_allclose(a[1], b[1], **TOL)
    for k in b[2]:
        np.testing.assert_allclose(a[2][k], b[2][k], **TOL, err_msg=k)


def test_checkpoint_equals_plain_and_torch():
    s, t = mlp_pair()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    g = rng.standard_normal((5, 4)).astype(np.float32)

    def s_seg(a):  # layers 0..3 checkpointed, the last one plain
        for m in list(s.children())[:4]:
            a = m(a)
        return a

    def t_seg(a):
        for m in list(t.children())[:4]:
            a = m(a)
        return a

    plain = run_strata(s, x, lambda a: s(a), g)
    ckpt = run_strata(s, x, lambda a: list(s.children())[4](scp.checkpoint(s_seg, a, use_reentrant=False)), g)
    assert_equal_runs(ckpt, plain)  # recomputation is bitwise the first run
    ref = run_torch(t, x, lambda a: list(t.children())[4](tcp.checkpoint(t_seg, a, use_reentrant=False)), g)
    assert_close_runs(ckpt, ref)


def test_checkpoint_keeps_nothing_inside_the_segment():
    s, _ = mlp_pair()
    x = strata.randn(4, 8).requires_grad_()
    out = scp.checkpoint(s, x)
    nodes = strata.autograd.tape.recorded_nodes(out)
    inside = [n for n in nodes if n["saved"]]
    assert inside, "the segment's ops should still be recorded"
    # Every value saved inside the segment is a handle (packed), not the tensor.
    assert all(v["packed"] for n in inside for v in n["saved"])
    plain_nodes = strata.autograd.tape.recorded_nodes(s(x))
    assert not any(v["packed"] for n in plain_nodes for v in n["saved"])
    out.sum().backward()
    assert x.grad is not None


def test_checkpoint_sequential_with_batch_norm_equals_torch():
    s, t = cnn_pair(1)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    g = rng.standard_normal((4, 5)).astype(np.float32)
    s.train(), t.train()
    got = run_strata(s, x, lambda a: scp.checkpoint_sequential(s, 3, a, use_reentrant=False), g)
    ref = run_torch(t, x, lambda a: tcp.checkpoint_sequential(t, 3, a, use_reentrant=False), g)
    assert_close_runs(got, ref)
    # The re-runs updated the running statistics a second time, in both frameworks.
    s_sd = s.state_dict()
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(s_sd[k].numpy(), v.numpy(), **TOL, err_msg=k)


def test_checkpoint_sequential_equals_plain_bitwise():
    s, _ = cnn_pair(2)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
    g = rng.standard_normal((4, 5)).astype(np.float32)
    s.eval()  # no running-statistics side effect: the plain run is the reference
    plain = run_strata(s, x, lambda a: s(a), g)
    for segments in (1, 2, 4, 9):
        assert_equal_runs(run_strata(s, x, lambda a: scp.checkpoint_sequential(s, segments, a), g), plain)
    # A list of callables works too (functions and modules mixed).
    layers = list(s.children())
    funcs = [lambda a: layers[0](a)] + layers[1:]
    assert_equal_runs(run_strata(s, x, lambda a: scp.checkpoint_sequential(funcs, 3, a), g), plain)


def test_dropout_replays_with_preserved_rng_state():
    lin = nn.Linear(16, 16)
    drop = nn.Dropout(0.5)
    x = np.random.default_rng(3).standard_normal((8, 16)).astype(np.float32)

    def f(a):
        return strata.relu(drop(lin(a)))

    def run(use_checkpoint, preserve=True):
        strata.manual_seed(123)
        lin.zero_grad()
        xs = strata.tensor(x).requires_grad_()
        out = scp.checkpoint(f, xs, preserve_rng_state=preserve) if use_checkpoint else f(xs)
        strata.manual_seed(999)  # the re-run must not depend on the generator's state at backward
        out.sum().backward()
        return out.numpy().copy(), xs.grad.numpy().copy(), lin.weight.grad.numpy().copy()

    plain, ckpt = run(False), run(True)
    for a, b in zip(plain, ckpt):
        np.testing.assert_array_equal(a, b)
    # Without preserving the state the re-run draws another mask: the gradient no longer matches.
    unpreserved = run(True, preserve=False)
    np.testing.assert_array_equal(unpreserved[0], plain[0])
    assert not np.array_equal(unpreserved[1], plain[1])


def test_non_tensor_arguments_and_nested_outputs():
    rng = np.random.default_rng(4)
    a_np = rng.standard_normal((3, 4)).astype(np.float32)
    b_np = rng.standard_normal((3, 4)).astype(np.float32)

    def f(a, scale, b, *, shift):
        return {"y": (a * b) * scale + shift, "pair": (a.exp(), 7), "tag": "ok"}

    a, b = strata.tensor(a_np).requires_grad_(), strata.tensor(b_np).requires_grad_()
    out = scp.checkpoint(f, a, 2.0, b, shift=1.5, use_reentrant=False)
    assert out["tag"] == "ok" and out["pair"][1] == 7
    (out["y"].sum() + out["pair"][0].sum()).backward()

    at, bt = torch.tensor(a_np, requires_grad=True), torch.tensor(b_np, requires_grad=True)
    ref = tcp.checkpoint(f, at, 2.0, bt, shift=1.5, use_reentrant=False)
    (ref["y"].sum() + ref["pair"][0].sum()).backward()
    np.testing.assert_allclose(out["y"].numpy(), ref["y"].detach().numpy(), **TOL)
    np.testing.assert_allclose(a.grad.numpy(), at.grad.numpy(), **TOL)
    np.testing.assert_allclose(b.grad.numpy(), bt.grad.numpy(), **TOL)


def test_no_grad_and_inputs_without_grad():
    s, _ = mlp_pair()
    x = strata.randn(2, 8)
    with strata.no_grad():
        out = scp.checkpoint(s, x)
    assert not out.requires_grad
    np.testing.assert_array_equal(out.numpy(), s(x).numpy())
    # An input without grad still gives the parameters their gradients.
    s.zero_grad()
    scp.checkpoint(s, x).sum().backward()
    with_ckpt = grads(s)
    s.zero_grad()
    s(x).sum().backward()
    for k, v in grads(s).items():
        np.testing.assert_array_equal(with_ckpt[k], v, err_msg=k)


def test_bad_inputs():
    s, _ = mlp_pair()
    x = strata.randn(2, 8).requires_grad_()
    with pytest.raises(NotImplementedError, match="use_reentrant=True is not supported"):
        scp.checkpoint(s, x, use_reentrant=True)
    with pytest.raises(NotImplementedError, match="use_reentrant=True is not supported"):
        scp.checkpoint_sequential(s, 2, x, use_reentrant=True)
    with pytest.raises(TypeError, match="use_reentrant must be a bool or None, got str"):
        scp.checkpoint(s, x, use_reentrant="yes")
    with pytest.raises(TypeError, match="function must be callable, got int"):
        scp.checkpoint(3, x)
    with pytest.raises(NotImplementedError, match="context_fn is not supported"):
        scp.checkpoint(s, x, context_fn=lambda: None)
    with pytest.raises(ValueError, match="determinism_check should be 'default' or 'none'"):
        scp.checkpoint(s, x, determinism_check="strict")
    with pytest.raises(TypeError, match="Unexpected keyword arguments: foo"):
        scp.checkpoint_sequential(s, 2, x, foo=1)
    with pytest.raises(ValueError, match=r"segments must be in \[1, 5\] \(the number of functions\), got 0"):
        scp.checkpoint_sequential(s, 0, x)
    with pytest.raises(ValueError, match=r"segments must be in \[1, 5\] \(the number of functions\), got 6"):
        scp.checkpoint_sequential(s, 6, x)
    with pytest.raises(TypeError, match="segments must be an int, got float"):
        scp.checkpoint_sequential(s, 2.0, x)
    with pytest.raises(ValueError, match="there are no functions to run"):
        scp.checkpoint_sequential([], 1, x)
    with pytest.raises(TypeError, match="function 1 is int, expected a callable"):
        scp.checkpoint_sequential([s, 1], 1, x)
    with pytest.raises(TypeError, match="functions must be a Sequential or a list of callables, got int"):
        scp.checkpoint_sequential(5, 1, x)
    # An error inside the function surfaces as is, in forward and in the backward re-run.
    with pytest.raises(ZeroDivisionError):
        scp.checkpoint(lambda a: a * (1 / 0), x)
    calls = []

    def flaky(a):
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("second run fails")
        return a * a

    y = scp.checkpoint(flaky, x)
    with pytest.raises(RuntimeError, match="second run fails"):
        y.sum().backward()

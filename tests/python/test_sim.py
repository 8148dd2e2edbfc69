"""strata._C.sim (the simulated TapeFlow accelerator backend, ops/sim/backend_sim.h): an MLP and a
small LeNet step recorded as element loops give PyTorch 2.13's loss and gradients, the simulator's
report is consistent (deeper model -> more cycles; TapeFlow keeps the tape out of the cache), the
`sim` backend can be selected, and bad input raises StrataError naming the problem."""
import numpy as np
import pytest
import torch

import strata
from strata._C import sim

RNG = np.random.default_rng(3)


def rand(*shape, scale=1.0):
    return RNG.uniform(-scale, scale, shape).astype(np.float32)


def mlp_step(widths, batch):
    x = rand(batch, widths[0])
    target = np.array([(i * 5 + 2) % widths[-1] for i in range(batch)], dtype=np.int64)
    ws = [rand(widths[i + 1], widths[i], scale=widths[i] ** -0.5) for i in range(len(widths) - 1)]
    bs = [rand(widths[i + 1], scale=0.1) for i in range(len(widths) - 1)]

    step = sim.SimStep("mlp")
    h = step.data("x", strata.tensor(x))
    params = []
    for i, (w, b) in enumerate(zip(ws, bs)):
        params.append(step.param(f"w{i}", strata.tensor(w)))
        params.append(step.param(f"b{i}", strata.tensor(b)))
    for i in range(len(ws)):
        act = "relu" if i + 1 < len(ws) else None
        h = step.linear(h, params[2 * i], params[2 * i + 1], activation=act)
    step.cross_entropy(h, strata.tensor(target))
    report = step.run()

    tw = [torch.tensor(w, requires_grad=True) for w in ws]
    tb = [torch.tensor(b, requires_grad=True) for b in bs]
    th = torch.tensor(x)
    for i in range(len(ws)):
        th = torch.nn.functional.linear(th, tw[i], tb[i])
        if i + 1 < len(ws):
            th = torch.relu(th)
    loss = torch.nn.functional.cross_entropy(th, torch.tensor(target))
    loss.backward()
    ref = [t.grad.numpy() for pair in zip(tw, tb) for t in pair]
    return report, loss.item(), ref


def test_mlp_step_matches_torch():
    report, loss, ref = mlp_step([6, 12, 4], batch=5)
    assert report.loss == pytest.approx(loss, rel=1e-5, abs=1e-6)
    assert len(report.grads) == len(ref)
    for got, want in zip(report.grads, ref):
        assert got.dtype == strata.float32
        assert tuple(got.shape) == want.shape
        assert np.abs(want).max() > 1e-3
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5)


def test_report_is_consistent_and_grows_with_depth():
    two, _, _ = mlp_step([6, 12, 4], batch=3)
    three, _, _ = mlp_step([6, 12, 12, 4], batch=3)
    for r in (two, three):
        assert r.enzyme["system"] == "Enzyme_32k" and r.tapeflow["system"] == "Tflow_32k"
        for rep in (r.enzyme, r.tapeflow):
            assert rep["fwd"]["cycles"] > 0 and rep["rev"]["cycles"] > 0
            assert rep["cycles"] == rep["fwd"]["cycles"] + rep["rev"]["cycles"]
            assert rep["energy_pj"] == pytest.approx(rep["cache_energy_pj"] + rep["spad_energy_pj"])
        assert r.tape_bytes > 0
        assert r.enzyme["tape_cache_accesses"] > 0
        assert r.tapeflow["tape_cache_accesses"] == 0
        assert r.tapeflow["rev"]["layers"] > 0
        assert 0 < r.tapeflow["spad_bytes_used"] <= 512
    assert (two.ops, three.ops) == (3, 4)
    assert three.instrs > two.instrs
    assert three.enzyme["cycles"] > two.enzyme["cycles"]
    assert three.tapeflow["cycles"] > two.tapeflow["cycles"]


def test_small_lenet_step_matches_torch():
    x = rand(2, 1, 8, 8)
    target = np.array([2, 0], dtype=np.int64)
    c1w, c1b = rand(2, 1, 3, 3, scale=0.5), rand(2, scale=0.1)
    fw, fb = rand(3, 2 * 2 * 2, scale=0.5), rand(3, scale=0.1)

    step = sim.SimStep("lenet")
    sx = step.data("x", strata.tensor(x))
    p = [step.param(n, strata.tensor(v)) for n, v in (("c1w", c1w), ("c1b", c1b), ("fw", fw), ("fb", fb))]
    h = step.relu(step.conv2d(sx, p[0], p[1], padding=1))   # 8x8
    h = step.max_pool2d(h, 2)                                # 4x4
    h = step.avg_pool2d(h, 2)                                # 2x2
    h = step.flatten(h)
    assert h.shape == (2, 8)
    step.cross_entropy(step.linear(h, p[2], p[3]), strata.tensor(target))
    r = step.run(tapeflow_system="Tflow_2k")
    assert r.tapeflow["system"] == "Tflow_2k"

    t = [torch.tensor(v, requires_grad=True) for v in (c1w, c1b, fw, fb)]
    F = torch.nn.functional
    th = F.relu(F.conv2d(torch.tensor(x), t[0], t[1], padding=1))
    th = F.avg_pool2d(F.max_pool2d(th, 2), 2).flatten(1)
    loss = F.cross_entropy(F.linear(th, t[2], t[3]), torch.tensor(target))
    loss.backward()
    assert r.loss == pytest.approx(loss.item(), rel=1e-5, abs=1e-6)
    for got, want in zip(r.grads, t):
        np.testing.assert_allclose(got.numpy(), want.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_backend_selection():
    assert sim.supports("linear") and sim.supports("conv2d") and sim.supports("cross_entropy")
    assert not sim.supports("embedding_bag")
    with sim.backend():
        y = strata.relu(strata.tensor(np.array([-1.0, 2.0], dtype=np.float32)))
        np.testing.assert_array_equal(y.numpy(), [0.0, 2.0])
        with pytest.raises(strata.StrataError, match="sigmoid: not supported by the 'sim' backend"):
            strata.sigmoid(strata.tensor(np.array([1.0], dtype=np.float32)))
    strata.sigmoid(strata.tensor(np.array([1.0], dtype=np.float32)))  # back on the CPU backend


def test_bad_input():
    with pytest.raises(ValueError, match="unknown op 'no_such_op'"):
        sim.supports("no_such_op")
    step = sim.SimStep("bad")
    x = step.data("x", strata.tensor(rand(2, 3)))
    w = step.param("w", strata.tensor(rand(4, 5)))
    with pytest.raises(strata.StrataError, match=r"input \[2, 3\] and weight \[4, 5\] disagree on in_features"):
        step.linear(x, w)
    with pytest.raises(ValueError, match="activation must be None, 'relu' or 'tanh', got 'gelu'"):
        step.linear(x, w, activation="gelu")
    with pytest.raises(strata.StrataError, match="an input named 'w' already exists"):
        step.param("w", strata.tensor(rand(4, 5)))
    with pytest.raises(strata.StrataError, match="no loss; end the step with cross_entropy"):
        step.run()
    with pytest.raises(strata.StrataError, match=r"target\[0\] = 7 is not a class index in \[0, 3\)"):
        step.cross_entropy(x, strata.tensor(np.array([7, 0], dtype=np.int64)))
    step.cross_entropy(x, strata.tensor(np.array([1, 0], dtype=np.int64)))
    with pytest.raises(strata.StrataError, match="unknown system 'Tflow_3k'"):
        step.run(tapeflow_system="Tflow_3k")
    step.run()
    with pytest.raises(strata.StrataError, match="the step has already run"):
        step.run()

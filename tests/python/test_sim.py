"""strata._C.sim (the simulated TapeFlow accelerator backend, ops/sim/backend_sim.h): an MLP and a
small LeNet step recorded as element loops give PyTorch 2.13's loss and gradients, the simulator's
report is consistent (deeper model -> more cycles; TapeFlow keeps the tape out of the cache), the
`sim` backend can be selected, and bad input raises StrataError naming the problem.
strata.sim.session() runs unmodified strata.nn models on the simulator: an MLP trained with SGD
gives the CPU backend's losses and parameters and PyTorch's first loss; a conv net's gradients
equal PyTorch's."""
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


# ---- strata.sim.session(): unmodified models on the simulated accelerator -------------------------

F = strata.nn.functional


def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def strata_mlp():
    nn = strata.nn
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 4))


def test_session_trains_an_mlp_like_the_cpu_backend_and_torch():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 12), torch.nn.ReLU(),
                              torch.nn.Linear(12, 4))
    on_sim, on_cpu = strata_mlp(), strata_mlp()
    for m in (on_sim, on_cpu):
        m.load_state_dict(np_state(ref))
    x = rand(6, 8)
    y = np.array([0, 3, 1, 2, 3, 1], dtype=np.int64)
    torch_loss = torch.nn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y)).item()

    opt_sim = strata.optim.SGD(on_sim.parameters(), lr=0.5)
    opt_cpu = strata.optim.SGD(on_cpu.parameters(), lr=0.5)
    sim_losses, cpu_losses = [], []
    for step in range(3):
        loss_cpu = F.cross_entropy(on_cpu(strata.tensor(x)), strata.tensor(y))
        loss_cpu.backward()
        cpu_losses.append(loss_cpu.item())
        with strata.sim.session() as s:
            assert s.active
            loss = F.cross_entropy(on_sim(strata.tensor(x)), strata.tensor(y))
            report = s.backward(loss)
        assert not s.active
        sim_losses.append(report["loss"])
        assert report["loss"] == pytest.approx(loss.item(), rel=1e-6)  # the CPU kernels' forward value
        assert len(s.parameters) == 6 and report["ops"] == 6  # 3 linear + 2 relu + cross_entropy
        for p, q in zip(on_sim.parameters(), on_cpu.parameters()):
            assert p.grad is not None and p.grad.dtype == strata.float32
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-6)
        if step == 0:
            for sysname, rep in (("Enzyme_32k", report["enzyme"]), ("Tflow_32k", report["tapeflow"])):
                assert rep["system"] == sysname
                assert rep["fwd"]["cycles"] > 0 and rep["rev"]["cycles"] > 0 and rep["dram_bytes"] > 0
                assert rep["cycles"] == rep["fwd"]["cycles"] + rep["rev"]["cycles"]
            assert report["tape_bytes"] > 0 and report["instrs"] > 0
            assert report["tapeflow"]["tape_cache_accesses"] == 0 < report["enzyme"]["tape_cache_accesses"]
        opt_sim.step()
        opt_cpu.step()
        opt_sim.zero_grad()
        opt_cpu.zero_grad()
    assert sim_losses[0] == pytest.approx(torch_loss, rel=1e-5)
    np.testing.assert_allclose(sim_losses, cpu_losses, rtol=1e-5)
    assert sim_losses[2] < sim_losses[0]  # it trains
    for p, q in zip(on_sim.parameters(), on_cpu.parameters()):
        np.testing.assert_allclose(p.numpy(), q.numpy(), rtol=1e-5, atol=1e-6)


def test_session_conv_net_gradients_match_torch():
    nn = strata.nn
    torch.manual_seed(1)
    tnn = torch.nn
    ref = tnn.Sequential(tnn.Conv2d(1, 2, 3, padding=1), tnn.Tanh(), tnn.MaxPool2d(2), tnn.Conv2d(2, 3, 3),
                         tnn.ReLU(), tnn.AvgPool2d(2), tnn.Flatten(), tnn.Linear(3, 5))
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2), nn.Conv2d(2, 3, 3), nn.ReLU(),
                          nn.AvgPool2d(2), nn.Flatten(), nn.Linear(3, 5))
    model.load_state_dict(np_state(ref))
    x = rand(2, 1, 8, 8)   # 8x8 -> conv -> 8x8 -> max 4x4 -> conv 2x2 -> avg 1x1
    y = np.array([4, 1], dtype=np.int64)
    loss_t = tnn.functional.cross_entropy(ref(torch.tensor(x)), torch.tensor(y))
    loss_t.backward()
    with strata.sim.session(tapeflow_system="Tflow_2k") as s:
        report = s.backward(F.cross_entropy(model(strata.tensor(x)), strata.tensor(y)))
    assert report["tapeflow"]["system"] == "Tflow_2k"
    assert report["loss"] == pytest.approx(loss_t.item(), rel=1e-5)
    grads = dict(model.named_parameters())
    for name, p in ref.named_parameters():
        assert np.abs(p.grad.numpy()).max() > 1e-5, name
        np.testing.assert_allclose(grads[name].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_session_bad_input():
    lin = strata.nn.Linear(3, 2)
    x = strata.tensor(rand(4, 3))
    y = strata.tensor(np.array([0, 1, 1, 0], dtype=np.int64))
    with strata.sim.session() as s:
        with pytest.raises(strata.StrataError, match="sigmoid: not supported by the 'sim' backend"):
            strata.sigmoid(x)
        with pytest.raises(strata.StrataError, match="sessions do not nest"):
            with strata.sim.session():
                pass
        logits = lin(x)
        with pytest.raises(strata.StrataError, match="no loss was recorded"):
            s.backward(logits)
        loss = F.cross_entropy(logits, y)
        with pytest.raises(strata.StrataError, match="is not the loss this session recorded"):
            s.backward(logits)
        s.backward(loss)
        with pytest.raises(strata.StrataError, match="backward\\(\\) already ran for this session"):
            s.backward(loss)
        with pytest.raises(strata.StrataError, match="already ran backward\\(\\); ops after it are not recorded"):
            lin(x)
    strata.sigmoid(x)  # the block restored the CPU backend
    with pytest.raises(ValueError, match="this session was already entered"):
        with s:
            pass
    with pytest.raises(ValueError, match="backward\\(\\) needs the session's `with` block"):
        strata.sim.session().backward(loss)
    with pytest.raises(strata.StrataError, match="unknown system 'Tflow_3k'"):
        with strata.sim.session(tapeflow_system="Tflow_3k"):
            pass
    with strata.sim.session() as s:
        with pytest.raises(strata.StrataError, match="without class weights or label smoothing"):
            F.cross_entropy(lin(x), y, label_smoothing=0.1)
        with pytest.raises(strata.StrataError, match="an op failed to record in this session"):
            s.backward(F.cross_entropy(lin(x), y))
    with strata.sim.session() as s:
        loss = F.cross_entropy(lin(x), y)
    with pytest.raises(strata.StrataError, match="the session ended before backward"):
        s.backward(loss)

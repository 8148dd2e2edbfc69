"""strata.autograd.graph.stream_tape: tape streaming from Python. Gradients bit for bit those of
the same step without streaming (and close to PyTorch 2.13's on the same weights), the report's
bookkeeping, a lower fast-tier peak on a model whose activations dominate, and bad input."""

import numpy as np
import pytest
import torch

import strata
import strata.memory as M
from strata import nn
from strata.autograd.graph import stream_tape
from strata.nn import functional as F


def np_state(module):
    return {k: v.detach().numpy().copy() for k, v in module.state_dict().items()}


def cnn_pair(seed=0):
    torch.manual_seed(seed)
    t = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(8 * 8 * 8, 5),
    )
    s = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8 * 8 * 8, 5),
    )
    s.load_state_dict(np_state(t))
    return s, t


def grads(module):
    return {name: p.grad.numpy().copy() for name, p in module.named_parameters()}


def step(model, x, y, tape=None):
    model.zero_grad()
    if tape is None:
        loss = F.cross_entropy(model(x), y)
    else:
        with tape:
            loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.item()


@pytest.mark.parametrize("distance", [0, 1, 2])
def test_gradients_equal_the_unstreamed_step_bit_for_bit(distance):
    s, t = cnn_pair()
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((4, 3, 16, 16)).astype(np.float32)
    yn = np.array([0, 3, 1, 4])
    x, y = strata.tensor(xn), strata.tensor(yn)
    plain_loss = step(s, x, y)
    plain = grads(s)
    tape = stream_tape(tape_budget_bytes=16 << 10, prefetch_distance=distance, min_stream_bytes=0)
    streamed_loss = step(s, x, y, tape)
    assert streamed_loss == plain_loss
    for name, g in grads(s).items():
        assert np.array_equal(g, plain[name]), name
    r = tape.report()
    assert r["layers"] > 2 and r["values_streamed"] > 0
    # Every layer but the last one of forward is spilled, except an activation adopted as its own
    # tile (no copy) that the forward still held at its end.
    assert r["values_adopted"] > 0
    assert r["spills"] + r["adopted_unspilled"] == r["layers"] - 1
    assert r["tiles_freed"] == r["layers"]  # backward released every saved value
    assert r["parameters_kept"] > 0  # weights are not copied into the tape
    assert r["bytes_to_slow"] > 0 and r["bytes_to_fast"] > 0
    if distance == 0:
        assert r["prefetches"] == 0 and r["demand_fetches"] == r["spills"]
    else:
        assert r["prefetches"] + r["demand_fetches"] == r["spills"]
    assert 0.0 <= r["overlap"] <= 1.0
    assert len(r["layer_info"]) == r["layers"]
    assert sum(layer["regions"] for layer in r["layer_info"]) == r["regions"]
    assert "tape streaming:" in tape.explain()
    # The same step in PyTorch 2.13 on the same weights.
    t.zero_grad()
    torch.nn.functional.cross_entropy(t(torch.from_numpy(xn)), torch.from_numpy(yn)).backward()
    for name, p in t.named_parameters():
        np.testing.assert_allclose(grads(s)[name], p.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_backward_after_the_block_and_streaming_parameters():
    s, _ = cnn_pair(2)
    x, y = strata.randn(2, 3, 16, 16), strata.tensor([1, 2])
    step(s, x, y)
    plain = grads(s)
    tape = stream_tape(tape_budget_bytes=8 << 10, min_stream_bytes=0, stream_parameters=True)
    step(s, x, y, tape)
    r = tape.report()
    assert r["parameters_kept"] == 0
    for name, g in grads(s).items():
        assert np.array_equal(g, plain[name]), name


def test_fast_tier_peak_is_lower_with_streaming():
    strata.manual_seed(5)
    layers = []
    for _ in range(16):
        layers += [nn.Linear(128, 128), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(128, 10))
    x = strata.randn(1024, 128)
    y = strata.tensor([i % 10 for i in range(1024)])
    step(model, x, y)  # gradients allocated, primitives created

    def peak(tape):
        M.reset_peak_stats()
        base = M.memory_allocated("fast")
        step(model, x, y, tape)
        return M.max_memory_allocated("fast") - base

    plain = peak(None)
    tape = stream_tape(tape_budget_bytes=1 << 20)
    streamed = peak(tape)
    assert streamed < 0.6 * plain, (streamed, plain, tape.explain())
    assert tape.report()["spills"] > 4


def test_bad_input_and_bad_use():
    with pytest.raises(ValueError, match="tape_budget_bytes must be > 0"):
        stream_tape(tape_budget_bytes=0)
    with pytest.raises(ValueError, match="prefetch_distance must be >= 0"):
        stream_tape(prefetch_distance=-1)
    with pytest.raises(ValueError, match="min_stream_bytes must be >= 0"):
        stream_tape(min_stream_bytes=-5)
    with pytest.raises(TypeError):
        stream_tape(tape_budget_bytes="16M")
    with pytest.raises(TypeError):
        stream_tape(tape_budget_bytes=1.5)
    with pytest.raises(TypeError, match="stream_parameters must be a bool"):
        stream_tape(stream_parameters=1)
    tape = stream_tape()
    with pytest.raises(RuntimeError, match="never entered"):
        tape.report()
    with tape:
        with pytest.raises(RuntimeError, match="already entered"):
            tape.__enter__()
    with pytest.raises(RuntimeError, match="one forward"):
        with tape:
            pass
    assert repr(tape) == f"stream_tape(tape_budget_bytes={16 << 20}, prefetch_distance=1)"

"""strata.save_checkpoint / strata.load_checkpoint: round trips of a model, an optimizer state (a fake
optimizer with torch.optim's nested layout) and metadata; truncated, foreign and missing files;
atomic overwrite; bad arguments."""
import os

import numpy as np
import pytest
import torch

import strata
from strata import nn


def make_model():
    return nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))


def trained_model():
    m = make_model()
    m(strata.randn(5, 3)).sum().backward()  # moves the batch-norm statistics
    return m


class FakeOptimizer:
    """Exposes only state_dict()/load_state_dict(), like strata.optim's and torch.optim's optimizers."""

    def __init__(self, state=None):
        self.state = state
        self.loaded = None

    def state_dict(self):
        return self.state

    def load_state_dict(self, state_dict):
        self.loaded = state_dict


def optimizer_state():
    return {
        "state": {0: {"step": strata.tensor(3.0), "momentum_buffer": strata.randn(4, 3)},
                  1: {"step": strata.tensor(3.0), "momentum_buffer": np.arange(4, dtype=np.float32)}},
        "param_groups": [{"lr": 0.1, "momentum": 0.9, "nesterov": False, "dampening": 0,
                          "weight_decay": 0.0, "maximize": False, "foreach": None, "betas": (0.9, 0.999),
                          "params": [0, 1, 2, 3]}],
    }


def assert_same_structure(a, b):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for k in a:
            assert_same_structure(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same_structure(x, y)
    elif isinstance(a, (strata.Tensor, np.ndarray)):
        assert isinstance(b, strata.Tensor)
        expected = a.numpy() if isinstance(a, strata.Tensor) else a
        np.testing.assert_array_equal(b.numpy(), expected)
        assert b.numpy().dtype == expected.dtype
    else:
        assert type(a) is type(b) and a == b


def assert_same_state(m1, m2):
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert list(s1) == list(s2)
    for k in s1:
        np.testing.assert_array_equal(s1[k].numpy(), s2[k].numpy(), err_msg=k)
        assert s1[k].dtype == s2[k].dtype


def test_round_trip(tmp_path):
    model, opt = trained_model(), FakeOptimizer(optimizer_state())
    path = tmp_path / "ckpt.strata"
    strata.save_checkpoint(path, model, opt, epoch=3, loss=0.25, name="run-1", tags=[1, "a"], best=None)
    fresh, opt2 = make_model(), FakeOptimizer()
    meta = strata.load_checkpoint(path, fresh, opt2)
    assert meta == {"epoch": 3, "loss": 0.25, "name": "run-1", "tags": [1, "a"], "best": None}
    assert_same_state(model, fresh)
    assert int(fresh[1].num_batches_tracked.numpy()) == 1
    assert_same_structure(optimizer_state_with(opt.state), opt2.loaded)
    # The model alone, and a str path.
    fresh2 = make_model()
    assert strata.load_checkpoint(str(path), fresh2) == meta
    assert_same_state(model, fresh2)


def optimizer_state_with(state):
    return state


def test_model_only_and_python_module(tmp_path):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = make_model()
            self.scale = nn.Parameter(strata.randn(2))
            self.register_buffer("count", strata.tensor(7, dtype=strata.int64))

        def forward(self, x):
            return self.body(x) * self.scale

    a, b = Net(), Net()
    strata.save_checkpoint(tmp_path / "n", a)
    assert strata.load_checkpoint(tmp_path / "n", b) == {}
    assert_same_state(a, b)
    x = strata.randn(2, 3)
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    with pytest.raises(ValueError, match="holds no optimizer state"):
        strata.load_checkpoint(tmp_path / "n", b, FakeOptimizer())


def test_torch_optimizer_state_layout(tmp_path):
    """A real torch.optim state_dict (tensors converted to NumPy) keeps its layout and values."""
    tm = torch.nn.Linear(3, 2)
    topt = torch.optim.Adam(tm.parameters(), lr=1e-3)
    tm(torch.randn(4, 3)).sum().backward()
    topt.step()

    def to_numpy(obj):
        if isinstance(obj, torch.Tensor):
            return obj.numpy()
        if isinstance(obj, dict):
            return {k: to_numpy(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return type(obj)(to_numpy(v) for v in obj)
        return obj

    state = to_numpy(topt.state_dict())
    opt = FakeOptimizer(state)
    strata.save_checkpoint(tmp_path / "a", make_model(), opt)
    opt2 = FakeOptimizer()
    strata.load_checkpoint(tmp_path / "a", make_model(), opt2)
    assert_same_structure(state, opt2.loaded)
    assert list(opt2.loaded["state"]) == [0, 1]  # int keys stay ints


def test_cpp_written_optimizer_state_is_flat(tmp_path):
    path = str(tmp_path / "cpp")
    model = make_model()
    entries = [("state.0.momentum_buffer", strata.ones(2)), ("param_groups.0.lr", strata.tensor(0.1, dtype=strata.float64))]
    strata._C._save_checkpoint(path, list(model.state_dict().items()), entries, [("epoch", "4"), ("note", "abc")])
    opt = FakeOptimizer()
    assert strata.load_checkpoint(path, make_model(), opt) == {"epoch": 4, "note": "abc"}
    assert list(opt.loaded) == ["state.0.momentum_buffer", "param_groups.0.lr"]
    np.testing.assert_array_equal(opt.loaded["state.0.momentum_buffer"].numpy(), [1, 1])


def test_atomic_overwrite(tmp_path):
    path = tmp_path / "ckpt"
    first = trained_model()
    strata.save_checkpoint(path, first, epoch=1)
    second = trained_model()
    strata.save_checkpoint(path, second, epoch=2)
    assert os.listdir(tmp_path) == ["ckpt"]  # no temporary file left behind
    m = make_model()
    assert strata.load_checkpoint(path, m) == {"epoch": 2}
    assert_same_state(second, m)

    class Exploding(FakeOptimizer):
        def state_dict(self):
            raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        strata.save_checkpoint(path, trained_model(), Exploding(), epoch=3)
    with pytest.raises(TypeError, match="metadata 'bad'"):
        strata.save_checkpoint(path, trained_model(), bad=object())
    with pytest.raises(TypeError, match="holds a object at 'state.0'"):
        strata.save_checkpoint(path, trained_model(), FakeOptimizer({"state": {0: object()}}))
    with pytest.raises(strata.StrataError, match="cannot create the temporary file"):
        strata.save_checkpoint(tmp_path / "no_such_dir" / "x", trained_model())
    assert os.listdir(tmp_path) == ["ckpt"]
    assert strata.load_checkpoint(path, m) == {"epoch": 2}  # the previous file is intact
    assert_same_state(second, m)


def test_truncated_foreign_and_missing_files(tmp_path):
    path = tmp_path / "ckpt"
    strata.save_checkpoint(path, trained_model(), FakeOptimizer(optimizer_state()), epoch=1)
    data = path.read_bytes()
    for n in (0, 5, 20, len(data) // 2, len(data) - 1):
        (tmp_path / "cut").write_bytes(data[:n])
        with pytest.raises(strata.StrataError, match=r"load_checkpoint\('.*cut'\): the file is truncated|not a Strata"):
            strata.load_checkpoint(tmp_path / "cut", make_model())
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    (tmp_path / "flip").write_bytes(bytes(flipped))
    with pytest.raises(strata.StrataError, match="checksum"):
        strata.load_checkpoint(tmp_path / "flip", make_model())
    (tmp_path / "foreign").write_bytes(b"PK\x03\x04 this is a zip file, not a checkpoint" * 4)
    with pytest.raises(strata.StrataError, match="not a Strata checkpoint"):
        strata.load_checkpoint(tmp_path / "foreign", make_model())
    torch.save({"w": torch.ones(2)}, tmp_path / "torch.pt")
    with pytest.raises(strata.StrataError, match="not a Strata checkpoint"):
        strata.load_checkpoint(tmp_path / "torch.pt", make_model())
    with pytest.raises(strata.StrataError, match=r"cannot open '.*missing' \(no such file\)"):
        strata.load_checkpoint(tmp_path / "missing", make_model())
    (tmp_path / "a_dir").mkdir()
    with pytest.raises(strata.StrataError, match=r"cannot open '.*a_dir' \(is a directory\)"):
        strata.load_checkpoint(tmp_path / "a_dir", make_model())
    # A NUL byte is escaped in the message (which goes on after it) and the path is refused, not cut
    # to the existing file before the NUL.
    strata.save_checkpoint(tmp_path / "a", make_model())
    with pytest.raises(strata.StrataError, match=r"a\\x00b' \(the path contains a NUL byte\)$"):
        strata.load_checkpoint(str(tmp_path / "a") + "\0b", make_model())


def test_bad_arguments(tmp_path):
    path = tmp_path / "ckpt"
    strata.save_checkpoint(path, trained_model())
    with pytest.raises(TypeError, match="model must be a strata.nn.Module, got dict"):
        strata.save_checkpoint(path, {"w": strata.ones(1)})
    with pytest.raises(TypeError, match="optimizer must have a state_dict\\(\\) method, got int"):
        strata.save_checkpoint(path, make_model(), 3)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got int"):
        strata.save_checkpoint(3, make_model())
    with pytest.raises(TypeError, match="model must be a strata.nn.Module"):
        strata.load_checkpoint(path, None)
    other = nn.Sequential(nn.Linear(3, 5))
    with pytest.raises(strata.StrataError, match="Missing key|Unexpected key|size mismatch"):
        strata.load_checkpoint(path, other)


@pytest.mark.parametrize("make_opt", [lambda p: strata.optim.SGD(p, lr=0.1, momentum=0.9),
                                      lambda p: strata.optim.Adam(p, lr=0.01)])
def test_resume_training_with_a_real_optimizer(tmp_path, make_opt):
    """Saving mid-training and resuming from the file continues exactly as the uninterrupted run."""
    strata.manual_seed(3)
    x = strata.randn(6, 3)

    def step(model, opt):
        opt.zero_grad()
        out = model(x)
        (out * out).mean().backward()
        opt.step()

    model = make_model()
    opt = make_opt(model.parameters())
    for _ in range(3):
        step(model, opt)
    strata.save_checkpoint(tmp_path / "run", model, opt, step=3)

    resumed = make_model()
    resumed_opt = make_opt(resumed.parameters())
    assert strata.load_checkpoint(tmp_path / "run", resumed, resumed_opt) == {"step": 3}
    assert_same_state(model, resumed)
    for _ in range(2):
        step(model, opt)
        step(resumed, resumed_opt)
    assert_same_state(model, resumed)
    before = {k: v.numpy().copy() for k, v in make_model().state_dict().items()}
    assert any(not np.array_equal(before[k], v.numpy()) for k, v in resumed.state_dict().items())

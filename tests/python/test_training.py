"""A PyTorch user's MLP training script run with only the module name changed, and the pieces it
leans on: strata.save / strata.load, Tensor.data, Module.to(dtype) / .float() / .double()."""

import io
import re

import numpy as np
import pytest
import torch

import strata


def check(exc, pattern, fn, *args, **kwargs):
    with pytest.raises(exc, match=re.escape(pattern)):
        fn(*args, **kwargs)


# ---- the script ---------------------------------------------------------------------------------

def make_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((96, 8)).astype(np.float32)
    w = rng.standard_normal((8, 3)).astype(np.float32)
    y = (x @ w).argmax(1).astype(np.int64)
    return x, y


def mlp_script(lib, init_state, path):
    """PyTorch code; `lib` is torch or strata. Returns per-epoch losses, lrs, the final accuracy and
    the reloaded model's outputs."""
    x_np, y_np = make_data()
    X, Y = lib.tensor(x_np), lib.tensor(y_np)
    model = lib.nn.Sequential(lib.nn.Linear(8, 32), lib.nn.ReLU(), lib.nn.Linear(32, 3))
    model.load_state_dict({k: lib.tensor(v) for k, v in init_state.items()})
    opt = lib.optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    warmup = lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    decay = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=12)
    sched = lib.optim.lr_scheduler.SequentialLR(opt, [warmup, decay], milestones=[3])
    loader = lib.utils.data.DataLoader(lib.utils.data.TensorDataset(X, Y), batch_size=16, shuffle=False)
    losses, lrs, norms = [], [], []
    for epoch in range(15):
        model.train()
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = lib.nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            norms.append(float(lib.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)))
            opt.step()
            total += loss.item()
        sched.step()
        losses.append(total / len(loader))
        lrs.append(sched.get_last_lr()[0])
    model.eval()
    with lib.no_grad():
        logits = model(X)
    accuracy = float((logits.numpy().argmax(1) == y_np).mean())
    lib.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 15}, path)
    checkpoint = lib.load(path)
    fresh = lib.nn.Sequential(lib.nn.Linear(8, 32), lib.nn.ReLU(), lib.nn.Linear(32, 3))
    fresh.load_state_dict(checkpoint["model"])
    fresh.eval()
    with lib.no_grad():
        reloaded = fresh(X).numpy()
    assert checkpoint["epoch"] == 15
    return losses, lrs, norms, accuracy, logits.numpy(), reloaded


def test_mlp_script_runs_with_only_the_module_name_changed(tmp_path):
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
    init_state = {k: v.detach().numpy().copy() for k, v in reference.state_dict().items()}
    got = mlp_script(strata, init_state, str(tmp_path / "s.pt"))
    want = mlp_script(torch, init_state, str(tmp_path / "t.pt"))
    losses_s, lrs_s, norms_s, acc_s, logits_s, reloaded_s = got
    losses_t, lrs_t, norms_t, acc_t, logits_t, _ = want
    assert lrs_s == lrs_t  # the schedule bit for bit
    np.testing.assert_allclose(losses_s, losses_t, rtol=2e-4)
    np.testing.assert_allclose(norms_s, norms_t, rtol=2e-4)
    assert min(norms_s) > 0 and max(norms_s) > 1.0  # clipping was active at some steps
    assert acc_s == acc_t and acc_s > 0.9
    np.testing.assert_allclose(logits_s, logits_t, rtol=1e-3, atol=1e-4)
    np.testing.assert_array_equal(reloaded_s, logits_s)  # save/load round trip is exact


# ---- strata.save / strata.load --------------------------------------------------------------------

def test_save_load_round_trips_nested_containers(tmp_path):
    lin = strata.nn.Linear(3, 2)
    leaf = strata.ones(2, 2).requires_grad_()
    obj = {"sd": lin.state_dict(), "list": [strata.arange(4), (1.5, "x", None)], "b": True, "leaf": leaf,
           "p": lin.weight, "i64": strata.tensor([1, 2]), "f64": strata.zeros(2, dtype=strata.float64)}
    path = tmp_path / "obj.pt"
    strata.save(obj, path)  # os.PathLike
    back = strata.load(str(path))
    assert type(back["sd"]).__name__ == "OrderedDict" and list(back["sd"]) == ["weight", "bias"]
    np.testing.assert_array_equal(back["sd"]["weight"].numpy(), lin.weight.numpy())
    assert back["list"][1] == (1.5, "x", None) and isinstance(back["list"][1], tuple)
    assert back["list"][0].dtype == strata.int64 and back["b"] is True
    assert back["leaf"].requires_grad and not back["sd"]["weight"].requires_grad
    assert isinstance(back["p"], strata.nn.Parameter) and back["p"].requires_grad
    assert back["i64"].dtype == strata.int64 and back["f64"].dtype == strata.float64
    single = tmp_path / "t.pt"
    strata.save(strata.tensor([[1.0, 2.0]]), single)
    np.testing.assert_array_equal(strata.load(single, map_location="cpu").numpy(), [[1.0, 2.0]])
    buf = io.BytesIO()
    strata.save([strata.ones(3)], buf)
    buf.seek(0)
    assert strata.load(buf)[0].tolist() == [1.0, 1.0, 1.0]


def test_save_load_errors(tmp_path):
    check(TypeError, "strata.save cannot save a Module object; save its state_dict()", strata.save,
          strata.nn.Linear(2, 2), tmp_path / "m.pt")
    check(TypeError, "strata.save: the object holds a set at 'a'", strata.save, {"a": {1}}, tmp_path / "x.pt")
    check(TypeError, "strata.save: f must be a path or a binary file object, got int", strata.save, strata.ones(1), 3)
    check(FileNotFoundError, "No such file or directory", strata.load, tmp_path / "missing.pt")
    strata.save_checkpoint(tmp_path / "ck.pt", strata.nn.Linear(2, 2))
    check(ValueError, "the file is a training checkpoint, not written by strata.save", strata.load, tmp_path / "ck.pt")
    check(ValueError, "map_location 'cuda:0' is not available", strata.load, tmp_path / "ck.pt", map_location="cuda:0")
    (tmp_path / "junk.pt").write_bytes(b"not a strata file at all")
    check(RuntimeError, "junk.pt", strata.load, tmp_path / "junk.pt")


# ---- Tensor.data and Module.to -------------------------------------------------------------------

def test_tensor_data_get_and_set_as_torch():
    w = strata.nn.Parameter(strata.ones(2, 2))
    d = w.data
    assert not d.requires_grad and d._shares_storage(w) and w.requires_grad
    d[0, 0] = 5.0  # writes show through, without autograd
    assert w.tolist()[0][0] == 5.0
    grad_before = strata.full((2, 2), 0.5)
    w.grad = grad_before
    w.data = strata.zeros(3, dtype=strata.float64)  # shape and dtype may change, identity stays
    assert tuple(w.shape) == (3,) and w.dtype == strata.float64 and w.requires_grad
    check(TypeError, "Tensor.data must be set to a strata.Tensor, got list", setattr, w, "data", [1.0])
    check(RuntimeError, "data set to a tensor that requires gradients must be floating point", setattr, w, "data",
          strata.zeros(2, dtype=strata.int64))


def test_module_to_dtype_converts_in_place_like_torch():
    model = strata.nn.Sequential(strata.nn.Linear(4, 3), strata.nn.BatchNorm1d(3))
    weight = model[0].weight
    opt_ref = list(model.parameters())
    assert model.double() is model
    assert weight.dtype == strata.float64 and opt_ref[0].dtype == strata.float64  # the same Parameter objects
    bn = dict(model[1].named_buffers())
    assert bn["running_mean"].dtype == strata.float64 and bn["num_batches_tracked"].dtype == strata.int64
    out = model(strata.randn(5, 4, dtype=strata.float64))
    assert out.dtype == strata.float64
    out.sum().backward()
    assert model.to(strata.float32) is model and weight.grad.dtype == strata.float32
    assert model.to("cpu", dtype=strata.float64) is model and weight.dtype == strata.float64
    assert model.float().to(torch_like_tensor := strata.zeros(1, dtype=strata.float64)) is model
    assert weight.dtype == torch_like_tensor.dtype
    assert model.cpu() is model
    check(TypeError, "nn.Module.to only accepts floating point or complex dtypes, but got desired dtype=int64",
          model.to, strata.int64)
    check(ValueError, "Module.to: device 'cuda' is not available", model.to, "cuda")
    check(TypeError, "to() got an unexpected keyword argument 'bogus'", model.to, bogus=1)
    assert model.half() is model and weight.dtype == strata.float16
    assert bn["running_var"].dtype == strata.float16 and bn["num_batches_tracked"].dtype == strata.int64

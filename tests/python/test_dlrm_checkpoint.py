"""Checkpoints that resume exactly and load all or nothing: strata.dlrm.DLRM.save/load (N steps,
save, load into a fresh model, N steps == 2N steps bit for bit; a bad entry changes nothing and is
named) and strata.load_checkpoint with a model and an optimizer."""
from collections import OrderedDict

import numpy as np
import pytest

import strata
import strata.dlrm
from strata import _C, nn

ROWS = [4096, 4096, 4096]
OPTIONS = dict(arch_sparse_feature_size=16, arch_embedding_size=ROWS, arch_mlp_bot=[5, 16], arch_mlp_top=[8, 1],
               mini_batch_size=64, num_batches=8, data_generation="zipf", zipf_alpha=1.1, num_indices_per_lookup=8,
               learning_rate=0.05, slow_tier_model="off")


def model(**extra):
    return strata.dlrm.DLRM(**{**OPTIONS, **extra})


def parameters(m):
    """Every parameter's bits: the MLPs (state_dict order), then every table."""
    return [np.asarray(v.numpy() if isinstance(v, strata.Tensor) else v).view(np.uint8).copy()
            for v in m.state_dict(tables=True).values()]


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def batches():
    return list(strata.dlrm.Batches(**OPTIONS))


@pytest.mark.parametrize("extra", [dict(optimizer="sgd"),
                                   dict(optimizer="rwsadagrad", fast_budget="256K", emb_policy="dynamic"),
                                   dict(optimizer="adagrad", lr_num_warmup_steps=6)])
def test_n_steps_save_load_n_steps_is_2n_steps_bitwise(tmp_path, extra):
    data = batches()
    whole = model(**extra)
    want_losses = [whole.train_step(*b) for b in data]

    first = model(**extra)
    losses = [first.train_step(*b) for b in data[:4]]
    path = tmp_path / "dlrm.ckpt"
    first.save(path, epoch=0, iter=4, best_auc_test=0.1 + 0.2)
    resumed = model(numpy_rand_seed=99, **extra)
    assert not same(parameters(resumed), parameters(first))
    meta = resumed.load(path)
    assert meta["iter"] == "4" and float(meta["best_auc_test"]) == 0.1 + 0.2 and meta["steps"] == "4"
    assert resumed.steps == 4
    assert same(parameters(resumed), parameters(first))
    losses += [resumed.train_step(*b) for b in data[int(meta["iter"]):]]
    assert np.array_equal(np.array(losses, dtype=np.float32), np.array(want_losses, dtype=np.float32))
    assert same(parameters(resumed), parameters(whole))


def rewrite(path, out, edit):
    model_entries, optimizer_entries, metadata = _C._load_checkpoint(str(path))
    model_entries, optimizer_entries, metadata = edit(list(model_entries), list(optimizer_entries), list(metadata))
    _C._save_checkpoint(str(out), model_entries, optimizer_entries, metadata)


def replace(entries, key, value):
    return [(k, value if k == key else v) for k, v in entries]


@pytest.mark.parametrize("edit, error", [
    (lambda m, o, meta: (m, replace(o, "dense.state.1.sum", strata.zeros(2)), meta), r"'state\.1\.sum' has shape \[2\]"),
    (lambda m, o, meta: (m, [e for e in o if e[0] != "dense.state.0.step"], meta), r"missing key 'state\.0\.step'"),
    (lambda m, o, meta: (m, replace(o, "sparse.2.sum", strata.zeros(7)), meta), r"sparse\.2\.sum is f32 \[7\]"),
    (lambda m, o, meta: ([e for e in m if e[0] != "emb_l.1.weight"], o, meta), r"lacks the entry 'emb_l\.1\.weight'"),
    (lambda m, o, meta: (replace(m, "bot_l.0.bias", strata.zeros(3)), o, meta), r"size mismatch for bot_l\.0\.bias"),
])
def test_a_bad_entry_changes_nothing_and_is_named(tmp_path, edit, error):
    saved = model(optimizer="rwsadagrad", fast_budget="256K")
    data = batches()
    for b in data[:3]:
        saved.train_step(*b)
    good, bad = tmp_path / "good.ckpt", tmp_path / "bad.ckpt"
    saved.save(good)
    rewrite(good, bad, edit)
    m = model(optimizer="rwsadagrad", fast_budget="256K", numpy_rand_seed=5)
    m.train_step(*data[0])
    before, steps = parameters(m), m.steps
    with pytest.raises(strata.StrataError, match=error) as e:
        m.load(bad)
    assert str(bad) in str(e.value)
    assert same(parameters(m), before) and m.steps == steps
    m.load(good)
    assert same(parameters(m), parameters(saved))


def test_save_metadata_arguments(tmp_path):
    m = model()
    with pytest.raises(TypeError, match="metadata 'epoch' must be a str, int or float, got list"):
        m.save(tmp_path / "x", epoch=[1])
    with pytest.raises(strata.StrataError, match="the extra metadata key 'steps' is reserved"):
        m.save(tmp_path / "x", steps=3)
    m.save(tmp_path / "x", total_samp=np.int64(640), total_loss=np.float64(1) / 3, note="text")
    meta = m.load(tmp_path / "x")
    assert meta["total_samp"] == "640" and float(meta["total_loss"]) == 1 / 3 and meta["note"] == "text"


# ---- strata.load_checkpoint: all or nothing ----

def make_net():
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def trained(make_opt):
    strata.manual_seed(4)
    net = make_net()
    opt = make_opt(net.parameters())
    x = strata.randn(5, 3)
    for _ in range(2):
        opt.zero_grad()
        (net(x) ** 2).mean().backward()
        opt.step()
    return net, opt


def values(net):
    return {k: v.numpy().copy() for k, v in net.state_dict().items()}


@pytest.mark.parametrize("key, value, error", [
    ("state.1.exp_avg", np.zeros(3, np.float32), r"key 'state\.1\.exp_avg' has shape \[3\]"),
    ("param_groups.0.lr", -1.0, "Invalid learning rate"),
])
def test_load_checkpoint_validates_the_optimizer_before_loading_the_model(tmp_path, key, value, error):
    net, opt = trained(lambda p: strata.optim.Adam(p, lr=0.01))
    state = opt.state_dict()
    if key.startswith("state."):
        state["state"][1]["exp_avg"] = value
    else:
        state["param_groups"][0]["lr"] = value

    class Saved:  # the trained optimizer's state with one bad entry
        def state_dict(self):
            return state

    strata.save_checkpoint(tmp_path / "bad", net, Saved())
    fresh = make_net()
    fresh_opt = strata.optim.Adam(fresh.parameters(), lr=0.01)
    before, opt_before = values(fresh), fresh_opt.state_dict()
    with pytest.raises(ValueError, match=error):
        strata.load_checkpoint(tmp_path / "bad", fresh, fresh_opt)
    after = values(fresh)
    assert all(np.array_equal(before[k], after[k]) for k in before)  # the model was not loaded
    assert fresh_opt.state_dict()["state"] == opt_before["state"] == {}


def test_load_checkpoint_puts_the_model_back_when_another_optimizer_raises(tmp_path):
    net, opt = trained(lambda p: strata.optim.SGD(p, lr=0.1, momentum=0.9))
    strata.save_checkpoint(tmp_path / "ck", net, opt)

    class Refuses:
        def load_state_dict(self, state):
            raise KeyError("state.0.momentum_buffer: refused")

    fresh = make_net()
    before = values(fresh)
    with pytest.raises(KeyError, match="refused"):
        strata.load_checkpoint(tmp_path / "ck", fresh, Refuses())
    after = values(fresh)
    assert all(np.array_equal(before[k], after[k]) for k in before)
    # A model whose keys do not match is refused before the optimizer is touched.
    other = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
    other_opt = strata.optim.SGD(other.parameters(), lr=0.1, momentum=0.9)
    with pytest.raises(strata.StrataError, match=r"size mismatch for 0\.weight"):
        strata.load_checkpoint(tmp_path / "ck", other, other_opt)
    assert other_opt.state_dict()["state"] == {}
    # And the good checkpoint loads whole.
    strata.load_checkpoint(tmp_path / "ck", fresh, strata.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9))
    loaded = values(fresh)
    assert all(np.array_equal(loaded[k], v.numpy()) for k, v in net.state_dict().items())

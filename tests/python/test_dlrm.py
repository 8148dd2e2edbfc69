"""strata.dlrm.DLRM against a PyTorch DLRM built per REFERENCE.md §1 (bench/workloads/torch_dlrm.py:
EmbeddingBag mode="sum", sparse=True) from the same weights: the same losses for 20 steps within
float32 tolerance with SGD, with rwsadagrad against a hand-written PyTorch row-wise Adagrad, with
adagrad against torch.optim.Adagrad; forward outputs; checkpoints; bad input."""

import pathlib
import sys

import numpy as np
import pytest
import torch

import strata
import strata.dlrm

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from workloads.torch_dlrm import TorchDLRM, random_batch  # noqa: E402

ROWS = [60, 45, 30, 7]
D = 4
BOT = [8, 16, D]
TOP = [16, 1]


def make_pair(interaction="dot", itself=False, **options):
    t = TorchDLRM(ROWS, D, BOT, TOP, interaction=interaction, itself=itself, seed=7)
    s = strata.dlrm.DLRM(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=BOT, arch_mlp_top=TOP,
                         arch_interaction_op=interaction, arch_interaction_itself=itself, **options)
    s.load_state_dict({k: v.detach().numpy() for k, v in t.state_dict().items()})
    return t, s


def batches(n, batch=16, lookups=5, seed=3):
    rng = np.random.default_rng(seed)
    return [random_batch(rng, batch, ROWS, BOT[0], lookups) for _ in range(n)]


def torch_inputs(b):
    dense, indices, offsets, targets = b
    return (torch.from_numpy(dense), [torch.from_numpy(i) for i in indices],
            [torch.from_numpy(o[:-1]) for o in offsets], torch.from_numpy(targets))


def torch_loss(model, b, loss):
    dense, idx, off, tgt = torch_inputs(b)
    out = model(dense, idx, off)
    crit = torch.nn.MSELoss() if loss == "mse" else torch.nn.BCELoss()
    return crit(out, tgt)


def assert_same_weights(t, s, rtol=2e-5, atol=2e-6):
    sd = t.state_dict()
    for k, v in s.state_dict().items():
        np.testing.assert_allclose(v.numpy(), sd[k].detach().numpy(), rtol=rtol, atol=atol, err_msg=k)
    for k in range(len(ROWS)):
        np.testing.assert_allclose(s.table_weight(k), sd[f"emb_l.{k}.weight"].detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"emb_l.{k}")


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(strata.get_num_threads())


def test_state_dict_has_the_reference_names():
    t, s = make_pair()
    dense_keys = [k for k in t.state_dict() if not k.startswith("emb_l.")]
    assert list(s.state_dict()) == dense_keys
    assert list(s.state_dict(tables=True))[-len(ROWS):] == [f"emb_l.{k}.weight" for k in range(len(ROWS))]
    assert s.table_rows == ROWS and s.num_tables == len(ROWS) and s.feature_size == D and s.dense_features == BOT[0]
    for k, v in s.state_dict().items():
        assert tuple(v.shape) == tuple(t.state_dict()[k].shape), k


@pytest.mark.parametrize("interaction,itself", [("dot", False), ("dot", True), ("cat", False)])
def test_forward_matches_pytorch(interaction, itself):
    t, s = make_pair(interaction, itself)
    for b in batches(3):
        dense, idx, off, _ = torch_inputs(b)
        want = t(dense, idx, off).detach().numpy()
        np.testing.assert_allclose(s(b[0], b[1], b[2]), want, rtol=1e-5, atol=1e-7)
        # PyTorch-style offsets (bag starts) give the same as CSR offsets.
        np.testing.assert_allclose(s(b[0], b[1], [o[:-1] for o in b[2]]), want, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("interaction,loss", [("dot", "mse"), ("cat", "bce"), ("dot", "bce")])
def test_twenty_sgd_steps_match_pytorch(interaction, loss):
    lr = 0.1
    t, s = make_pair(interaction, loss_function=loss, learning_rate=lr)
    opt = torch.optim.SGD(t.parameters(), lr=lr)
    ours, theirs = [], []
    for b in batches(20):
        opt.zero_grad(set_to_none=True)
        l = torch_loss(t, b, loss)
        l.backward()
        opt.step()
        theirs.append(l.item())
        ours.append(s.train_step(*b))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    assert s.steps == 20
    assert_same_weights(t, s)
    # The losses moved: the comparison is of a model that learns, not of constants.
    assert abs(ours[0] - ours[-1]) > 1e-4


def rowwise_adagrad_step(params_sparse, params_dense, state, lr, eps=1e-10):
    """The reference's RWSAdagrad, written out: per touched row r of a sparse gradient,
    sum_r += mean(g_r²), w_r -= lr · g_r / (sqrt(sum_r) + eps); dense parameters get Adagrad."""
    with torch.no_grad():
        for p in params_sparse:
            g = p.grad.coalesce()
            rows, vals = g.indices()[0], g.values()
            mom = state.setdefault(p, torch.zeros(p.shape[0]))
            mom.index_add_(0, rows, vals.pow(2).mean(dim=1))
            p.index_add_(0, rows, -lr * vals / (mom[rows].sqrt() + eps).unsqueeze(1))
        for p in params_dense:
            acc = state.setdefault(p, torch.zeros_like(p))
            acc.addcmul_(p.grad, p.grad, value=1.0)
            p.addcdiv_(p.grad, acc.sqrt().add_(eps), value=-lr)


def test_twenty_rwsadagrad_steps_match_a_pytorch_rowwise_adagrad():
    lr = 0.05
    t, s = make_pair(optimizer="rwsadagrad", learning_rate=lr)
    sparse = [p for n, p in t.named_parameters() if n.startswith("emb_l.")]
    dense = [p for n, p in t.named_parameters() if not n.startswith("emb_l.")]
    state = {}
    ours, theirs = [], []
    for b in batches(20, seed=11):
        t.zero_grad(set_to_none=True)
        l = torch_loss(t, b, "mse")
        l.backward()
        rowwise_adagrad_step(sparse, dense, state, lr)
        theirs.append(l.item())
        ours.append(s.train_step(*b))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    assert_same_weights(t, s, rtol=1e-4, atol=1e-5)


def test_twenty_adagrad_steps_match_torch_adagrad():
    lr = 0.05
    t, s = make_pair(optimizer="adagrad", learning_rate=lr)
    opt = torch.optim.Adagrad(t.parameters(), lr=lr)
    ours, theirs = [], []
    for b in batches(20, seed=5):
        opt.zero_grad(set_to_none=True)
        l = torch_loss(t, b, "mse")
        l.backward()
        opt.step()
        theirs.append(l.item())
        ours.append(s.train_step(*b))
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7)
    assert_same_weights(t, s, rtol=1e-4, atol=1e-5)


def test_tables_in_the_slow_tier_train_the_same():
    t, s = make_pair(learning_rate=0.1)
    _, slow = make_pair(learning_rate=0.1, emb_policy="simple", slow_tier_model="off")
    for b in batches(5):
        assert s.train_step(*b) == slow.train_step(*b)
    assert slow.counters["slow_bytes_read"] > 0 and s.counters["slow_bytes_read"] == 0
    assert set(slow.times) == {"bottom_mlp", "lookup", "interaction", "top_mlp", "backward", "update", "hooks", "steps"}
    assert slow.times["steps"] == 5
    # Cached tables (the budget holds a fraction of the rows) train to the same values too.
    _, s2 = make_pair(learning_rate=0.1)
    _, c2 = make_pair(learning_rate=0.1, emb_policy="dynamic", fast_budget="64K", cache_fraction=0.5)
    for b in batches(5):
        assert s2.train_step(*b) == c2.train_step(*b)
    assert 0.0 < c2.counters["cache_hit_rate"] <= 1.0 and s2.counters["cache_hit_rate"] is None


def test_save_and_load_round_trip(tmp_path):
    _, a = make_pair(optimizer="rwsadagrad", learning_rate=0.05)
    bs = batches(5)
    for b in bs[:3]:
        a.train_step(*b)
    path = tmp_path / "dlrm.ckpt"
    a.save(path)
    b_model = strata.dlrm.DLRM(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=BOT,
                               arch_mlp_top=TOP, optimizer="rwsadagrad", learning_rate=0.05, numpy_rand_seed=9)
    meta = b_model.load(path)
    assert meta["format"] == "strata-dlrm" and meta["steps"] == "3"
    assert b_model.steps == 3
    for b in bs[3:]:
        assert a.train_step(*b) == b_model.train_step(*b)
    for k in range(len(ROWS)):
        np.testing.assert_array_equal(a.table_weight(k), b_model.table_weight(k))


def test_bad_indices_name_the_table_and_row_and_change_nothing():
    _, s = make_pair()
    dense, indices, offsets, targets = batches(1)[0]
    before = [s.table_weight(k) for k in range(len(ROWS))]
    dense_before = {k: v.numpy().copy() for k, v in s.state_dict().items()}
    bad = [i.copy() for i in indices]
    bad[1][0] = ROWS[1]
    with pytest.raises(strata.StrataError, match=r"table 1.*row 45 is out of range \[0, 45\)"):
        s.train_step(dense, bad, offsets, targets)
    bad[1][0] = -3
    with pytest.raises(strata.StrataError, match=r"table 1.*row -3"):
        s.train_step(dense, bad, offsets, targets)
    for k in range(len(ROWS)):
        np.testing.assert_array_equal(s.table_weight(k), before[k])
    for k, v in s.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), dense_before[k])
    assert s.steps == 0


def test_bad_shapes_and_types_are_named():
    _, s = make_pair()
    dense, indices, offsets, targets = batches(1)[0]
    with pytest.raises(ValueError, match=r"dense must be \[B, 8\]"):
        s.train_step(dense[:, :5], indices, offsets, targets)
    with pytest.raises(ValueError, match="expected indices for 4 tables, got 3"):
        s.train_step(dense, indices[:3], offsets, targets)
    with pytest.raises(ValueError, match="offsets of table 2 must hold 16 bag starts"):
        s.train_step(dense, indices, offsets[:2] + [offsets[2][:5]] + offsets[3:], targets)
    with pytest.raises(TypeError, match="indices of table 0 must be an integer array"):
        s.train_step(dense, [indices[0].astype(np.float32)] + indices[1:], offsets, targets)
    with pytest.raises(TypeError, match="must be a list with one array per table"):
        s.train_step(dense, indices[0], offsets, targets)
    with pytest.raises(ValueError, match="targets must be"):
        s.train_step(dense, indices, offsets, targets[:3])
    with pytest.raises(ValueError, match="needs \\[60, 4\\] values"):
        s.set_table_weight(0, np.zeros((59, 4), np.float32))
    with pytest.raises(strata.StrataError, match="table 9 does not exist"):
        s.table_weight(9)


def test_bad_options_name_the_flag():
    with pytest.raises(TypeError, match="unexpected keyword argument 'arch_mlp_middle'"):
        strata.dlrm.DLRM(arch_mlp_middle=[4, 2])
    with pytest.raises(TypeError, match="strata.set_num_threads"):
        strata.dlrm.DLRM(threads=2)
    with pytest.raises(strata.StrataError, match=r"--arch-mlp-bot: the last width \(3\) must equal "
                                                 r"--arch-sparse-feature-size \(2\)"):
        strata.dlrm.DLRM(arch_mlp_bot=[4, 3])
    with pytest.raises(strata.StrataError, match="--arch-embedding-size: '4-x' is not a dash-separated list"):
        strata.dlrm.DLRM(arch_embedding_size="4-x")
    with pytest.raises(strata.StrataError, match="--optimizer: expected one of sgd, adagrad, rwsadagrad"):
        strata.dlrm.DLRM(optimizer="adam")
    with pytest.raises(strata.StrataError, match="--use-gpu is not supported"):
        strata.dlrm.DLRM(use_gpu=True)
    with pytest.raises(TypeError, match="arch_interaction_itself must be True or False"):
        strata.dlrm.DLRM(arch_interaction_itself="yes")
    with pytest.raises(KeyError, match="emb_l.9.weight"):
        strata.dlrm.DLRM().load_state_dict({"emb_l.9.weight": np.zeros((2, 2), np.float32)})
    # The distributed run is strata-dlrm's under mpirun; the Python model never silently ignores it.
    with pytest.raises(strata.StrataError, match="--dist-backend: TieredDLRM trains in one process"):
        strata.dlrm.DLRM(dist_backend="mpi")
    with pytest.raises(strata.StrataError, match="--dist-backend: backend 'gloo' is not supported: Strata's only"):
        strata.dlrm.DLRM(dist_backend="gloo")
    with pytest.raises(strata.StrataError, match="--dist-chunks: applies only to a distributed run"):
        strata.dlrm.DLRM(dist_chunks=4)


def test_defaults_are_the_references_and_presets_work():
    m = strata.dlrm.DLRM()
    assert m.table_rows == [4, 3, 2] and m.feature_size == 2 and m.dense_features == 4
    assert "tiny" in strata.dlrm.presets() and "--arch-mlp-bot" in strata.dlrm.usage()
    k = strata.dlrm.DLRM(preset="kaggle", scale_rows=0.0001, fast_budget="16M")
    assert k.num_tables == 26 and k.feature_size == 16 and k.dense_features == 13


def test_batches_are_the_references_random_batches_and_train():
    opts = dict(arch_embedding_size=ROWS, arch_sparse_feature_size=D, arch_mlp_bot=BOT, arch_mlp_top=TOP,
                mini_batch_size=16, num_batches=4, num_indices_per_lookup=5)
    data = strata.dlrm.Batches(**opts)
    assert len(data) == 4 and data.describe().startswith("random")
    got = list(data)
    assert len(got) == 4 and len(list(data)) == 4  # every iteration is one epoch
    dense, indices, offsets, targets = got[0]
    assert dense.shape == (16, BOT[0]) and targets.shape == (16, 1) and len(indices) == len(ROWS)
    for i, o, rows in zip(indices, offsets, ROWS):
        assert o.shape == (17,) and o[0] == 0 and o[-1] == len(i) and i.min() >= 0 and i.max() < rows
    m = strata.dlrm.DLRM(**opts)
    for b in got:
        assert np.isfinite(m.train_step(*b))
    z = strata.dlrm.Batches(data_generation="zipf", zipf_alpha=1.1, reuse=0.5, arch_embedding_size=[1000, 500],
                            mini_batch_size=64, num_batches=2, num_indices_per_lookup=4)
    assert z.describe().startswith("zipf") and len(list(z)) == 2
    with pytest.raises(strata.StrataError, match="--data-trace-file: table 0: cannot open"):
        strata.dlrm.Batches(data_generation="synthetic", data_trace_file="/no/such/dist_emb_j.log")


def test_evaluate_a_test_split_matches_torch_and_sklearn():
    """DLRM.evaluate(batches): the PyTorch model's probabilities on the same weights give the same
    loss, accuracy (np.round) and AUC (sklearn) — over a list of tuples and over a Batches source."""
    sk = pytest.importorskip("sklearn.metrics")
    t, s = make_pair(loss_function="bce")
    data = batches(6, batch=32)
    rng = np.random.default_rng(11)
    data = [(b[0], b[1], b[2], (rng.random(len(b[3])) < 0.4).astype(np.float32).reshape(-1, 1)) for b in data]
    got = s.evaluate(data)
    with torch.no_grad():
        probs = np.concatenate([t(*torch_inputs(b)[:3]).numpy().ravel() for b in data])
    targets = np.concatenate([b[3].ravel() for b in data])
    assert got["samples"] == len(targets)
    assert got["accuracy"] == pytest.approx(np.mean(np.round(probs) == targets), abs=1.0 / len(targets) + 1e-12)
    assert got["auc"] == pytest.approx(sk.roc_auc_score(targets, probs), abs=1e-4)
    assert got["log_loss"] == pytest.approx(sk.log_loss(targets, probs.astype(np.float64)), rel=1e-4)
    assert got["loss"] == pytest.approx(np.mean([s.evaluate(*b) for b in data]), rel=1e-5)
    # Nothing was updated.
    assert s.evaluate(data) == got
    # A Batches source: the same as its batches as tuples.
    src = strata.dlrm.Batches(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=BOT, mini_batch_size=16, num_batches=3,
                              round_targets=True)
    assert s.evaluate(src) == s.evaluate(list(src))


def test_evaluate_rejects_what_is_not_a_batch():
    _, s = make_pair()
    with pytest.raises(TypeError, match="each batch must be a"):
        s.evaluate([np.zeros(3)])


# ---- one tiered memory per process (Note [One tiered memory per process]) ----

def test_tables_live_in_the_process_tiered_memory():
    rows, d = [4096, 4096, 4096], 16
    options = dict(arch_sparse_feature_size=d, arch_embedding_size=rows, arch_mlp_bot=[5, d], arch_mlp_top=[4, 1])
    fast0, slow0 = strata.memory.memory_allocated("fast"), strata.memory.memory_allocated("slow")
    in_dram = strata.dlrm.DLRM(fast_budget="4M", **options)
    table_bytes = sum(rows) * d * 4
    assert strata.memory.memory_allocated("fast") - fast0 >= table_bytes
    in_slow = strata.dlrm.DLRM(emb_policy="simple", **options)
    assert strata.memory.memory_allocated("slow") - slow0 >= table_bytes
    assert "slow tier: pm:" in in_slow.describe()
    del in_dram, in_slow


def test_one_process_has_one_slow_tier(tmp_path):
    with pytest.raises(strata.StrataError, match="this process's slow tier is already in .*one process has one slow tier"):
        strata.dlrm.DLRM(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=BOT, arch_mlp_top=TOP,
                         emb_policy="simple", slow_dir=str(tmp_path))


def test_a_budget_the_process_fast_tier_cannot_hold_is_refused():
    import subprocess
    code = ("import strata, strata.dlrm\n"
            "strata.memory.configure(fast_bytes='8M')\n"
            "strata.dlrm.DLRM(arch_sparse_feature_size=16, arch_embedding_size=[262144, 262144],\n"
            "                 arch_mlp_bot=[5, 16], arch_mlp_top=[4, 1], fast_budget='64M')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert "--fast-budget: the tables need 32.0 MiB of fast memory but the process's fast tier has" in r.stderr
    assert "strata.memory.configure" in r.stderr

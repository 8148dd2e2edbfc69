"""strata.dlrm.DLRM with the reference's table tricks (embeddings/dlrm.h Note [DLRM table kinds])
against a PyTorch DLRM that implements them from the reference's formulas (REFERENCE.md §1,
tricks/qr_embedding_bag.py, tricks/md_embedding_bag.py, dlrm_s_pytorch.py create_emb/apply_emb):
quotient-remainder tables (mult, add, concat), mixed-dimension tables with projections, learned
pooling weights v_W_l — trained side by side for 20 steps (SGD and Adagrad) from the same initial
weights, losses and parameters within float32 tolerance; each once with tables cached over the slow
tier. Also the tricks' initial values and their state_dict names."""

import math
import pathlib
import sys

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import strata
import strata.dlrm

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from workloads.torch_dlrm import random_batch  # noqa: E402

ROWS = [60, 45, 30, 7]
D = 4
TOP = [16, 1]


class QRBag(nn.Module):
    """QREmbeddingBag's math: sum-pooled bags of rows i // c of weight_q and i % c of weight_r, combined."""

    def __init__(self, rows, d, c, op):
        super().__init__()
        self.c, self.op = c, op
        self.weight_q = nn.Parameter(torch.zeros(-(-rows // c), d))
        self.weight_r = nn.Parameter(torch.zeros(c, d))

    def forward(self, idx, off, psw=None):
        q = F.embedding_bag(idx // self.c, self.weight_q, off, mode="sum", sparse=True)
        r = F.embedding_bag(idx % self.c, self.weight_r, off, mode="sum", sparse=True)
        return {"mult": lambda: q * r, "add": lambda: q + r, "concat": lambda: torch.cat([q, r], 1)}[self.op]()


class MDBag(nn.Module):
    """PrEmbeddingBag's math: a d_k-wide sum-pooled bag, then a bias-free projection to d."""

    def __init__(self, rows, dk, d):
        super().__init__()
        self.embs = nn.EmbeddingBag(rows, dk, mode="sum", sparse=True)
        self.proj = nn.Linear(dk, d, bias=False) if dk < d else nn.Identity()

    def forward(self, idx, off, psw=None):
        return self.proj(self.embs(idx, off))


class TorchTricksDLRM(nn.Module):
    """The reference DLRM (dot interaction, MSE) whose tables are built per `kinds`: ("plain",),
    ("qr", c, op) or ("md", d_k); `learned` adds the trainable pooling weights v_W_l."""

    def __init__(self, kinds, d, bot, top, learned=False):
        super().__init__()
        self.d = d
        f = len(kinds) + 1
        self.bot_l = nn.Sequential(*[m for a, b in zip(bot, bot[1:]) for m in (nn.Linear(a, b), nn.ReLU())])
        widths = [d + f * (f - 1) // 2] + top
        layers = [m for a, b in zip(widths, widths[1:]) for m in (nn.Linear(a, b), nn.ReLU())]
        layers[-1] = nn.Sigmoid()
        self.top_l = nn.Sequential(*layers)
        self.emb_l = nn.ModuleList()
        for rows, kind in zip(ROWS, kinds):
            if kind[0] == "qr":
                self.emb_l.append(QRBag(rows, D, kind[1], kind[2]))
            elif kind[0] == "md":
                self.emb_l.append(MDBag(rows, kind[1], d))
            else:
                self.emb_l.append(nn.EmbeddingBag(rows, d, mode="sum", sparse=True))
        if learned:
            self.v_W_l = nn.ParameterList([nn.Parameter(torch.ones(n)) for n in ROWS])
        self.learned = learned
        self._li = torch.tensor([i for i in range(f) for j in range(i)])
        self._lj = torch.tensor([j for i in range(f) for j in range(i)])

    def forward(self, dense, indices, offsets):
        x = self.bot_l(dense)
        ly = []
        for k, (e, i, o) in enumerate(zip(self.emb_l, indices, offsets)):
            if self.learned:
                ly.append(e(i, o, per_sample_weights=self.v_W_l[k].gather(0, i)))
            else:
                ly.append(e(i, o))
        t = torch.cat([x] + ly, dim=1).view(x.shape[0], -1, self.d)
        z = torch.bmm(t, t.transpose(1, 2))
        return self.top_l(torch.cat([x, z[:, self._li, self._lj]], dim=1))


def make_pair(kinds, bot, learned=False, **options):
    s = strata.dlrm.DLRM(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=bot, arch_mlp_top=TOP,
                         **options)
    t = TorchTricksDLRM(kinds, bot[-1], bot, TOP, learned=learned)
    state = {k: torch.from_numpy(np.array(v.numpy())) for k, v in s.state_dict(tables=True).items()}
    t.load_state_dict(state, strict=True)
    return t, s


def batches(n, bot, seed):
    rng = np.random.default_rng(seed)
    return [random_batch(rng, 16, ROWS, bot[0], 5) for _ in range(n)]


def assert_same_parameters(t, s, rtol=1e-4, atol=1e-5):
    sd = t.state_dict()
    ours = s.state_dict(tables=True)
    assert set(ours) == set(sd), sorted(set(ours) ^ set(sd))
    for k, v in ours.items():
        np.testing.assert_allclose(v.numpy(), sd[k].detach().numpy(), rtol=rtol, atol=atol, err_msg=k)


def train_side_by_side(t, s, bot, optimizer, lr, seed=3, steps=20):
    opt = (torch.optim.SGD(t.parameters(), lr=lr) if optimizer == "sgd"
           else torch.optim.Adagrad(t.parameters(), lr=lr, eps=1e-10))
    ours, theirs = [], []
    initial = {k: np.array(v.numpy()) for k, v in s.state_dict(tables=True).items()}
    for dense, idx, off, tgt in batches(steps, bot, seed):
        opt.zero_grad(set_to_none=True)
        out = t(torch.from_numpy(dense), [torch.from_numpy(i) for i in idx], [torch.from_numpy(o[:-1]) for o in off])
        loss = nn.MSELoss()(out, torch.from_numpy(tgt))
        loss.backward()
        opt.step()
        theirs.append(loss.item())
        ours.append(s.train_step(dense, idx, off, tgt))
    np.testing.assert_allclose(ours, theirs, rtol=5e-5, atol=1e-6)
    # A model that learns: every table (and every learned weight vector, projection) moved.
    final = s.state_dict(tables=True)
    for k in s.stored_table_keys + [k for k in final if k.startswith("v_W_l.") or k.endswith(".proj.weight")]:
        assert np.abs(final[k].numpy() - initial[k]).max() > 1e-6, k
    assert s.steps == steps
    assert_same_parameters(t, s)


@pytest.fixture(autouse=True)
def _threads():
    torch.set_num_threads(strata.get_num_threads())


CACHED = dict(emb_policy="dynamic", fast_budget="64K", cache_fraction=0.5, slow_tier_model="off")


@pytest.mark.parametrize("op", ["mult", "add", "concat"])
@pytest.mark.parametrize("optimizer,lr", [("sgd", 0.01), ("adagrad", 0.01)])
def test_quotient_remainder_tables_train_like_pytorch(op, optimizer, lr):
    # The reference's QR initial values U(sqrt(1/n), 1) make large features: at larger learning
    # rates the training is chaotic and float32 rounding differences grow exponentially.
    threshold = 5 if op == "concat" else 20  # concat: every table is a QR table
    bot = [8, 16, 2 * D if op == "concat" else D]
    kinds = [("qr", 4, op) if n > threshold else ("plain",) for n in ROWS]
    t, s = make_pair(kinds, bot, qr_flag=True, qr_operation=op, qr_threshold=threshold, qr_collisions=4,
                     optimizer=optimizer, learning_rate=lr)
    train_side_by_side(t, s, bot, optimizer, lr)


def test_quotient_remainder_tables_cached_over_the_slow_tier_train_like_pytorch():
    bot = [8, 16, D]
    kinds = [("qr", 4, "mult") if n > 20 else ("plain",) for n in ROWS]
    t, s = make_pair(kinds, bot, qr_flag=True, qr_threshold=20, qr_collisions=4, learning_rate=0.01, **CACHED)
    assert "cache of" in s.describe() and "QR quotient" in s.describe()
    train_side_by_side(t, s, bot, "sgd", 0.01, seed=8)
    assert s.counters["cache_hit_rate"] is not None


def md_dims():
    """md_solver(rows, 0.3, d0=D) of the reference (k = 1, no rounding), written out."""
    order = np.argsort(ROWS, kind="stable")
    n = np.asarray(ROWS, np.float32)[order]
    lam = np.float32(D) * n[0] ** np.float32(0.3)
    d = np.maximum(1, lam * n ** np.float32(-0.3))
    d[0] = D
    dims = np.empty(len(ROWS), np.int64)
    dims[order] = np.round(d).astype(np.int64)
    return dims


@pytest.mark.parametrize("optimizer,lr,cached", [("sgd", 0.05, False), ("adagrad", 0.01, False), ("sgd", 0.05, True)])
def test_mixed_dimension_tables_train_like_pytorch(optimizer, lr, cached):
    bot = [8, 16, D]
    dims = md_dims()
    assert len(set(dims)) > 1  # the rule gives mixed dimensions here
    kinds = [("md", int(dk)) if n > 20 else ("plain",) for n, dk in zip(ROWS, dims)]
    t, s = make_pair(kinds, bot, md_flag=True, md_threshold=20, md_temperature=0.3, optimizer=optimizer,
                     learning_rate=lr, **(CACHED if cached else {}))
    for k, (n, dk) in enumerate(zip(ROWS, dims)):
        assert s.table_weight(k).shape == ((n, int(dk)) if n > 20 else (n, D))
    train_side_by_side(t, s, bot, optimizer, lr, seed=5)


@pytest.mark.parametrize("optimizer,lr,cached", [("sgd", 0.05, False), ("adagrad", 0.01, False), ("sgd", 0.05, True)])
def test_learned_pooling_weights_train_like_pytorch(optimizer, lr, cached):
    bot = [8, 16, D]
    t, s = make_pair([("plain",)] * len(ROWS), bot, learned=True, weighted_pooling="learned", optimizer=optimizer,
                     learning_rate=lr, **(CACHED if cached else {}))
    assert all(np.all(s.state_dict()[f"v_W_l.{k}"].numpy() == 1.0) for k in range(len(ROWS)))
    train_side_by_side(t, s, bot, optimizer, lr, seed=9)
    # The weights moved, and only those of rows that occurred.
    seen = np.zeros(ROWS[0], bool)
    for _, idx, _, _ in batches(20, bot, 9):
        seen[idx[0]] = True
    v = s.state_dict()["v_W_l.0"].numpy()
    assert np.all(v[~seen] == 1.0) and np.any(v[seen] != 1.0)


def test_initial_values_follow_the_reference():
    s = strata.dlrm.DLRM(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=[8, 16, D],
                         arch_mlp_top=TOP, qr_flag=True, qr_threshold=20, qr_collisions=4)
    assert s.stored_table_keys == ["emb_l.0.weight_q", "emb_l.0.weight_r", "emb_l.1.weight_q", "emb_l.1.weight_r",
                                   "emb_l.2.weight_q", "emb_l.2.weight_r", "emb_l.3.weight"]
    for k, n in enumerate(ROWS[:3]):
        # nn.init.uniform_(w, sqrt(1/n)): U(sqrt(1/n), 1)
        for part, rows in ((0, -(-n // 4)), (1, 4)):
            w = s.table_weight(k, part)
            assert w.shape == (rows, D) and w.min() >= math.sqrt(1 / n) and w.max() < 1.0
    bound = math.sqrt(1 / ROWS[3])
    assert np.all(np.abs(s.table_weight(3)) <= bound)
    m = strata.dlrm.DLRM(arch_sparse_feature_size=D, arch_embedding_size=ROWS, arch_mlp_bot=[8, 16, D],
                         arch_mlp_top=TOP, md_flag=True, md_threshold=20)
    sd = m.state_dict()
    dims = md_dims()
    for k in range(3):
        if dims[k] < D:
            w = sd[f"emb_l.{k}.proj.weight"].numpy()
            assert w.shape == (D, dims[k]) and np.abs(w).max() <= math.sqrt(6 / (D + dims[k]))
    assert "emb_l.3.proj.weight" not in sd and m.stored_table_keys[3] == "emb_l.3.weight"


def test_bad_trick_options_name_the_flag():
    with pytest.raises(strata.StrataError, match="--qr-operation: expected one of mult, add, concat"):
        strata.dlrm.DLRM(qr_flag=True, qr_operation="xor")
    with pytest.raises(strata.StrataError, match="--qr-flag: quotient-remainder embeddings with --weighted-pooling"):
        strata.dlrm.DLRM(qr_flag=True, weighted_pooling="learned")
    with pytest.raises(strata.StrataError, match="--arch-mlp-bot: the last width .* with --qr-operation concat"):
        strata.dlrm.DLRM(qr_flag=True, qr_operation="concat", qr_threshold=1)
    s = strata.dlrm.DLRM(weighted_pooling="learned")
    b = random_batch(np.random.default_rng(1), 4, s.table_rows, s.dense_features, 2)
    with pytest.raises(strata.StrataError, match="per-sample weights were given, but with --weighted-pooling learned"):
        s.train_step(*b[:3], b[3], per_sample_weights=[np.ones(len(i), np.float32) for i in b[1]])
    with pytest.raises(KeyError, match="emb_l.0.weight_z"):
        strata.dlrm.DLRM(qr_flag=True, qr_threshold=1).load_state_dict({"emb_l.0.weight_z": np.zeros(1)})

"""A PyTorch DLRM built as REFERENCE.md §1 describes the public reference (dlrm_s_pytorch.py):
bottom MLP (Linear + ReLU), EmbeddingBag(mode="sum", sparse=True) tables, dot or cat interaction,
top MLP (Linear + ReLU, Sigmoid last), MSE/BCE loss, plain SGD. The benchmark's peer and the parity
test both use it; it is rebuilt here (a few dozen lines) rather than vendored.

Also the reference's `random` input rules, so both sides of a benchmark draw the same kind of
batches: per table and sample a bag of round(max(1, U·min(rows, L))) indices (L when fixed),
indices unique(round(U·(rows−1))), dense features U[0,1), targets U[0,1)."""
import math

import numpy as np
import torch
import torch.nn as nn


def _mlp(widths, sigmoid_last):
    layers = []
    for k in range(len(widths) - 1):
        n, m = widths[k], widths[k + 1]
        lin = nn.Linear(n, m, bias=True)
        # the reference's init: W ~ N(0, sqrt(2/(m+n))), b ~ N(0, sqrt(1/m))
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(np.random.normal(0.0, math.sqrt(2.0 / (m + n)), (m, n)).astype(np.float32)))
            lin.bias.copy_(torch.from_numpy(np.random.normal(0.0, math.sqrt(1.0 / m), m).astype(np.float32)))
        layers.append(lin)
        layers.append(nn.Sigmoid() if (sigmoid_last and k == len(widths) - 2) else nn.ReLU())
    return nn.Sequential(*layers)


class TorchDLRM(nn.Module):
    """`ln_emb` rows per table, `d` = sparse feature size, `bot` = bottom widths (input first, last
    == d), `top` = top widths after the interaction (the interaction width is prepended as the
    reference does)."""

    def __init__(self, ln_emb, d, bot, top, interaction="dot", itself=False, seed=123):
        super().__init__()
        np.random.seed(seed)
        if bot[-1] != d:
            raise ValueError(f"the last bottom-MLP width {bot[-1]} must equal the sparse feature size {d}")
        self.d, self.interaction, self.itself = d, interaction, itself
        f = len(ln_emb) + 1
        width = (d + (f * (f + 1) // 2 if itself else f * (f - 1) // 2)) if interaction == "dot" else f * d
        self.bot_l = _mlp(list(bot), sigmoid_last=False)
        self.top_l = _mlp([width] + list(top), sigmoid_last=True)
        self.emb_l = nn.ModuleList()
        for n in ln_emb:
            e = nn.EmbeddingBag(n, d, mode="sum", sparse=True)
            bound = math.sqrt(1.0 / n)
            with torch.no_grad():
                e.weight.copy_(torch.from_numpy(np.random.uniform(-bound, bound, (n, d)).astype(np.float32)))
            self.emb_l.append(e)
        off = 1 if itself else 0
        self._li = torch.tensor([i for i in range(f) for j in range(i + off)])
        self._lj = torch.tensor([j for i in range(f) for j in range(i + off)])

    def interact(self, x, ly):
        if self.interaction == "cat":
            return torch.cat([x] + ly, dim=1)
        b = x.shape[0]
        t = torch.cat([x] + ly, dim=1).view(b, -1, self.d)
        z = torch.bmm(t, torch.transpose(t, 1, 2))
        return torch.cat([x, z[:, self._li, self._lj]], dim=1)

    def forward(self, dense, indices, offsets):
        """`indices[k]`, `offsets[k]`: 1-D int64 tensors; offsets are bag starts (B entries)."""
        x = self.bot_l(dense)
        ly = [e(i, o) for e, i, o in zip(self.emb_l, indices, offsets)]
        return self.top_l(self.interact(x, ly))


def random_batch(rng, batch, ln_emb, n_dense, lookups, fixed=False):
    """One batch by the reference's `random` rules; offsets are CSR (batch + 1 entries)."""
    dense = rng.random((batch, n_dense), dtype=np.float32)
    indices, offsets = [], []
    for rows in ln_emb:
        idx, off = [], [0]
        for _ in range(batch):
            size = lookups if fixed else int(round(max(1.0, rng.random() * min(rows, lookups))))
            size = min(size, rows)
            picked = np.unique(np.round(rng.random(size) * (rows - 1)).astype(np.int64))
            idx.append(picked)
            off.append(off[-1] + len(picked))
        indices.append(np.concatenate(idx))
        offsets.append(np.asarray(off, dtype=np.int64))
    targets = rng.random((batch, 1), dtype=np.float32)
    return dense, indices, offsets, targets


def torch_step_fn(model, batch_np, lr=0.01, loss="mse"):
    """A closure running one training step (zero_grad, forward, loss, backward, SGD) on one batch;
    returns the loss as a float."""
    dense, indices, offsets, targets = batch_np
    dense_t = torch.from_numpy(dense)
    idx_t = [torch.from_numpy(i) for i in indices]
    off_t = [torch.from_numpy(o[:-1]) for o in offsets]  # PyTorch takes bag starts
    tgt_t = torch.from_numpy(targets)
    crit = nn.MSELoss(reduction="mean") if loss == "mse" else nn.BCELoss(reduction="mean")
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(dense_t, idx_t, off_t)
        l = crit(out, tgt_t)
        l.backward()
        opt.step()
        return float(l.item())

    return step

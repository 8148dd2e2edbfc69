"""Embedding lookup + fused update on one table in DRAM: Strata's kernels (strata-bench-emb: a
lookup_ensemble into a [B, d] buffer, then update_ensemble with SGD) against PyTorch 2.13's
EmbeddingBag(mode="sum", sparse=True) forward + backward + SGD step, same table size, feature size,
batch and bag-size distribution (uniform 1..100 rows per bag, rows uniform over the table). Figure:
time per lookup+update step; its work is the row bytes the step must touch — every looked-up row
read, every distinct updated row read and written ((nnz + 2·unique) · row bytes, from Strata's
batches) — compared with the machine's random-gather bandwidth for rows of that size
(strata-limits gather_256 for d = 64). The issue's target: >= 60 % of that limit."""
import numpy as np
import torch
import torch.nn as nn

from harness.core import Figure, Item, Run, Target, Workload
from workloads.torch_side import meta, time_us

CONFIG = {"d": 64, "table_mib": 1024, "batch": 2048, "bag_min": 1, "bag_max": 100}


def _params(ctx):
    c = dict(CONFIG)
    if ctx.quick:
        c.update(table_mib=64, batch=256)
    return c


def _strata(ctx):
    c = _params(ctx)
    d = ctx.run_json("strata-bench-emb", ["--threads", ctx.threads, "--dims", c["d"], "--table-mib", c["table_mib"],
                                          "--tables", 1, "--batch", c["batch"], "--bag-min", c["bag_min"],
                                          "--bag-max", c["bag_max"], "--reps", 3 if ctx.quick else 10], tag="emb")
    r = d["records"][0]
    steps = [a + b for a, b in zip(r["lookup_us"]["samples"], r["update_us"]["samples"])]
    ctx.shared["emb:rows"] = r["rows"]
    work = (r["nnz"] + 2 * r["unique"]) * r["row_bytes"]
    return Run({"threads": d["threads"], "dtype": d["dtype"], "library": d["library"]}, {"step": steps}, {"step": work})


def _peer(ctx):
    c = _params(ctx)
    rows = ctx.shared.get("emb:rows") or (c["table_mib"] << 20) // (4 * c["d"])
    rng = np.random.default_rng(0)
    emb = nn.EmbeddingBag(rows, c["d"], mode="sum", sparse=True)
    opt = torch.optim.SGD(emb.parameters(), lr=0.01)
    batches = []
    for _ in range(4):
        sizes = rng.integers(c["bag_min"], c["bag_max"] + 1, c["batch"])
        offsets = torch.from_numpy(np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))
        idx = torch.from_numpy(rng.integers(0, rows, int(sizes.sum())).astype(np.int64))
        batches.append((idx, offsets, torch.randn(c["batch"], c["d"])))
    k = [0]

    def step():
        idx, off, g = batches[k[0] % len(batches)]
        k[0] += 1
        opt.zero_grad(set_to_none=True)
        out = emb(idx, off)
        out.backward(g)
        opt.step()

    return Run(meta(), {"step": time_us(step, 3 if ctx.quick else 10, 2)})


def items(ctx):
    c = _params(ctx)
    return [Item(f"d={c['d']}, {c['table_mib']} MiB table, batch {c['batch']}",
                 [Figure("step", "lookup + update step", limit="gather_256",
                         target=Target(">= 60 % of the 256-byte random-gather bandwidth", min_fraction=0.6))],
                 strata=_strata, peer=_peer)]


WORKLOAD = Workload(
    name="emb",
    title="Embedding lookup + fused update vs PyTorch EmbeddingBag(sparse=True) + SGD",
    peer_name="PyTorch",
    slow_tier="not involved (the table is in DRAM)",
    items=items,
    describe=__doc__,
)

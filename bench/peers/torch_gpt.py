"""PyTorch's side of the GPT benchmark (bench/workloads/gpt.py), the computations of strata-bench-gpt:

- sdpa: F.scaled_dot_product_attention(q, k, v, is_causal=True) forward and backward on
  [batch, heads, context, width / heads] f32 (PyTorch's fused CPU kernel).
- step: a GPT-2-style decoder written as PyTorch users write one (nanoGPT's structure: LayerNorm,
  one Linear for q, k, v, F.scaled_dot_product_attention(is_causal=True), the output projection,
  LayerNorm, Linear-GELU-Linear, pre-norm residuals, final LayerNorm, head tied to the token
  embedding), one step = zero_grad(set_to_none=True), forward, cross-entropy, backward, SGD.
- remat: the same step with the gradients kept allocated (zero_grad(set_to_none=False): the peak is
  activations, as Strata measures it) under plain autograd (StoreAll) and under
  torch.utils.checkpoint: every block checkpointed (use_reentrant=False), and checkpoint_sequential
  over the blocks with 2, 3 and `layers` segments. Peaks are heap bytes through bench/peers/peakshim.c (this
  script must run under LD_PRELOAD=libpeakshim.so for --what remat). Per fraction f of the StoreAll
  peak: the fastest configuration whose measured peak fits (none: null), and the lowest peak any
  configuration reached, with its overhead.

    python torch_gpt.py --what step --threads 2 --json out.json
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from workloads.torch_side import time_us  # noqa: E402


class Block(nn.Module):
    def __init__(self, E, H):
        super().__init__()
        self.H = H
        self.ln_1, self.ln_2 = nn.LayerNorm(E), nn.LayerNorm(E)
        self.c_attn, self.c_proj = nn.Linear(E, 3 * E), nn.Linear(E, E)
        self.c_fc, self.mlp_proj = nn.Linear(E, 4 * E), nn.Linear(4 * E, E)

    def forward(self, x):
        B, T, E = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(E, dim=2)
        q, k, v = (t.view(B, T, self.H, E // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, E))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, V, T, L, H, E):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, E), nn.Embedding(T, E)
        self.h = nn.Sequential(*[Block(E, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(E)
        self.lm_head = nn.Linear(E, V, bias=False)
        self.lm_head.weight = self.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / (2 * L) ** 0.5 if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets, mode=None):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        if mode is None:
            x = self.h(x)
        elif mode == "every_block":
            for block in self.h:
                x = checkpoint(block, x, use_reentrant=False)
        else:
            x = checkpoint_sequential(self.h, mode, x, use_reentrant=False)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


MIN_WARM_SECONDS = 2.0  # as strata-bench-gpt: neither side is timed on its first calls (--quick: a tenth)
min_warm_seconds = MIN_WARM_SECONDS


def time_calls(warmup, n, f):
    """`n` timed calls (µs) after at least `warmup` calls lasting min_warm_seconds."""
    w0, i = time.perf_counter(), 0
    while i < warmup or time.perf_counter() - w0 < min_warm_seconds:
        f()
        i += 1
    return time_us(f, n, warmup=0)


def bench_sdpa(a):
    shape = (a.batch, a.heads, a.context, a.width // a.heads)
    q, k, v, g = (torch.randn(shape) for _ in range(4))

    def call():
        qq, kk, vv = (t.detach().requires_grad_() for t in (q, k, v))
        F.scaled_dot_product_attention(qq, kk, vv, is_causal=True).backward(g)
    return time_calls(a.warmup, a.steps, call)


def bench_step(a, model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return time_calls(a.warmup, a.steps, step), losses[0], losses[-1]


def bench_remat(a, model, x, y):
    try:
        shim = ctypes.CDLL(None)
        shim.peakshim_peak.restype = ctypes.c_longlong
        shim.peakshim_live.restype = ctypes.c_longlong
    except AttributeError:
        sys.exit("torch_gpt.py: --what remat runs under LD_PRELOAD=libpeakshim.so (bench/peers/peakshim.c)")

    def run(mode):
        model.zero_grad(set_to_none=False)
        model(x, y, mode).backward()

    def measure(mode):
        run(mode)  # allocator and autograd warm; gradients allocated
        base = shim.peakshim_live()
        shim.peakshim_reset()
        run(mode)
        peak = shim.peakshim_peak() - base
        out = {"config": "StoreAll" if mode is None else str(mode), "peak_bytes": peak}
        if mode is not None:
            ratios = []
            for _ in range(a.steps):
                t0 = time.perf_counter()
                run(None)
                t1 = time.perf_counter()
                run(mode)
                ratios.append((time.perf_counter() - t1) / (t1 - t0))
            out["overhead"] = statistics.median(ratios)
            out["overhead_samples"] = ratios
        return out

    base = measure(None)
    configs = [measure("every_block")] + [measure(s) for s in sorted({2, 3, a.layers}) if s <= a.layers]
    lowest = min(configs, key=lambda c: (c["peak_bytes"], c["overhead"]))
    budgets = []
    for f in a.fractions:
        budget = int(f * base["peak_bytes"])
        fits = [c for c in configs if c["peak_bytes"] <= budget]
        budgets.append({"fraction": f, "budget_bytes": budget,
                        "checkpoint": min(fits, key=lambda c: c["overhead"]) if fits else None})
    return {"store_all": base, "configs": configs, "lowest_peak": lowest, "budgets": budgets}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--what", choices=["sdpa", "step", "remat", "all"], default="all")
    for flag, default in (("layers", 6), ("width", 384), ("heads", 6), ("context", 256), ("batch", 8), ("vocab", 65),
                          ("steps", 10), ("warmup", 3), ("threads", 2), ("seed", 0)):
        ap.add_argument(f"--{flag}", type=int, default=default)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--fractions", default="0.25,0.125")
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    a.fractions = [float(f) for f in a.fractions.split(",")]
    if a.quick:
        global min_warm_seconds
        a.layers, a.width, a.heads, a.context, a.batch, a.steps, a.warmup = 2, 64, 2, 32, 2, 2, 1
        min_warm_seconds = MIN_WARM_SECONDS / 10
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    out = {"binary": "torch_gpt.py", "threads": torch.get_num_threads(), "dtype": "f32",
           "library": f"PyTorch {torch.__version__}", "params": vars(a)}
    if a.what in ("sdpa", "all"):
        out["sdpa_fwd_bwd_us"] = {"samples": bench_sdpa(a)}
    model = GPT(a.vocab, a.context, a.layers, a.heads, a.width)
    x = torch.randint(0, a.vocab, (a.batch, a.context))
    y = torch.randint(0, a.vocab, (a.batch, a.context))
    if a.what in ("step", "all"):
        samples, first, last = bench_step(a, model, x, y)
        out.update(step_us={"samples": samples}, loss_first=first, loss_last=last)
    if a.what in ("remat", "all"):
        out["remat"] = bench_remat(a, model, x, y)
    for k in ("sdpa_fwd_bwd_us", "step_us"):
        if k in out:
            out[k]["median"] = statistics.median(out[k]["samples"])
    with open(a.json, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()

"""PyTorch's side of the rematerialization benchmark (bench/workloads/remat.py): the same
ResNet-/VGG-style chains as strata-bench-remat, trained with plain steps (StoreAll) and with
torch.utils.checkpoint.checkpoint_sequential at every segment count; for each budget (a fraction of
PyTorch's own StoreAll step peak) the fastest configuration whose measured peak fits.

PyTorch keeps no CPU memory statistics, so the peak is measured by bench/peers/peakshim.c, a malloc
interposer this script must run under (LD_PRELOAD; the workload builds and sets it): live heap bytes
and their high-water mark, read through ctypes. The step peak is the high-water mark during one step
minus the bytes live before it, the same definition strata-bench-remat uses (gradients included).

    LD_PRELOAD=libpeakshim.so python torch_remat.py --model resnet --threads 2 --json out.json
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
from torch.utils.checkpoint import checkpoint_sequential

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from workloads.train import BasicBlock  # noqa: E402  (the same block as the training-step peer)


def resnet_chain(depth=20, widths=(16, 32, 64), classes=10):
    n = (depth - 2) // 6
    layers = [nn.Conv2d(3, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU()]
    cin = widths[0]
    for s, w in enumerate(widths):
        for b in range(n):
            layers.append(BasicBlock(cin, w, 2 if (s > 0 and b == 0) else 1))
            cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def vgg_chain(config=(64, 64, 0, 128, 128, 0, 256, 256, 0, 512, 0), hidden=512, classes=10):
    layers, cin = [], 3
    for c in config:
        if c == 0:
            layers.append(nn.MaxPool2d(2))
        else:
            layers += [nn.Conv2d(cin, c, 3, 1, 1), nn.BatchNorm2d(c), nn.ReLU()]
            cin = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(cin, hidden), nn.ReLU(), nn.Dropout(0.0),
               nn.Linear(hidden, hidden), nn.ReLU(), nn.Dropout(0.0), nn.Linear(hidden, classes)]
    return nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["resnet", "vgg"], default="resnet")
    ap.add_argument("--batch", type=int, default=0)
    ap.add_argument("--fractions", default=None, help="default 0.5,0.25,0.125 (--quick: 0.5)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    try:
        shim = ctypes.CDLL(None)
        shim.peakshim_peak.restype = ctypes.c_longlong
        shim.peakshim_live.restype = ctypes.c_longlong
    except AttributeError:
        sys.exit("torch_remat.py: run under LD_PRELOAD=libpeakshim.so (bench/peers/peakshim.c)")
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    if a.model == "resnet":
        chain, batch = resnet_chain(8 if a.quick else 20), a.batch or (8 if a.quick else 64)
    else:
        chain = vgg_chain((16, 0, 32, 0), 32) if a.quick else vgg_chain()
        batch = a.batch or (4 if a.quick else 32)
    steps, warmup = (2, 0) if a.quick else (a.steps, a.warmup)
    fractions = [float(f) for f in (a.fractions or ("0.5" if a.quick else "0.5,0.25,0.125")).split(",")]
    x = torch.randn(batch, 3, 32, 32)
    y = torch.randint(0, 10, (batch,))
    opt = torch.optim.SGD(chain.parameters(), lr=0.01)
    n = len(chain)

    def step(segments):
        opt.zero_grad(set_to_none=True)
        inp = x.detach().requires_grad_(segments > 0)  # checkpoint needs an input that requires grad
        out = chain(inp) if segments == 0 else checkpoint_sequential(chain, segments, inp, use_reentrant=False)
        loss = F.cross_entropy(out, y)
        loss.backward()
        opt.step()
        return float(loss.item())

    def measure(segments):
        step(segments)  # allocator and autograd warm
        opt.zero_grad(set_to_none=True)
        base = shim.peakshim_live()
        shim.peakshim_reset()
        step(segments)
        peak = shim.peakshim_peak() - base
        def timed(seg):
            t0 = time.perf_counter()
            step(seg)
            return (time.perf_counter() - t0) * 1e6

        # As strata-bench-remat does: each checkpointed step follows a StoreAll step, and the
        # overhead is the median of the pairs' ratios (the machine's speed drifts between minutes).
        times, base_times = [], []
        for s in range(warmup + steps):
            b = timed(0) if segments else None
            t = timed(segments)
            if s >= warmup:
                times.append(t)
                if segments:
                    base_times.append(b)
        out = {"config": "StoreAll" if segments == 0 else f"checkpoint_sequential({segments})", "segments": segments,
               "peak_bytes": peak, "step_us": {"samples": times, "median": statistics.median(times)}}
        if segments:
            out["store_all_us"] = {"samples": base_times, "median": statistics.median(base_times)}
            out["overhead"] = statistics.median(t / b for t, b in zip(times, base_times))
            out["overhead_of_medians"] = statistics.median(times) / statistics.median(base_times)
        return out

    base = measure(0)
    configs = [measure(s) for s in ([2] if a.quick else range(2, n + 1))]
    budgets = []
    for f in fractions:
        budget = int(f * base["peak_bytes"])
        fits = [c for c in configs if c["peak_bytes"] <= budget]
        best = min(fits, key=lambda c: c["overhead"]) if fits else None
        budgets.append({"fraction": f, "budget_bytes": budget, "checkpoint": best})
    out = {"binary": "torch_remat.py", "threads": torch.get_num_threads(), "dtype": "f32",
           "library": f"PyTorch {torch.__version__}", "model": a.model, "batch": batch, "store_all": base,
           "budgets": budgets, "checkpoint_configs": configs}
    with open(a.json, "w") as fh:
        json.dump(out, fh)


if __name__ == "__main__":
    main()

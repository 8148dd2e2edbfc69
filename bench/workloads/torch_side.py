"""Helpers for the PyTorch peers: timing loops and the metadata every peer run reports."""
import time

_DT = {"torch.float32": "f32", "torch.float64": "f64", "torch.bfloat16": "bf16"}


def meta(dtype="torch.float32"):
    import torch
    return {"threads": torch.get_num_threads(), "dtype": _DT.get(str(dtype), str(dtype)),
            "library": f"PyTorch {torch.__version__}"}


def time_us(fn, reps, warmup=2):
    """Calls fn `warmup` times, then `reps` timed times; returns the per-call times in µs."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    return out

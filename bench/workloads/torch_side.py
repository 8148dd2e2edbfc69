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


def time_warm_us(fn, warmup_s, min_time_s, reps, max_reps, min_warmup_calls=2):
    """The warm timing policy of strata-bench-ops (Note [Warm op timing] in bench/ops_micro.cpp),
    for the PyTorch side: calls fn for at least `warmup_s` seconds (and `min_warmup_calls` calls),
    then times calls until at least `reps` calls and `min_time_s` seconds, at most `max_reps`.
    Returns (first call in µs, timed per-call µs, number of warm-up calls)."""
    def call():
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6

    first = spent = call()
    calls = 1
    while calls < min_warmup_calls or spent < warmup_s * 1e6:
        spent += call()
        calls += 1
    out, timed = [], 0.0
    while len(out) < max_reps and (len(out) < reps or timed < min_time_s * 1e6):
        out.append(call())
        timed += out[-1]
    return first, out, calls

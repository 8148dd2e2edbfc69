"""Op micro-benchmarks: every op-harness case with bench inputs that has a PyTorch peer below, run
by strata-bench-ops (forward, and forward+backward with a ones gradient) and by PyTorch 2.13 on
tensors of the same shapes. Target: every figure within 10 % of PyTorch or faster; the large matmul
at >= 80 % of the measured sgemm limit.

Warm against warm (Note [Warm op timing] in bench/ops_micro.cpp): in every round each side runs in
a fresh process (Strata's binary, PyTorch's `compare.py --peer-worker`), Strata first, then
PyTorch, and within it warms each figure up for >= 0.5 s (at least 2 calls) before timing calls
until >= 10 calls and >= 0.2 s (at most 200); both sides get the same parameters from this file.
The figures pool the timed calls of every round: median and interquartile range. No discarded
warm-up rounds (each round warms itself). A round whose second half of timed forward calls is
more than 10 % faster than its first half is logged (warm-up that was not enough). The first
forward call of each process is the separate cold-start figure ("first forward call in a fresh
process"), counted in no headline: it measures one-time costs (allocation, primitive creation), not the op's speed."""
import math

import torch
import torch.nn.functional as F

from harness.core import Figure, Item, Run, Target, Workload
from harness.stats import median
from workloads.torch_side import meta, time_warm_us


def _tril_dot(feats, self_interaction=False):
    x = feats[0]
    t = torch.stack(feats, dim=1)
    z = torch.bmm(t, t.transpose(1, 2))
    n = t.shape[1]
    off = 1 if self_interaction else 0
    li = torch.tensor([i for i in range(n) for j in range(i + off)])
    lj = torch.tensor([j for i in range(n) for j in range(i + off)])
    return torch.cat([x, z[:, li, lj]], dim=1)


# case -> (function of the input tensors, indices of the inputs that get gradients; None: every
# floating input)
PEERS = {
    "matmul/mat_mat": (lambda a, b: a @ b, [0, 1]),
    "linear/bias": (lambda x, w, b: F.linear(x, w, b), [0, 1, 2]),
    "linear/relu": (lambda x, w, b: F.relu(F.linear(x, w, b)), [0, 1, 2]),
    "bmm/basic": (lambda a, b: torch.bmm(a, b), [0, 1]),
    "conv2d/basic": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [0, 1, 2]),
    "conv2d/first_layer": (lambda x, w, b: F.conv2d(x, w, b, padding=1), [0, 1, 2]),
    "batch_norm/train_4d": (lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b, training=True), [0, 3, 4]),
    "layer_norm/basic": (lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b), [0, 1, 2]),
    "max_pool2d/basic": (lambda x: F.max_pool2d(x, 2), [0]),
    "avg_pool2d/basic": (lambda x: F.avg_pool2d(x, 2), [0]),
    "adaptive_avg_pool2d/global": (lambda x: F.adaptive_avg_pool2d(x, 1), [0]),
    "softmax/2d_dim1": (lambda x: F.softmax(x, 1), [0]),
    "log_softmax/2d_dim1": (lambda x: F.log_softmax(x, 1), [0]),
    "cross_entropy/mean": (lambda x, t, *rest: F.cross_entropy(x, t), [0]),
    "mse_loss/mean": (lambda x, t: F.mse_loss(x, t), [0, 1]),
    "embedding_bag/sum": (lambda w, i, o: F.embedding_bag(i, w, o, mode="sum"), [0]),
    "dot_interaction/basic": (lambda *f: _tril_dot(list(f)), None),
    "relu/basic": (lambda x: F.relu(x), [0]),
    "sigmoid/basic": (lambda x: torch.sigmoid(x), [0]),
    "tanh/basic": (lambda x: torch.tanh(x), [0]),
    "gelu/erf": (lambda x: F.gelu(x), [0]),
    "exp/basic": (lambda x: torch.exp(x), [0]),
    "add/same_shape": (lambda a, b: a + b, [0, 1]),
    "add/broadcast_row": (lambda a, b: a + b, [0, 1]),
    "mul/same_shape": (lambda a, b: a * b, [0, 1]),
    "sum/dim0": (lambda x: x.sum(0), [0]),
    "sum/dim1": (lambda x: x.sum(1), [0]),
    "mean/all": (lambda x: x.mean(), [0]),
    "cat/four_dim1": (lambda *xs: torch.cat(xs, 1), None),
    "index_select/duplicates": (lambda x, i: torch.index_select(x, 0, i), [0]),
    # issue 26 parts 7-8
    "silu/basic": (lambda x: F.silu(x), [0]),
    "embedding/2d_indices_repeated": (lambda w, i: F.embedding(i, w), [0]),
    "scaled_dot_product_attention/basic": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [0, 1, 2]),
    # issue 26 part 4: element-wise math (inputs in each op's domain, as the harness cases draw them)
    "abs/basic": (lambda x: torch.abs(x), [0]),
    "sin/basic": (lambda x: torch.sin(x), [0]),
    "cos/basic": (lambda x: torch.cos(x), [0]),
    "tan/basic": (lambda x: torch.tan(x), [0]),
    "asin/basic": (lambda x: torch.asin(x), [0]),
    "acos/basic": (lambda x: torch.acos(x), [0]),
    "atan/basic": (lambda x: torch.atan(x), [0]),
    "atan2/same_shape": (lambda a, b: torch.atan2(a, b), [0, 1]),
    "sinh/basic": (lambda x: torch.sinh(x), [0]),
    "cosh/basic": (lambda x: torch.cosh(x), [0]),
    "expm1/basic": (lambda x: torch.expm1(x), [0]),
    "log1p/basic": (lambda x: torch.log1p(x), [0]),
    "rsqrt/basic": (lambda x: torch.rsqrt(x), [0]),
    "erf/basic": (lambda x: torch.erf(x), [0]),
    "square/basic": (lambda x: torch.square(x), [0]),
    "reciprocal/positive": (lambda x: torch.reciprocal(x), [0]),
    "floor/basic": (lambda x: torch.floor(x), [0]),
    "ceil/basic": (lambda x: torch.ceil(x), [0]),
    "trunc/basic": (lambda x: torch.trunc(x), [0]),
    "round/basic": (lambda x: torch.round(x), [0]),
    "sign/basic": (lambda x: torch.sign(x), [0]),
    # issue 26 parts 1 and 4: reductions, sort/topk, cumsum (backward through the values only)
    "max/dim1": (lambda x: torch.max(x, 1).values, [0]),
    "argmax/dim1": (lambda x: torch.argmax(x, 1), []),
    "argmin/dim0_keepdim": (lambda x: torch.argmin(x, 0, keepdim=True), []),
    "topk/largest_last_dim": (lambda x: torch.topk(x, 3).values, [0]),
    "sort/ascending": (lambda x: torch.sort(x).values, [0]),
    "amax/dim1": (lambda x: torch.amax(x, 1), [0]),
    "var/dim1_keepdim": (lambda x: torch.var(x, 1, correction=1, keepdim=True), [0]),
    "std/all": (lambda x: torch.std(x), [0]),
    "norm/p2_dim1_keepdim": (lambda x: torch.norm(x, 2, 1, keepdim=True), [0]),
    "logsumexp/dim1": (lambda x: torch.logsumexp(x, 1), [0]),
    "cumsum/dim-1": (lambda x: torch.cumsum(x, -1), [0]),
    # issue 26 part 2: indexing and the masked / scatter / index ops
    "index/adjacent_broadcast": (lambda x, i, j: x[:, i, j], [0]),
    "index_put/accumulate_duplicates": (lambda x, i, v: x.index_put((i,), v, accumulate=True), [0, 2]),
    "masked_fill/broadcast_mask": (lambda x, m: x.masked_fill(m, 0.5), [0]),
    "masked_select/broadcast_input": (lambda x, m: torch.masked_select(x, m), [0]),
    "nonzero/with_zeros": (lambda x: torch.nonzero(x), []),
    "index_add/dim1_alpha_duplicates": (lambda x, i, s: torch.index_add(x, 1, i, s, alpha=2.0), [0, 2]),
    "take_along_dim/broadcast": (lambda x, i: torch.take_along_dim(x, i, 1), [0]),
    "gather/dim0": (lambda x, i: torch.gather(x, 0, i), [0]),
    "scatter/value_dim1": (lambda x, i: torch.scatter(x, 1, i, 1.5), [0]),
    "scatter_add/dim0_duplicates": (lambda x, i, s: torch.scatter_add(x, 0, i, s), [0, 2]),
}

# Integer inputs: case -> {input position: exclusive upper bound of its values}, the bounds the
# harness case's bench_inputs draw from (tests/cpp/ops/cases/cases_indexing.cpp).
INDEX_BOUNDS = {
    "index/adjacent_broadcast": {1: 512, 2: 64},
    "index_put/accumulate_duplicates": {1: 4096},
    "index_add/dim1_alpha_duplicates": {1: 4096},
    "take_along_dim/broadcast": {1: 4096},
    "scatter/value_dim1": {1: 4096},
    "scatter_add/dim0_duplicates": {1: 256},
}
# Floating inputs drawn uniformly in [lo, hi) instead of normally (the case's bench input domain).
UNIFORM = {"tan/basic": (-1.2, 1.2), "asin/basic": (-0.9, 0.9), "acos/basic": (-0.9, 0.9), "atan/basic": (-4, 4),
           "sin/basic": (-3, 3), "cos/basic": (-3, 3), "sinh/basic": (-2, 2), "cosh/basic": (-2, 2),
           "expm1/basic": (-2, 2), "log1p/basic": (-0.5, 2), "rsqrt/basic": (0.5, 3), "erf/basic": (-2.5, 2.5),
           "square/basic": (-2, 2), "reciprocal/positive": (0.5, 2), "floor/basic": (-3, 3), "ceil/basic": (-3, 3),
           "trunc/basic": (-3, 3), "round/basic": (-3, 3), "sign/basic": (-1, 1), "logsumexp/dim1": (-3, 3)}

_TORCH_DT = {"f32": torch.float32, "f64": torch.float64}


def make_inputs(case, specs):
    """Random PyTorch tensors with the shapes and dtypes strata-bench-ops reported for `case`."""
    g = torch.Generator().manual_seed(42)
    out = []
    for k, s in enumerate(specs):
        if s is None:
            out.append(None)
            continue
        shape, dt = s["shape"], s["dtype"]
        if dt in ("i64", "i32"):
            if case == "embedding_bag/sum" and k == 2:  # offsets: bag starts, 20 indices per bag
                out.append(torch.arange(shape[0], dtype=torch.int64) * 20)
            elif case == "embedding_bag/sum":
                out.append(torch.randint(0, specs[0]["shape"][0], shape, generator=g))
            elif case == "cross_entropy/mean":
                out.append(torch.randint(0, specs[0]["shape"][1], shape, generator=g))
            elif case in ("index_select/duplicates", "embedding/2d_indices_repeated", "gather/dim0"):
                out.append(torch.randint(0, specs[0]["shape"][0], shape, generator=g))
            elif k in INDEX_BOUNDS.get(case, {}):
                out.append(torch.randint(0, INDEX_BOUNDS[case][k], shape, generator=g))
            else:
                out.append(torch.randint(0, 2, shape, generator=g))
        elif dt == "bool":  # masks: half set, as gt(randn, 0) draws them
            out.append(torch.randn(shape, generator=g) > 0)
        else:
            if dt not in _TORCH_DT:
                raise ValueError(f"{case}: input {k} has dtype {dt}, which the PyTorch peer does not handle")
            t = torch.randn(shape, generator=g, dtype=_TORCH_DT[dt])
            if case in UNIFORM:
                lo, hi = UNIFORM[case]
                t = torch.rand(shape, generator=g, dtype=_TORCH_DT[dt]) * (hi - lo) + lo
            if case == "batch_norm/train_4d" and k == 2:
                t = t.abs() + 0.5  # running variance
            if case == "nonzero/with_zeros":
                t = t.clamp_min(0)  # relu(randn): half zeros
            out.append(t)
    return out


def forward_flops(case, specs):
    """FLOPs of the forward pass for the GEMM-like cases (2 per multiply-add), else None."""
    sh = [s["shape"] if s else None for s in specs]
    op = case.split("/")[0]
    if op == "matmul" and len(sh[0]) == 2:
        return 2.0 * sh[0][0] * sh[0][1] * sh[1][1]
    if op == "linear":
        return 2.0 * math.prod(sh[0][:-1]) * sh[0][-1] * sh[1][0]
    if op == "bmm":
        return 2.0 * sh[0][0] * sh[0][1] * sh[0][2] * sh[1][2]
    if op == "conv2d":  # the peers use stride 1, padding 1
        n, c, h, w = sh[0]
        o, cg, kh, kw = sh[1]
        return 2.0 * n * o * (h + 2 - kh + 1) * (w + 2 - kw + 1) * cg * kh * kw
    return None


# The warm timing policy of both sides (Note [Warm op timing] in bench/ops_micro.cpp).
POLICY = {"warmup_s": 0.5, "min_time_s": 0.2, "reps": 10, "max_reps": 200}
QUICK_POLICY = {"warmup_s": 0.0, "min_time_s": 0.0, "reps": 2, "max_reps": 2}


def _policy(ctx):
    return QUICK_POLICY if ctx.quick else POLICY


def _check_warm(ctx, side, case, samples):
    """Logs a round whose second half of timed calls is > 10 % faster than its first half."""
    n = len(samples) // 2
    if n >= 5:
        first, second = median(samples[:n]), median(samples[n:])
        if second < 0.9 * first:
            ctx.log(f"  {case}: {side} still warming up while timed (median {first:.1f} -> {second:.1f} µs)")


def _strata_run(case):
    def run(ctx):
        p = _policy(ctx)
        args = ["--filter", "=" + case, "--threads", ctx.threads, "--warmup-s", p["warmup_s"],
                "--min-time-s", p["min_time_s"], "--reps", p["reps"], "--max-reps", p["max_reps"]]
        data = ctx.run_json("strata-bench-ops", args, tag=case.replace("/", "_"))
        rows = data["cases"]
        if len(rows) != 1 or rows[0]["case"] != case:
            raise RuntimeError(f"strata-bench-ops --filter ={case} returned {[r['case'] for r in rows]}")
        row = rows[0]
        dtypes = {s["dtype"] for s in row["inputs"] if s and s["dtype"] in ("f32", "f64", "bf16")}
        m = {"threads": data["threads"], "dtype": "/".join(sorted(dtypes)), "library": data.get("library", "")}
        samples = {"fwd": row["fwd_us"]["samples"], "fwd_first": [row["fwd_us"]["first"]]}
        _check_warm(ctx, "Strata", case, samples["fwd"])
        if row.get("fwd_bwd_us"):
            samples["fwd_bwd"] = row["fwd_bwd_us"]["samples"]
        fl = forward_flops(case, row["inputs"])
        work = {"fwd": fl, "fwd_bwd": 3 * fl} if fl else {}
        ctx.shared["inputs:" + case] = row["inputs"]
        return Run(m, samples, work)
    return run


def _peer_run(case):
    def run(ctx):
        specs = ctx.shared["inputs:" + case]  # the shapes the Strata side just reported
        fn, grads = PEERS[case]
        inputs = make_inputs(case, specs)
        if grads is None:
            grads = [k for k, t in enumerate(inputs) if t is not None and t.is_floating_point()]
        dtypes = {str(t.dtype) for t in inputs if t is not None and t.is_floating_point()}
        m = meta()
        m["dtype"] = "/".join(sorted(meta(d)["dtype"] for d in dtypes))
        p = _policy(ctx)

        def fwd():
            with torch.no_grad():
                fn(*inputs)

        first, timed, _ = time_warm_us(fwd, **p)
        samples = {"fwd": timed, "fwd_first": [first]}
        _check_warm(ctx, "PyTorch", case, timed)
        if grads:
            leaves = [t.detach().requires_grad_(True) if k in grads else t for k, t in enumerate(inputs)]
            ones = torch.ones_like(fn(*leaves))

            def both():
                y = fn(*leaves)
                y.backward(ones)
                for k in grads:
                    leaves[k].grad = None

            samples["fwd_bwd"] = time_warm_us(both, **p)[1]
        return Run(m, samples)
    return run


# Figures with work are compared with the sgemm limit; the 1024^3 matmul must reach 80 % of it.
# The other cases have no machine limit that applies: their tensors live in the last-level cache
# across repetitions (the embedding bag's 40960 looked-up rows are 10 MiB of a 256 MiB table, so
# after the first repetition they are L3 hits, not DRAM gathers; the DLRM issue measures gathers
# from DRAM against the gather limits).
_TARGET = Target("ratio <= 1.10", max_ratio=1.10)
_LARGE = Target("ratio <= 1.10, >= 0.80 of sgemm", max_ratio=1.10, min_fraction=0.80)
QUICK_CASES = ["matmul/mat_mat", "relu/basic", "softmax/2d_dim1"]


def items(ctx):
    out = []
    for case in QUICK_CASES if ctx.quick else list(PEERS):
        gemm = case.split("/")[0] in ("matmul", "linear", "bmm", "conv2d")
        figs = [Figure("fwd", "forward", limit="sgemm" if gemm else None,
                       target=_LARGE if case == "matmul/mat_mat" else _TARGET)]
        if PEERS[case][1] != []:
            figs.append(Figure("fwd_bwd", "forward+backward", limit="sgemm" if gemm else None, target=_TARGET))
        figs.append(Figure("fwd_first", "first forward call in a fresh process (cold start)", headline=False))
        out.append(Item(case, figs, strata=_strata_run(case), peer=_peer_run(case)))
    return out


WORKLOAD = Workload(
    name="ops",
    title="Op micro-benchmarks vs PyTorch",
    peer_name="PyTorch",
    slow_tier="not involved (every tensor fits the fast tier)",
    items=items,
    describe=__doc__,
    warmup=0,
    spread="iqr",
)

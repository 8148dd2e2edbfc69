"""Op micro-benchmarks side by side: Strata (strata-bench-ops) and PyTorch 2.13 CPU on the same
shapes, same thread count, interleaved A B A B. A first version of the comparison the benchmark
harness issue generalizes (bench/compare.py); it covers the op cases listed in PEERS below.

    python bench/ops_vs_torch.py [--bin build/release/bench/strata-bench-ops] [--threads 2]
                                 [--rounds 3] [--reps 10] [--cases relu/basic,linear/relu]

Prints a markdown table: per case the median forward and forward+backward time of each side
(median over rounds of each round's median), and the ratio Strata/PyTorch (< 1 is faster).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F


def _tril_dot(feats, self_interaction=False):
    x = feats[0]
    t = torch.stack(feats, dim=1)
    z = torch.bmm(t, t.transpose(1, 2))
    n = t.shape[1]
    off = 1 if self_interaction else 0
    li = torch.tensor([i for i in range(n) for j in range(i + off)])
    lj = torch.tensor([j for i in range(n) for j in range(i + off)])
    return torch.cat([x, z[:, li, lj]], dim=1)


# case -> (function of the input tensors, indices of the inputs that get gradients)
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
}


def make_inputs(case, specs):
    g = torch.Generator().manual_seed(42)
    out = []
    for k, s in enumerate(specs):
        if s is None:
            out.append(None)
            continue
        shape, dt = s["shape"], s["dtype"]
        if dt in ("i64", "i32"):
            hi = {"embedding_bag/sum": 1000000}.get(case, 2)
            if case == "embedding_bag/sum" and k == 2:  # offsets: bag starts
                out.append(torch.arange(shape[0], dtype=torch.int64) * 20)
            elif case == "cross_entropy/mean":
                out.append(torch.randint(0, 1000, shape, generator=g))
            elif case == "index_select/duplicates":
                out.append(torch.randint(0, specs[0]["shape"][0], shape, generator=g))
            else:
                out.append(torch.randint(0, hi, shape, generator=g))
        else:
            t = torch.randn(shape, generator=g)
            if case == "batch_norm/train_4d" and k == 2:
                t = t.abs() + 0.5  # running variance
            out.append(t)
    return out


def time_torch(case, specs, reps):
    fn, grads = PEERS[case]
    inputs = make_inputs(case, specs)
    if grads is None:
        grads = [k for k, t in enumerate(inputs) if t is not None and t.is_floating_point()]

    def fwd():
        with torch.no_grad():
            fn(*inputs)

    leaves = [t.detach().requires_grad_(True) if k in grads else t for k, t in enumerate(inputs)]
    probe = fn(*leaves)
    ones = torch.ones_like(probe)

    def both():
        y = fn(*leaves)
        y.backward(ones)
        for k in grads:
            leaves[k].grad = None

    def med(f):
        f(); f()
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            f()
            ts.append((time.perf_counter() - t0) * 1e6)
        return statistics.median(ts)

    return med(fwd), med(both)


def time_strata(binary, case, reps, threads):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "--filter", "=" + case, "--reps", str(reps), "--threads", str(threads), "--json", f.name],
                       check=True, stdout=subprocess.DEVNULL)
        with open(f.name) as jf:
            data = json.load(jf)
    # {"binary", "threads", "dtype", "library", "reps", "cases": [...]} (a bare list before the
    # benchmark harness issue).
    rows = data["cases"] if isinstance(data, dict) else data
    if len(rows) != 1 or rows[0]["case"] != case:
        sys.exit(f"ops_vs_torch: {binary} --filter ={case} returned {[r['case'] for r in rows]}")
    return rows[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/release/bench/strata-bench-ops")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--cases", default=",".join(PEERS))
    args = ap.parse_args()
    if not os.path.exists(args.bin):
        sys.exit(f"ops_vs_torch: {args.bin} not found; build it with bash scripts/build.sh build/release")
    torch.set_num_threads(args.threads)
    cases = [c for c in args.cases.split(",") if c]
    for c in cases:
        if c not in PEERS:
            sys.exit(f"ops_vs_torch: no PyTorch peer for case '{c}'; known: {', '.join(PEERS)}")
    print(f"Strata vs PyTorch {torch.__version__}, {args.threads} threads, {args.rounds} interleaved rounds x "
          f"{args.reps} reps; times in µs (median of round medians); ratio = Strata/PyTorch\n")
    print("| case | Strata fwd | PyTorch fwd | ratio | Strata fwd+bwd | PyTorch fwd+bwd | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for c in cases:
        sf, sb, pf, pb = [], [], [], []
        for _ in range(args.rounds):
            row = time_strata(args.bin, c, args.reps, args.threads)
            sf.append(row["fwd_us"]["median"])
            sb.append(row["fwd_bwd_us"]["median"] if row["fwd_bwd_us"] else float("nan"))
            f, b = time_torch(c, row["inputs"], args.reps)
            pf.append(f)
            pb.append(b)
        m = statistics.median
        print(f"| {c} | {m(sf):.0f} | {m(pf):.0f} | {m(sf) / m(pf):.2f} | {m(sb):.0f} | {m(pb):.0f} | {m(sb) / m(pb):.2f} |",
              flush=True)


if __name__ == "__main__":
    main()

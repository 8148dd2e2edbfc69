"""Machine limits (strata-limits) beside an independent measurement by PyTorch 2.13 of the same
quantities at the same sizes and thread count: sgemm GFLOP/s at a large square size, STREAM copy and
triad bandwidth, and random row-gather bandwidth for 64/256/1024-byte rows from a table far larger
than the last-level cache. Targets: sgemm and STREAM within 20 % of PyTorch's figure; gathers not
below 0.8x of PyTorch's index_select. The Strata side's first round is the measurement compare.py
makes once per run and thread count, whose best repetitions are the denominators of every
workload's fractions; later rounds run strata-limits again. This table compares medians over three
interleaved rounds (the machine's speed drifts by 20 % and
more over minutes, so one round of each side is no comparison)."""
import torch

from harness.core import Figure, Item, Run, Target, Workload, run_limits
from workloads.torch_side import meta, time_us

NAMES = ["sgemm", "stream_copy", "stream_triad", "gather_64", "gather_256", "gather_1024"]
UNITS = {"sgemm": "GFLOP/s"}
AGREE = Target("0.8 <= ratio <= 1.2", min_ratio=0.8, max_ratio=1.2)
# index_select is not a bandwidth kernel (PyTorch's reaches a fraction of DRAM's random-access rate
# for 64-byte rows), so for gathers the check is one-sided: the limit must not fall below what an
# independent kernel achieves.
NOT_BELOW = Target("ratio >= 0.8", min_ratio=0.8)


def _strata(ctx):
    # The first round reuses the limits ctx measured for this run (the denominators of every
    # fraction); later rounds measure again, so both sides sample the machine's drift alike.
    first = "limits" not in ctx.shared
    lim = ctx.limits() if first else run_limits(ctx, ctx.threads)
    recs = {name: rec for name, (_, rec) in lim.items()}
    ctx.shared["limits"] = recs
    m = {"threads": ctx.threads, "dtype": "f32"}
    return Run(m, {n: recs[n]["samples"] for n in NAMES if n in recs})


def _rate_samples(fn, work, reps, warmup=1):
    """Per-call rates in units of 1e9 work per second."""
    return [work / (t * 1e-6) / 1e9 for t in time_us(fn, reps, warmup)]


def _peer(ctx):
    s = {}
    recs = ctx.shared["limits"]  # what strata-limits measured, for the same sizes
    # As many timed repetitions as strata-limits made, after one warm-up, as it does.
    reps = len(recs["sgemm"]["samples"])
    p = recs["sgemm"]["params"]
    n = int(p["n"])
    if int(p["m"]) != n or int(p["k"]) != n:
        raise ValueError(f"strata-limits sgemm is not square: {p}")
    a, b, c = torch.randn(n, n), torch.randn(n, n), torch.empty(n, n)
    s["sgemm"] = _rate_samples(lambda: torch.mm(a, b, out=c), 2.0 * n ** 3, reps)
    del a, b, c
    e = int(recs["stream_copy"]["params"]["elements"])
    x, y, z = torch.ones(e), torch.ones(e), torch.empty(e)
    s["stream_copy"] = _rate_samples(lambda: z.copy_(x), 2.0 * 4 * e, reps)
    s["stream_triad"] = _rate_samples(lambda: torch.add(x, y, alpha=3.0, out=z), 3.0 * 4 * e, reps)
    del x, y, z
    for name in ("gather_64", "gather_256", "gather_1024"):
        gp = recs[name]["params"]
        row, nrows = int(gp["row_bytes"]), int(gp["table_rows"])
        table = torch.empty(nrows, row // 4).fill_(1.0)
        # Same rows per repetition as Strata; each index_select call gathers what Strata's threads
        # gather into their output buffers at once.
        batch = int(gp["output_rows_per_thread"]) * ctx.threads
        calls = max(1, int(gp["rows_per_rep"]) // batch)
        idx = [torch.randint(0, nrows, (batch,)) for _ in range(calls)]
        out = torch.empty(batch, row // 4)

        def gather():
            for i in idx:
                torch.index_select(table, 0, i, out=out)

        s[name] = _rate_samples(gather, float(row) * batch * calls, reps)
        del table, idx
    return Run(meta(), s)


def items(ctx):
    figs = [Figure(n, n, kind="rate", unit=UNITS.get(n, "GB/s"), limit=n,
                   target=NOT_BELOW if n.startswith("gather") else AGREE) for n in NAMES]
    return [Item("limits", figs, strata=_strata, peer=_peer)]


WORKLOAD = Workload(
    name="limits",
    title="Machine limits vs an independent PyTorch measurement",
    peer_name="PyTorch",
    slow_tier="not involved",
    items=items,
    describe=__doc__,
    rounds=3,
    warmup=0,
)

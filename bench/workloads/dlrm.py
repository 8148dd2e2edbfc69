"""DLRM training steps: `strata-dlrm` against a PyTorch 2.13 DLRM built per REFERENCE.md §1
(bench/workloads/torch_dlrm.py: EmbeddingBag(mode="sum", sparse=True) tables, plain SGD), at batch
2048 and the same thread count, tables in DRAM on both sides (Strata's fast budget covers them,
slow-tier model off). Both sides draw batches by the reference's `random` rules.

Items:
 - random-bench: the reference's bench/dlrm_s_benchmark.sh architecture (8 tables × 1,000,000 rows,
   d = 64, bottom 512-512-64, top 1024-1024-1024-1, bags of 1..100, MSE). Target: >= 1.5× PyTorch.
 - kaggle: the Criteo Kaggle architecture (26 tables with the Kaggle row counts, 33.76M rows in
   all, d = 16, bottom 13-512-256-64-16, top 512-256-1, one index per table and sample, BCE).
   Target: >= 3× PyTorch.
Figure: median time per training step (forward, loss, backward, optimizer). Strata's per-step
times come from its --json (the first two steps of a round are discarded as warm-up); the peer
runs two untimed steps, then the timed ones, on two pre-drawn batches. Strata's architecture, row
counts, loss and learning rate are read back from its JSON so the peer builds the same model."""
import numpy as np

from harness.core import Figure, Item, Run, Target, Workload
from workloads.torch_side import meta, time_us

BATCH = 2048
QUICK_BATCH = 256  # --quick: a smoke test of the pipeline, not a figure


def _batch(ctx):
    return QUICK_BATCH if ctx.quick else BATCH


ITEMS = {
    # name: (strata-dlrm preset, steps timed per round, target speed-up over PyTorch)
    "random-bench": ("random-bench", 6, 1.5),
    "kaggle": ("kaggle", 6, 3.0),
}
WARM = 2


def _strata(name):
    preset, steps, _ = ITEMS[name]

    def run(ctx):
        args = ["--preset", preset, "--mini-batch-size", _batch(ctx), "--num-batches", steps + WARM,
                "--fast-budget", "16G", "--slow-tier-model", "off", "--threads", ctx.threads,
                "--print-freq", steps + WARM]
        if ctx.quick:
            args += ["--scale-rows", 0.01]
        d = ctx.run_json("strata-dlrm", args, tag=name)
        if d.get("slow_tier") != "none":
            raise RuntimeError(f"strata-dlrm {name}: a table left DRAM (slow tier {d.get('slow_tier')})")
        ctx.shared[f"dlrm:{name}"] = {k: d[k] for k in ("rows", "sparse_feature_size", "mlp_bot", "mlp_top",
                                                       "loss_function", "learning_rate", "lookups", "lookups_fixed")}
        step_us = [1e3 * ms for ms in d["step_ms"]["samples"][WARM:]]
        return Run({"threads": d["threads"], "dtype": d["dtype"], "library": d["library"]}, {"step": step_us})

    return run


def _peer(name):
    _, steps, _ = ITEMS[name]

    def run(ctx):
        from workloads.torch_dlrm import TorchDLRM, random_batch, torch_step_fn
        a = ctx.shared[f"dlrm:{name}"]
        model = TorchDLRM(a["rows"], a["sparse_feature_size"], a["mlp_bot"], a["mlp_top"])
        rng = np.random.default_rng(727)
        fns = [torch_step_fn(model, random_batch(rng, _batch(ctx), a["rows"], a["mlp_bot"][0], a["lookups"],
                                                 a["lookups_fixed"]),
                             lr=a["learning_rate"], loss=a["loss_function"])
               for _ in range(2)]
        k = [0]

        def step():
            fns[k[0] % 2]()
            k[0] += 1

        return Run(meta(), {"step": time_us(step, steps, WARM)})

    return run


def items(ctx):
    out = []
    for name, (_, _, speedup) in ITEMS.items():
        out.append(Item(f"{name}, batch {_batch(ctx)}",
                        [Figure("step", "training step",
                                target=Target(f">= {speedup:g}x PyTorch's samples/s", max_ratio=1.0 / speedup))],
                        strata=_strata(name), peer=_peer(name)))
    return out


WORKLOAD = Workload(
    name="dlrm",
    title="DLRM training step vs a PyTorch DLRM (EmbeddingBag sparse=True + SGD), batch 2048",
    peer_name="PyTorch",
    slow_tier="not involved (every table in DRAM on both sides)",
    items=items,
    describe=__doc__,
)

"""The zoo's GPT (issue 26 part 8) against PyTorch 2.13: nanoGPT's "baby" model (6 layers, width 384,
6 heads, context 256, vocabulary 65, batch 8, dropout 0), f32, at the same thread count. Strata's side
is strata-bench-gpt (C++), PyTorch's bench/peers/torch_gpt.py (a nanoGPT-style model with
F.scaled_dot_product_attention(is_causal=True)), each round in a fresh process, both warmed before
timing.

- sdpa: causal scaled_dot_product_attention forward + backward on [8, 6, 256, 64]. Target >= 1.0x.
- step: one training step (zero_grad, forward, cross-entropy, backward, SGD). Target >= 1.0x.
- remat: the step under a fast-memory budget, f = 25 % and 12.5 % of each side's own StoreAll
  activation peak (gradients allocated before the step): Strata's Auto planner (per op over the
  blocks, the final norm and the head; each block's MLP in 4 row chunks, Note [Feed-forward in row
  chunks], while the StoreAll reference, its peak and its step time, is the model as PyTorch has it)
  against PyTorch's fastest torch.utils.checkpoint
  configuration (every block checkpointed, or checkpoint_sequential with 2, 3 or 6 segments) whose
  measured peak fits — when none fits, the configuration with PyTorch's lowest peak (which then
  holds more than the budget; the log says so). Figures are overheads, step time over the StoreAll
  step run just before it; a fraction where no Auto plan fits is logged, not compared. Target: Strata's overhead lower (ratio < 1); the issue's absolute targets
  (<= 1.15x at 25 %, <= 1.30x at 12.5 %, measured peak within the budget, bitwise gradients) are
  read off the Strata column and the log, which also names PyTorch's lowest reachable peak."""
import json
import math
import os
import subprocess
import sys

from harness.core import Figure, Item, Run, Target, Workload
from workloads.remat import _shim

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(os.path.dirname(HERE), "peers", "torch_gpt.py")
FRACTIONS = [0.25, 0.125]


def _fractions(ctx):
    return [0.9] if ctx.quick else FRACTIONS  # the quick model's floor is above 25 %


def _key(f):
    return f"auto_{int(round(f * 1000))}"


def _args(ctx, what, steps, warmup):
    return ["--what", what, "--threads", ctx.threads, "--steps", steps, "--warmup", warmup,
            "--fractions", ",".join(str(f) for f in _fractions(ctx))] + (["--quick"] if ctx.quick else [])


def _meta(d):
    return {"threads": d["threads"], "dtype": d["dtype"], "library": d["library"]}


# Strata's remat side runs the MLP in row chunks (the reference StoreAll stays unchunked).
REMAT_FFN_CHUNKS = 4


def _strata(what, steps, warmup):
    def run(ctx):
        extra = ["--ffn-chunks", REMAT_FFN_CHUNKS] if what == "remat" else []
        d = ctx.run_json("strata-bench-gpt", _args(ctx, what, steps, warmup) + extra, tag=what)
        if what == "sdpa":
            return Run(_meta(d), {"fwd_bwd": d["sdpa_fwd_bwd_us"]["samples"]})
        if what == "step":
            return Run(_meta(d), {"step": d["step_us"]["samples"]})
        samples = {}
        for b in d["remat"]["budgets"]:
            samples[_key(b["fraction"])] = [b["overhead"]["median"] if b["feasible"] else math.inf]
            if b["feasible"]:
                ctx.log(f"  Strata Auto at {100 * b['fraction']:g} %: budget {b['budget_bytes']} B, measured "
                        f"{b['measured_bytes']} B (predicted {b['predicted_bytes']} B), gradients "
                        f"{'bitwise equal to StoreAll' if b['bitwise'] else 'DIFFERENT from StoreAll'}, "
                        f"overhead {b['overhead']['median']:.3f}x")
            else:
                ctx.log(f"  Strata Auto at {100 * b['fraction']:g} %: infeasible: {b['error']}")
        return Run(_meta(d), samples)
    return run


def _peer(what, steps, warmup):
    def run(ctx):
        out = os.path.join(ctx.scratch, f"torch-gpt-{what}.json")
        cmd = [sys.executable, PEER, *map(str, _args(ctx, what, steps, warmup)), "--json", out]
        env = dict(os.environ, LD_PRELOAD=_shim(ctx)) if what == "remat" else None
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
        with open(out) as fh:
            d = json.load(fh)
        if what == "sdpa":
            return Run(_meta(d), {"fwd_bwd": d["sdpa_fwd_bwd_us"]["samples"]})
        if what == "step":
            return Run(_meta(d), {"step": d["step_us"]["samples"]})
        r = d["remat"]
        low = r["lowest_peak"]
        ctx.log(f"  PyTorch: StoreAll peak {r['store_all']['peak_bytes']} B; lowest checkpointing peak "
                f"{low['peak_bytes']} B ({100 * low['peak_bytes'] / r['store_all']['peak_bytes']:.1f} %, "
                f"{low['config']}, overhead {low['overhead']:.3f}x)")
        samples = {}
        for b in r["budgets"]:
            # The fastest configuration that fits; when none does, the one with the lowest peak
            # (it then holds more memory than the budget: the figure's label and the log say so).
            c = b["checkpoint"] or low
            if not b["checkpoint"]:
                ctx.log(f"  PyTorch at {100 * b['fraction']:g} %: no checkpointing configuration fits; compared "
                        f"with its lowest-peak one ({low['config']})")
            samples[_key(b["fraction"])] = [c["overhead"]]
        return Run(_meta(d), samples)
    return run


def items(ctx):
    steps, warmup = (2, 1) if ctx.quick else (10, 3)
    target = Target("ratio <= 1.0 (>= 1.0x speed)", max_ratio=1.0)
    out = [
        Item("sdpa", [Figure("fwd_bwd", "causal SDPA forward + backward [8, 6, 256, 64]", target=target)],
             strata=_strata("sdpa", steps, warmup), peer=_peer("sdpa", steps, warmup)),
        Item("step", [Figure("step", "GPT training step (6 x 384, context 256, batch 8)", target=target)],
             strata=_strata("step", steps if not ctx.quick else 2, warmup), peer=_peer("step", steps, warmup)),
    ]
    out.append(_remat_item(ctx))
    return [i for i in out if i is not None]


def _remat_item(ctx):
    """A probe run of Strata's side (discarded) finds the fractions at which an Auto plan fits; only
    those become figures, the others are logged (as the remat workload does)."""
    steps = 2
    # The probe runs once, in the main process; peer workers (which build the items again) get its
    # result through ctx.shared.
    if "gpt_remat_fractions" not in ctx.shared:
        s_probe = _strata("remat", 1, 0)(ctx)
        ctx.shared["gpt_remat_fractions"] = [f for f in _fractions(ctx) if math.isfinite(s_probe.samples[_key(f)][0])]
        for f in _fractions(ctx):
            if f not in ctx.shared["gpt_remat_fractions"]:
                ctx.log(f"  remat at {100 * f:g} % of StoreAll's peak: no Auto plan fits; not compared")
    figs = []
    for f in ctx.shared["gpt_remat_fractions"]:
        figs.append(Figure(_key(f), f"overhead at {100 * f:g} % of StoreAll's peak (Auto vs PyTorch's best "
                           "checkpointing that fits, else its lowest-peak one)",
                           unit="x StoreAll", target=Target("ratio < 1 (lower overhead)", max_ratio=1.0)))
    if not figs:
        return None
    return Item("remat", figs, strata=_strata("remat", steps, 1), peer=_peer("remat", steps, 1))


WORKLOAD = Workload(
    name="gpt",
    title="GPT (6 x 384, context 256): fused attention, training step, Auto under a memory budget",
    peer_name="PyTorch",
    slow_tier="Auto may stream or place values in the slow heap (DRAM-backed file mapping; the slow-tier model as "
              "configured)",
    items=items,
    describe=__doc__,
    rounds=3,
)

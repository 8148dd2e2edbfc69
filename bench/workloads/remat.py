"""Rematerialization under a fast-memory budget: ResNet- and VGG-style chains (CIFAR ResNet-20 at
batch 64; VGG-style with batch norm, 64,64,M,128,128,M,256,256,M,512,M at 32x32, batch 32), one
training step (zero_grad, forward, cross-entropy, backward, SGD). Each side measures its own
StoreAll step peak (fast-tier bytes for Strata, heap bytes through a malloc interposer for PyTorch:
bench/peers/peakshim.c) and, per budget (50 %, 25 %, 12.5 % of that peak), the fastest configuration
whose measured peak fits: Strata's checkpoint policies (EveryK, SqrtN, Revolve), tape streaming and
the Auto planner (strata-bench-remat), PyTorch 2.13's checkpoint_sequential at every segment count
(bench/peers/torch_remat.py). Figures are overheads, step time at the budget / StoreAll step time of
the same side and round, as the median over the timed steps of each step's ratio to the StoreAll step
run just before it (inf when nothing fits): `ckpt` compares checkpointing with checkpointing,
`best` Strata's best (checkpointing, streaming, or the Auto planner) with PyTorch's checkpointing. Target: Strata's
overhead lower (ratio < 1). The issue's absolute targets (overhead <= 10 % at 50 %, <= 20 % at 25 %)
are read off the Strata column."""
import json
import math
import os
import subprocess
import sys

from harness.core import Figure, Item, Run, Target, Workload

HERE = os.path.dirname(os.path.abspath(__file__))
PEERS = os.path.join(os.path.dirname(HERE), "peers")
FRACTIONS = [0.5, 0.25, 0.125]


def _overhead(best, base):
    """Step time over StoreAll's: each side's own estimate against the StoreAll steps it
    interleaved with the configuration ("overhead": the median of the per-pair ratios, the same
    estimator in strata-bench-remat and torch_remat.py), else the ratio of the medians."""
    if not best:
        return math.inf
    if "overhead" in best:
        return best["overhead"]
    return best["step_us"]["median"] / base["step_us"]["median"]


def _key(kind, f):
    return f"{kind}_{int(round(f * 1000))}"


def _shim(ctx):
    """Builds bench/peers/peakshim.c into the scratch directory once."""
    out = os.path.join(ctx.scratch, "libpeakshim.so")
    if not os.path.exists(out):
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", out, os.path.join(PEERS, "peakshim.c")], check=True)
    return out


def _strata(model, fractions, steps):
    def run(ctx):
        args = ["--model", model, "--threads", ctx.threads, "--steps", steps, "--fractions",
                ",".join(str(f) for f in fractions)] + (["--quick"] if ctx.quick else [])
        d = ctx.run_json("strata-bench-remat", args, tag=model)
        base = d["store_all"]
        samples = {}
        for b in d["budgets"]:
            ck, st, au = b["checkpoint"], b["stream"], b.get("auto")
            best = min([c for c in (ck, st, au) if c], key=lambda c: _overhead(c, base), default=None)
            samples[_key("ckpt", b["fraction"])] = [_overhead(ck, base)]
            samples[_key("best", b["fraction"])] = [_overhead(best, base)]
        # a figure whose side found nothing this round (it fitted in the probe) fails loudly below
        return Run({"threads": d["threads"], "dtype": d["dtype"], "library": d["library"]}, samples)
    return run


def _peer(model, fractions, steps):
    def run(ctx):
        out = os.path.join(ctx.scratch, f"torch-remat-{model}.json")
        cmd = [sys.executable, os.path.join(PEERS, "torch_remat.py"), "--model", model, "--threads", str(ctx.threads),
               "--steps", str(steps), "--fractions", ",".join(str(f) for f in fractions), "--json", out]
        if ctx.quick:
            cmd.append("--quick")
        env = dict(os.environ, LD_PRELOAD=_shim(ctx))
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
        with open(out) as fh:
            d = json.load(fh)
        base = d["store_all"]
        samples = {}
        for b in d["budgets"]:
            o = _overhead(b["checkpoint"], base)
            samples[_key("ckpt", b["fraction"])] = [o]
            samples[_key("best", b["fraction"])] = [o]
        return Run({"threads": d["threads"], "dtype": d["dtype"], "library": d["library"]}, samples)
    return run


def items(ctx):
    """One item per model. A probe run of both sides (discarded) finds the budgets at which both
    have a configuration that fits; only those become figures, the others are logged (and the
    RESULTS.md section's log says so)."""
    fractions = [0.9] if ctx.quick else FRACTIONS
    steps = 2 if ctx.quick else 5
    out = []
    for model in (["resnet"] if ctx.quick else ["resnet", "vgg"]):
        s_probe = _strata(model, fractions, 1)(ctx)
        p_probe = _peer(model, fractions, 1)(ctx)
        figs = []
        for f in fractions:
            missing = [side for side, r in (("Strata", s_probe), ("PyTorch", p_probe))
                       if not math.isfinite(r.samples[_key("ckpt", f)][0])]
            if missing:
                ctx.log(f"  {model} at {100 * f:g} % of StoreAll's peak: no checkpoint configuration of "
                        f"{' and '.join(missing)} fits; not compared")
                if math.isfinite(s_probe.samples[_key("best", f)][0]):
                    ctx.log(f"  {model} at {100 * f:g} %: Strata's best (streaming) overhead "
                            f"{s_probe.samples[_key('best', f)][0]:.3f}x in the probe run")
                continue
            for kind, what in (("ckpt", "checkpointing"), ("best", "best of checkpointing, streaming and Auto")):
                figs.append(Figure(_key(kind, f), f"{what} at {100 * f:g} % of StoreAll's peak", kind="time",
                                   unit="x StoreAll", target=Target("ratio < 1 (lower overhead)", max_ratio=1.0)))
        if figs:
            out.append(Item(model, figs, strata=_strata(model, fractions, steps),
                            peer=_peer(model, fractions, steps)))
    return out


WORKLOAD = Workload(
    name="remat",
    title="Rematerialization and tape streaming under a fast-memory budget vs torch.utils.checkpoint",
    peer_name="PyTorch",
    slow_tier="tape streaming spills to the slow heap (DRAM-backed file mapping; the slow-tier model as configured)",
    items=items,
    describe=__doc__,
    rounds=3,
)

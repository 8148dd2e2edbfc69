#!/usr/bin/env python3
"""Projected scaling efficiency vs nodes (strata-netmodel's JSON): one panel for weak scaling (the
preset's batch per node) and one for strong scaling (a fixed global batch), a line per configuration
and fabric. usage: plot.py MODEL_JSON OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = json.load(open(sys.argv[1]))
    records = model["records"]
    if not records:
        sys.exit(f"plot.py: {sys.argv[1]} has no projections")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
    colors = {"random-bench": "tab:blue", "kaggle": "tab:orange", "mlperf40M": "tab:green"}
    styles = {"25gbe": "--", "ib100": "-"}
    for ax, scaling in zip(axes, ["weak", "strong"]):
        for r in records:
            if r["scaling"] != scaling:
                continue
            nodes = [p["nodes"] for p in r["points"]]
            eff = [100 * p["efficiency"] for p in r["points"]]
            ax.plot(nodes, eff, styles.get(r["fabric"], ":"), marker="o", ms=3.5,
                    color=colors.get(r["config"], "gray"), label=f"{r['config']}, {r['fabric']}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(nodes, [str(n) for n in nodes])
        ax.set_xlabel("nodes (one rank each)")
        batch = ("batch per node = the preset's (random-bench, MLPerf 2048; Kaggle 128)" if scaling == "weak"
                 else f"global batch = {model['strong_batch_factor']} x the preset's")
        ax.set_title(f"{scaling} scaling: {batch}", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("projected scaling efficiency (%)")
    axes[1].legend(fontsize=8, loc="lower left")
    speedup = model.get("compute_speedup", 1)
    compute = ("compute as measured on one core of this machine" if speedup == 1
               else f"compute {speedup:g}x faster than measured on one core")
    fig.suptitle(f"Hybrid-parallel DLRM, network model (embeddings/dist/step_model.h), {compute}", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()

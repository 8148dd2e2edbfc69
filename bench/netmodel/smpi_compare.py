#!/usr/bin/env python3
"""Model vs SMPI, per collective: reads strata-netmodel's JSON (its "schedules" records: the model's
time of each collective) and bench/netmodel/run_smpi.sh's outputs (<config>_<nodes>_<fabric>_<topology>.out,
lines "<collective> <seconds>"); prints a Markdown table and writes OUT_DIR/smpi.json.
usage: smpi_compare.py MODEL_JSON OUT_DIR"""
import glob
import json
import os
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model = json.load(open(sys.argv[1]))
    times = {(s["config"], s["nodes"], s["fabric"], s["collective"].replace(" ", "_")): s["model_s"]
             for s in model.get("schedules", [])}
    if not times:
        sys.exit(f"smpi_compare.py: {sys.argv[1]} has no schedules (run strata-netmodel with --schedules)")
    rows = []
    for path in sorted(glob.glob(os.path.join(sys.argv[2], "*.out"))):
        config, nodes, fabric, topo = os.path.basename(path)[:-4].rsplit("_", 3)
        for line in open(path):
            name, seconds = line.split()
            key = (config, int(nodes), fabric, name)
            if key not in times:
                sys.exit(f"smpi_compare.py: {path}: no model time for {key}")
            rows.append({"config": config, "nodes": int(nodes), "fabric": fabric, "topology": topo,
                         "collective": name, "smpi_s": float(seconds), "model_s": times[key],
                         "ratio": times[key] / float(seconds)})
    rows.sort(key=lambda r: (r["config"], r["fabric"], r["topology"], r["nodes"], r["collective"]))
    json.dump({"records": rows}, open(os.path.join(sys.argv[2], "smpi.json"), "w"), indent=1)
    print("| config | fabric | topology | nodes | collective | SMPI ms | model ms | model/SMPI |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config']} | {r['fabric']} | {r['topology']} | {r['nodes']} | {r['collective'].replace('_', ' ')} | "
              f"{r['smpi_s'] * 1e3:.3f} | {r['model_s'] * 1e3:.3f} | {r['ratio']:.3f} |")
    # The step's four collectives together (what the step model adds up before the overlap).
    steps = {}
    for r in rows:
        k = (r["config"], r["fabric"], r["topology"], r["nodes"])
        s = steps.setdefault(k, [0.0, 0.0, 0])
        s[0] += r["smpi_s"]
        s[1] += r["model_s"]
        s[2] += 1
    print("\n| config | fabric | topology | nodes | step's collectives, SMPI ms | model ms | model/SMPI |")
    print("|---|---|---|---|---|---|---|")
    for (config, fabric, topo, nodes), (smpi, mod, n) in sorted(steps.items()):
        if n == 4:
            print(f"| {config} | {fabric} | {topo} | {nodes} | {smpi * 1e3:.3f} | {mod * 1e3:.3f} | {mod / smpi:.3f} |")
    # The model assumes a non-blocking network: star and full fat tree; taper2 shows what it leaves out.
    for label, group in [("non-blocking (star, fattree)", [r for r in rows if r["topology"] != "taper2"]),
                         ("2:1 tapered fat tree", [r for r in rows if r["topology"] == "taper2"])]:
        if not group:
            continue
        worst = max(group, key=lambda r: abs(r["ratio"] - 1))
        print(f"\n{label}: {len(group)} collectives, model/SMPI from {min(r['ratio'] for r in group):.3f} to "
              f"{max(r['ratio'] for r in group):.3f}; the largest deviation {worst['ratio']:.3f} ({worst['config']}, "
              f"{worst['fabric']}, {worst['topology']}, {worst['nodes']} nodes, {worst['collective']})")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Writes a SimGrid platform (XML) and hostfile for the SMPI cross-check of the network model
(bench/netmodel/run_smpi.sh): N hosts on one fabric of embeddings/dist/step_model.cpp, as
  star     a cluster: every host on a full-duplex link (SPLITDUPLEX) of the fabric's bandwidth
           and half its latency, to a non-blocking backbone (FATPIPE, no latency): any two hosts
           are one latency apart and each host's NIC serializes its own bytes, as the model says;
  fattree  a two-level fat tree (SimGrid FAT_TREE) of switches with 4 or 8 ports down, as many
           spines as a leaf has hosts (full bisection), every link the fabric's bandwidth and a
           quarter of its latency (a message across the spine crosses four links; within a leaf,
           two). Routing is SimGrid's fixed up-down routing, so flows can share a spine link;
  taper2   the same fat tree with half the spines (2:1 oversubscribed): outside the model's
           assumption of a non-blocking network, to show what contention costs.
usage: smpi_platform.py --hosts N --latency S --bandwidth BYTES_PER_S --topology star|fattree|taper2 --out STEM
"""
import argparse
import sys


def fat_tree_params(hosts, taper):
    # levels; down ports per level; up ports per level; links per up port
    leaf = 4 if hosts <= 16 else 8
    if hosts % leaf:
        sys.exit(f"smpi_platform.py: --hosts {hosts} is not a multiple of the {leaf}-port leaf switches")
    return f"2;{leaf},{hosts // leaf};1,{leaf // taper};1,1"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, required=True)
    ap.add_argument("--latency", type=float, required=True, help="seconds, host to host")
    ap.add_argument("--bandwidth", type=float, required=True, help="bytes per second per link and direction")
    ap.add_argument("--topology", choices=["star", "fattree", "taper2"], required=True)
    ap.add_argument("--out", required=True, help="writes STEM.xml and STEM.hosts")
    a = ap.parse_args()
    if a.hosts < 2:
        sys.exit(f"smpi_platform.py: --hosts {a.hosts} (at least 2)")
    if a.latency < 0 or a.bandwidth <= 0:
        sys.exit(f"smpi_platform.py: --latency {a.latency} must be >= 0 and --bandwidth {a.bandwidth} > 0")
    bw = f"{a.bandwidth:.6g}Bps"
    if a.topology == "star":
        cluster = (f'<cluster id="c" prefix="node-" suffix="" radical="0-{a.hosts - 1}" speed="1Gf" bw="{bw}" '
                   f'lat="{a.latency / 2:.6g}s" sharing_policy="SPLITDUPLEX" bb_bw="{a.bandwidth * a.hosts * 4:.6g}Bps" '
                   f'bb_lat="0s" bb_sharing_policy="FATPIPE"/>')
    else:
        cluster = (f'<cluster id="c" prefix="node-" suffix="" radical="0-{a.hosts - 1}" speed="1Gf" bw="{bw}" '
                   f'lat="{a.latency / 4:.6g}s" sharing_policy="SPLITDUPLEX" topology="FAT_TREE" '
                   f'topo_parameters="{fat_tree_params(a.hosts, 2 if a.topology == "taper2" else 1)}"/>')
    with open(a.out + ".xml", "w") as f:
        f.write("<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                f"<platform version=\"4.1\">\n  {cluster}\n</platform>\n")
    with open(a.out + ".hosts", "w") as f:
        f.write("".join(f"node-{i}\n" for i in range(a.hosts)))


if __name__ == "__main__":
    main()

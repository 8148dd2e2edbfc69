#!/usr/bin/env bash
# The SMPI cross-check of the network model (issue 28 item 8): runs the step's collectives, as
# strata::dist performs them, under SimGrid's SMPI on simulated clusters and compares each
# collective's simulated time with the model's (embeddings/dist/step_model.h).
#   bash bench/netmodel/run_smpi.sh MODEL_JSON SCHED_DIR OUT_DIR
# MODEL_JSON and SCHED_DIR come from `strata-netmodel --schedules SCHED_DIR --json MODEL_JSON`
# (bench/netmodel/run.sh). Environment: CONFIGS (random-bench kaggle mlperf40M), NODES (8 16 32 64),
# TOPOLOGIES (star fattree; taper2 also exists), FABRICS (25gbe ib100). Outputs that exist are kept (the 64-host runs
# take minutes each: SimGrid solves the bandwidth sharing of ~4000 concurrent flows per round).
# Writes OUT_DIR/<config>_<nodes>_<fabric>_<topology>.out and OUT_DIR/smpi.json (bench/netmodel/smpi_compare.py).
#
# SimGrid is not a CI dependency: it is installed here when smpicxx is missing (Debian's
# libsimgrid-dev and simgrid, SimGrid 3.32). SMPI is pinned as REFERENCE.md §5 asks: no computation
# is simulated (smpi/simulate-computation:no, host speed 1 Gf), SMPI's piecewise bandwidth and
# latency corrections are off (factors 1), no cross-traffic, and the per-message cost o of the
# model's fabric is SMPI's MPI_Isend overhead (smpi/ois). Only point-to-point calls are timed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
model_json=$1 sched_dir=$2 out=$3
mkdir -p "$out"
if ! command -v smpicxx >/dev/null; then
  apt-get install -y libsimgrid-dev simgrid >/dev/null
fi
smpicxx -O2 -std=c++17 "$here/smpi_collectives.cpp" -o "$out/smpi_collectives" 2>/dev/null
fabric() {  # name -> "latency per_message bandwidth" from the model's JSON
  python3 -c "import json,sys; f=[f for f in json.load(open(sys.argv[1]))['fabrics'] if f['name']==sys.argv[2]][0]; print(f['latency_s'], f['per_message_s'], f['bytes_per_second'])" "$model_json" "$1"
}
for config in ${CONFIGS:-random-bench kaggle mlperf40M}; do
  for nodes in ${NODES:-8 16 32 64}; do
    for fab in ${FABRICS:-25gbe ib100}; do
      read -r lat o bw < <(fabric "$fab")
      for topo in ${TOPOLOGIES:-star fattree}; do
        stem="$out/${config}_${nodes}_${fab}_${topo}"
        [ -s "$stem.out" ] && continue
        python3 "$here/smpi_platform.py" --hosts "$nodes" --latency "$lat" --bandwidth "$bw" --topology "$topo" --out "$stem"
        start=$(date +%s.%N)
        smpirun -np "$nodes" -platform "$stem.xml" -hostfile "$stem.hosts" \
          --cfg=smpi/simulate-computation:no --cfg=smpi/host-speed:1Gf --cfg=smpi/bw-factor:0:1 \
          --cfg=smpi/lat-factor:0:1 --cfg=network/crosstraffic:0 --cfg=smpi/shared-malloc:global \
          --cfg=smpi/ois:0:"$o":0 "$out/smpi_collectives" "$sched_dir/${config}_${nodes}.sched" \
          >"$stem.tmp" 2>"$stem.err"
        mv "$stem.tmp" "$stem.out"
        echo "$config $nodes $fab $topo: $(python3 -c "import sys,time; print(round(time.time()-float(sys.argv[1]),1))" "$start") s"
      done
    done
  done
done
python3 "$here/smpi_compare.py" "$model_json" "$out" >"$out/smpi.md"
cat "$out/smpi.md"

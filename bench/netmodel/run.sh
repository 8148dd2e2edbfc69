#!/usr/bin/env bash
# The network model's projection (issue 28 item 8): measures the per-phase compute of one process
# (strata-dlrm --enable-profiling, one thread, tables in DRAM) for random-bench, kaggle and
# mlperf40M (rows scaled by 0.01 to fit this machine), projects step time and scaling efficiency
# at 1..64 nodes on the model's fabrics (strata-netmodel), plots them and writes the collectives'
# schedules for the SMPI cross-check (bench/netmodel/run_smpi.sh).
#   bash bench/netmodel/run.sh BUILD_DIR OUT_DIR SCHED_DIR   (e.g. build/release bench/results /tmp/sched)
# Writes OUT_DIR/netmodel_phases_<preset>.json, OUT_DIR/netmodel.json, OUT_DIR/netmodel.md (the
# projection table) and OUT_DIR/netmodel.png; the schedules (several MB at 64 nodes) in SCHED_DIR.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1 out=$2 sched=$3
mkdir -p "$out" "$sched"
phases=()
for spec in "random-bench:12" "kaggle:200" "mlperf40M:12:--scale-rows 0.01"; do
  IFS=: read -r preset batches extra <<<"$spec"
  json="$out/netmodel_phases_$preset.json"
  # shellcheck disable=SC2086
  "$build/bench/strata-dlrm" --preset "$preset" --num-batches "$batches" --threads 1 --enable-profiling \
    --print-freq 100000 --fast-budget 4G $extra --json "$json" >/dev/null
  phases+=(--phases "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d["phases_ms_per_it"]
print("%s=%d:%s" % (sys.argv[2], d["batch"], ",".join("%.4f" % p[k] for k in
      ["bottom_mlp", "lookup", "interaction", "top_mlp", "backward", "update"])))' "$json" "$preset")")
done
"$build/bench/strata-netmodel" "${phases[@]}" --schedules "$sched" --json "$out/netmodel.json" \
  >"$out/netmodel.md"
python3 "$here/plot.py" "$out/netmodel.json" "$out/netmodel.png"
printf '%s\n' "${phases[@]}"

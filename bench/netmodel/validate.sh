#!/usr/bin/env bash
# The network model against measured distributed steps on this machine (issue 28 item 8, Note
# [Measured step model] in embeddings/dist/step_model.h): REPS rounds, each of strata-bench-comm at
# 2 and 4 ranks (α, β of this host), then strata-dlrm --dist-backend=mpi on random-bench at 1, 2 and
# 4 ranks x 1 thread and 1 rank x 2 threads (interleaved), then strata-netmodel --validate on that
# round's runs (its 1 x 1 run gives the allreduce's local-work rate).
#   bash bench/netmodel/validate.sh BUILD_DIR OUT_DIR   (REPS=3 NUM_BATCHES=40 BATCH=1024 by default)
# Writes OUT_DIR/netmodel_step_<round>_<N>x<T>.json, OUT_DIR/netmodel_comm_<round>_np<N>.json and
# OUT_DIR/netmodel_validate_<round>.{json,md}.
set -euo pipefail
build=$1 out=$2
reps=${REPS:-3} batches=${NUM_BATCHES:-40} batch=${BATCH:-1024}
mpirun=(mpirun --oversubscribe --allow-run-as-root)
mkdir -p "$out"
for round in $(seq 1 "$reps"); do
  comm=()
  for np in 2 4; do
    f="$out/netmodel_comm_${round}_np$np.json"
    "${mpirun[@]}" -np "$np" "$build/bench/strata-bench-comm" --threads 1 --reps 20 --json "$f" >/dev/null
    comm+=(--comm "$f")
  done
  runs=()
  for cfg in 1x1 2x1 4x1 1x2; do
    np=${cfg%x*} threads=${cfg#*x}
    f="$out/netmodel_step_${round}_$cfg.json"
    STRATA_NUM_THREADS=$threads "${mpirun[@]}" -np "$np" "$build/bench/strata-dlrm" --preset random-bench \
      --scale-rows 0.01 --num-batches "$batches" --mini-batch-size "$batch" --loss-function bce \
      --dist-backend=mpi --print-freq 100000 --json "$f" >/dev/null
    runs+=(--validate "$f")
  done
  { echo "load average after the round: $(cut -d' ' -f1-3 /proc/loadavg)"
    "$build/bench/strata-netmodel" "${runs[@]}" "${comm[@]}" --json "$out/netmodel_validate_$round.json"; } \
    | tee "$out/netmodel_validate_$round.md"
done

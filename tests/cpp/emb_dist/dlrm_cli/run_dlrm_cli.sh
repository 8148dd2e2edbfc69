#!/usr/bin/env bash
# strata-dlrm --dist-backend=mpi end to end under the MPI launcher (Note [Distributed strata-dlrm] in
# embeddings/dist/dlrm_dist_run.h). Modes:
#   bitwise   one small random-data run at 1, 2 and 4 ranks (5 batches, the last of 32 samples): the
#             --json train losses, test metrics and iterations equal bit for bit (compare_runs.py);
#             rank 0 alone prints, with comm: lines; --slow-dir/rank-R/ is created.
#   refused   gloo/ccl/nccl and an unknown backend exit 2 naming --dist-backend; flags the distributed
#             run does not support exit non-zero naming the flag; --check-finite stops a diverging run.
#   schedule  the bitwise runs with mse and the reference's learning-rate warm-up and decay (3 epochs
#             of 5 batches: every phase of the schedule) at 1, 2 and 4 ranks: losses and test metrics
#             equal bit for bit, unlike the run without the schedule; a decay inside the warm-up refused.
#   resume    saved at 4 ranks, resumed at 2: the losses of the uninterrupted run; --inference-only
#             from the checkpoint; start-up errors at 2 ranks with the default STRATA_DIST_TIMEOUT (a
#             file or a directory without a manifest, an unwritable --json on rank 0, a --slow-dir
#             rank 1 cannot create) end both ranks within seconds naming the rank and the problem.
#   mismatch  one rank given another flag value (by OMPI_COMM_WORLD_RANK / PMI_RANK), or another data
#             file under the same path: every rank exits non-zero naming the flag or file and both ranks.
#   kill      4 ranks training with --save-model; after the first checkpoint, rank 2 is killed (SIGKILL)
#             mid-training: the job ends within 60 s, non-zero, naming rank 2, no rank left running,
#             and the last committed checkpoint loads at 2 ranks at its saved position.
#   stall     the same with rank 2 stopped (SIGSTOP) and STRATA_DIST_TIMEOUT=5: the other ranks'
#             collectives time out naming rank 2 (Note [Faults of distributed strata-dlrm]).
# Usage: run_dlrm_cli.sh MODE STRATA_DLRM MPIEXEC [MPIEXEC FLAGS...] NUMPROC_FLAG
set -uo pipefail
mode=$1 bin=$(realpath "$2")  # absolute: the data mismatch test runs each rank in its own directory
shift 2
launcher=("$@")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STRATA_NUM_THREADS=1 STRATA_DIST_TIMEOUT=30
small=(--arch-embedding-size 300-120-50-7 --arch-sparse-feature-size 4 --arch-mlp-bot 5-8-4 --arch-mlp-top 8-1
       --mini-batch-size 37 --data-size 180 --loss-function bce --round-targets True --test-freq 3 --print-freq 1
       --mlperf-logging --learning-rate 0.1 --num-indices-per-lookup 3 --optimizer rwsadagrad --dist-chunks 6)
fail() { echo "run_dlrm_cli: FAIL: $*"; exit 1; }
# A small model over random data, for the resume and fault modes.
base=(--arch-embedding-size 300-120-50-7 --arch-sparse-feature-size 4 --arch-mlp-bot 5-8-4 --arch-mlp-top 8-1
      --mini-batch-size 37 --loss-function bce --round-targets True --learning-rate 0.1 --num-indices-per-lookup 3
      --optimizer rwsadagrad --dist-chunks 6 --dist-backend=mpi)

# run and expect_error: cli_lib.sh
source "$here/cli_lib.sh"

# fault SIGNAL: 4 ranks train 400-batch epochs with --save-model and a test pass every 200 batches
# (the first pass always improves, so it saves); once a progress line follows the first "Saving
# model" line, rank 2 gets SIGNAL (while the ranks train: steps of about a millisecond back to back,
# the next save 180 steps away). The job must end non-zero within 60 s of the signal with no rank
# left running and none finished; the caller checks who named rank 2. Sets fault_log.
fault() {
  local signal=$1 pids=$work/pids
  fault_log=$work/fault.log
  mkdir -p "$pids"
  timeout --kill-after=5 120 "${launcher[@]}" 4 bash "$here/rank_flag.sh" pid:"$pids" "$bin" "${base[@]}" \
    --data-size 14800 --nepochs 1000 --test-freq 200 --print-freq 20 --save-model "$work/ckpt" >"$fault_log" 2>&1 &
  local job=$!
  until sed -n '/^Saving model to/,$p' "$fault_log" | grep -q '^Finished training'; do
    kill -0 "$job" 2>/dev/null || { cat "$fault_log"; fail "the run ended before training past its first checkpoint"; }
    sleep 0.05
  done
  local start victim
  start=$(date +%s%N) victim=$(cat "$pids/rank-2.pid")
  kill -s "$signal" "$victim"
  wait "$job"
  local status=$? elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  cat "$fault_log"
  echo "run_dlrm_cli: rank 2 got SIG$signal; the job exited with status $status ${elapsed_ms} ms later"
  [ "$status" -ne 0 ] || fail "the job exited 0"
  [ "$status" -ne 124 ] && [ "$elapsed_ms" -lt 60000 ] || fail "the job took more than 60 s to end"
  # Every rank gone, or a zombie (dead) when no init process reaps mpirun's orphans, within the same
  # 60 s of the signal: mpirun may exit while the ranks it signalled are still being torn down.
  for r in 0 1 2 3; do
    local pid
    pid=$(cat "$pids/rank-$r.pid")
    until [[ "$(ps -o stat= -p "$pid")" =~ ^Z?$ ]]; do
      [ $((($(date +%s%N) - start) / 1000000)) -lt 60000 ] || fail "rank $r still runs 60 s after the signal"
      sleep 0.05
    done
  done
  echo "run_dlrm_cli: every rank ended $((($(date +%s%N) - start) / 1000000)) ms after the signal"
  if grep -q '^Summary:' "$fault_log"; then fail "a rank finished training"; fi
}

# expect_checkpoint_loads: the last checkpoint the fault run committed (its last "Saving model" line,
# after the test pass at batch j/nb of epoch k) loads at 2 ranks, --inference-only, at that position.
expect_checkpoint_loads() {
  local at k j nb expect
  at=$(grep -B1 '^Saving model to' "$fault_log" | grep -o 'Testing at - [0-9]*/[0-9]* of epoch [0-9]*' | tail -1)
  read -r j nb k < <(echo "$at" | sed -E 's|Testing at - ([0-9]+)/([0-9]+) of epoch ([0-9]+)|\1 \2 \3|')
  [ -n "$k" ] || fail "no test pass before the last save"
  expect="($((k * nb + j)) optimizer steps); resuming at epoch $k, batch $j/$nb"
  [ "$j" -lt "$nb" ] || expect="($((k * nb + j)) optimizer steps); resuming at epoch $((k + 1)), batch 0/$nb"
  run 2 "$work/load.log" "$bin" "${base[@]}" --data-size 14800 --nepochs 1000 --test-freq 200 --inference-only \
    --load-model "$work/ckpt" || { cat "$work/load.log"; fail "the last checkpoint did not load"; }
  grep -qF "Loaded model from $work/ckpt $expect" "$work/load.log" \
    || { cat "$work/load.log"; fail "the checkpoint is not the last committed one: expected '$expect'"; }
  grep -q "^Testing for inference only: loss" "$work/load.log" || { cat "$work/load.log"; fail "no test line"; }
}

# expect_startup_error PATTERN ARGS...: expect_error at 2 ranks with the default STRATA_DIST_TIMEOUT,
# and within 20 s (a rank left waiting for another's start-up error would take the 60 s timeout).
expect_startup_error() {
  local pattern=$1 start
  shift
  start=$(date +%s)
  expect_error 2 "$pattern" env -u STRATA_DIST_TIMEOUT "$@"
  [ $(($(date +%s) - start)) -lt 20 ] || { cat "$work/err.log"; fail "took $(($(date +%s) - start)) s: $*"; }
}

case $mode in
  bitwise)
    for np in 1 2 4; do
      mkdir -p "$work/slow$np"
      run "$np" "$work/np$np.log" "$bin" "${small[@]}" --dist-backend=mpi --json "$work/np$np.json" \
        --slow-dir "$work/slow$np" || { cat "$work/np$np.log"; fail "the run at $np ranks failed"; }
      log=$work/np$np.log
      [ -d "$work/slow$np/rank-$((np - 1))" ] || fail "no --slow-dir/rank-$((np - 1))/ at $np ranks"
      grep -q "^Running on $np ranks using mpi backend" "$log" || fail "no 'Running on $np ranks' line"
      [ "$(grep -c '^Finished training it 1/5 of epoch 0' "$log")" -eq 1 ] || fail "not only rank 0 printed"
      [ "$(grep -c '^comm: rank 0 sent per step: alltoallv' "$log")" -eq 5 ] || fail "not one comm: line per progress line"
      grep -q "^Testing at - 5/5 of epoch 0, loss .*, auc " "$log" || fail "no test line"
    done
    cat "$work/np4.log"
    python3 "$here/compare_runs.py" "$work/np1.json" "$work/np2.json" "$work/np4.json" || fail "the runs differ"
    ;;
  refused)
    for b in gloo ccl nccl; do
      "$bin" "${small[@]}" --dist-backend="$b" >"$work/err.log" 2>&1
      [ $? -eq 2 ] || fail "--dist-backend=$b did not exit 2"
      grep -q -- "--dist-backend: backend '$b' is not supported: Strata's only backend is mpi" "$work/err.log" \
        || { cat "$work/err.log"; fail "--dist-backend=$b: no message"; }
    done
    "$bin" "${small[@]}" --dist-backend=tcp >"$work/err.log" 2>&1
    [ $? -eq 2 ] && grep -q -- "--dist-backend: expected one of mpi, got 'tcp'" "$work/err.log" || fail "tcp accepted"
    expect_error 2 "--emb-dtype: not supported with --dist-backend yet" \
      "$bin" "${small[@]}" --emb-dtype bf16 --dist-backend=mpi
    expect_error 4 "--dist-chunks: 2 chunks for 4 ranks" "$bin" "${small[@]}" --dist-chunks 2 --dist-backend=mpi
    # --check-finite (Note [Distributed finite check]) at 2 ranks: a diverging learning rate stops
    # every rank with the same error, before the update of batch 2: its output (the parameters
    # overflowed) or, with sgd and another model, a reduced MLP gradient. Without the flag the run
    # still stops, but at binary_cross_entropy's refusal, which names no cause.
    for r in 0 1; do
      expect_error 2 "rank $r: error: batch 2 of epoch 0: --check-finite: in step 2, before its update: the model's output .* is not finite: 37 NaN" \
        "$bin" "${base[@]}" --data-size 180 --learning-rate 1e30 --check-finite
    done
    expect_error 2 "rank 1: error: batch 2 of epoch 0: --check-finite: in step 2, before its update: the reduced gradient of top_l.2.weight: 5 NaN" \
      "$bin" --arch-embedding-size 300-120-50-7 --arch-sparse-feature-size 4 --arch-mlp-bot 5-8-4 --arch-mlp-top 8-1 \
      --mini-batch-size 37 --data-size 180 --loss-function bce --optimizer sgd --learning-rate 1e20 --check-finite \
      --dist-backend=mpi
    expect_error 2 "rank 1: error: batch 2 of epoch 0: binary_cross_entropy: all elements of input should be between 0 and 1" \
      "$bin" "${base[@]}" --data-size 180 --learning-rate 1e30
    ;;
  mismatch)
    # Rank 1 gets another learning rate.
    expect_error 2 "rank 0: error: flag --learning-rate differs across ranks: rank 0 has '0.1', rank 1 has '0.2'" \
      bash "$here/rank_flag.sh" 1 "$bin" "${small[@]}" --dist-backend=mpi -- --learning-rate 0.2
    # Rank 2 of 4 lacks a flag the others have.
    expect_error 4 "flag --print-time differs across ranks: rank 0 has 'true', rank 2 has \(not given\)" \
      bash "$here/rank_flag.sh" 0,1,3 "$bin" "${small[@]}" --dist-backend=mpi -- --print-time
    # The same relative trace path names another file in rank 1's directory.
    for r in 0 1; do
      mkdir -p "$work/r$r"
      printf '1 2 3\n' >"$work/r$r/trace_0.log"
    done
    printf '1 2 4\n' >"$work/r1/trace_0.log"
    expect_error 2 "data file --data-trace-file trace_0.log differs across ranks: rank 0 has '6 bytes, hash [0-9a-f]+', rank 1 has '6 bytes, hash [0-9a-f]+'" \
      bash "$here/rank_flag.sh" cd:"$work" "$bin" --arch-embedding-size 10 --arch-sparse-feature-size 4 \
      --arch-mlp-bot 5-4 --arch-mlp-top 4-1 --loss-function bce --mini-batch-size 4 --num-batches 1 \
      --data-generation synthetic --data-trace-file trace_j.log --dist-backend=mpi --
    ;;
  schedule)
    # The flags after small[] win (the last occurrence of a flag counts).
    sched=(--loss-function mse --lr-num-warmup-steps 3 --lr-decay-start-step 5 --lr-num-decay-steps 5 --nepochs 3)
    for np in 1 2 4; do
      run "$np" "$work/s$np.log" "$bin" "${small[@]}" "${sched[@]}" --dist-backend=mpi --json "$work/s$np.json" \
        || { cat "$work/s$np.log"; fail "the run at $np ranks failed"; }
      grep -q "loss mse, optimizer rwsadagrad" "$work/s$np.log" || { cat "$work/s$np.log"; fail "not an mse run"; }
      [ "$(grep -c '^Finished training it' "$work/s$np.log")" -eq 15 ] || fail "not 15 progress lines at $np ranks"
    done
    cat "$work/s4.log"
    python3 "$here/compare_runs.py" "$work/s1.json" "$work/s2.json" "$work/s4.json" || fail "the runs differ"
    # The schedule is applied: without it the same run's losses differ.
    run 1 "$work/flat.log" "$bin" "${small[@]}" --loss-function mse --nepochs 3 --dist-backend=mpi \
      --json "$work/flat.json" || { cat "$work/flat.log"; fail "the run without a schedule failed"; }
    python3 -c 'import json, sys; a, b = (json.load(open(p))["train_loss"] for p in sys.argv[1:]); sys.exit(a == b)' \
      "$work/s1.json" "$work/flat.json" || fail "the schedule changed no loss"
    expect_error 2 "--lr-decay-start-step \(2\): learning rate warmup \(--lr-num-warmup-steps 3\) must finish" \
      "$bin" "${small[@]}" "${sched[@]}" --lr-decay-start-step 2 --dist-backend=mpi
    ;;
  resume)
    # Saved at 4 ranks at the end of epoch 0 (no test pass, so the save is at the end), resumed at 2
    # ranks for epoch 1: its train losses equal the uninterrupted 1-rank run's bit for bit (Note
    # [Resharding checkpoints]); the checkpoint runs --inference-only at 1 rank; bad paths refused.
    base+=(--data-size 180 --print-freq 1)
    run 1 "$work/whole.log" "$bin" "${base[@]}" --nepochs 2 --json "$work/whole.json" \
      || { cat "$work/whole.log"; fail "the uninterrupted run failed"; }
    run 4 "$work/first.log" "$bin" "${base[@]}" --save-model "$work/ckpt" \
      || { cat "$work/first.log"; fail "the saving run failed"; }
    grep -q "^Saving model to $work/ckpt" "$work/first.log" || { cat "$work/first.log"; fail "no save"; }
    run 2 "$work/rest.log" "$bin" "${base[@]}" --nepochs 2 --load-model "$work/ckpt" --json "$work/rest.json" \
      || { cat "$work/rest.log"; fail "the resumed run failed"; }
    grep -q "resuming at epoch 1, batch 0/5" "$work/rest.log" || { cat "$work/rest.log"; fail "not resumed at epoch 1"; }
    python3 "$here/compare_resumed.py" "$work/whole.json" "$work/rest.json" || fail "the resumed run's losses differ"
    run 1 "$work/infer.log" "$bin" "${base[@]}" --inference-only --load-model "$work/ckpt" \
      || { cat "$work/infer.log"; fail "--inference-only failed"; }
    grep -q "^Testing for inference only: loss" "$work/infer.log" \
      || { cat "$work/infer.log"; fail "--inference-only: no test line"; }
    touch "$work/afile"
    mkdir -p "$work/empty"
    # Start-up checks agreed by every rank (Note [Agreed failures]): at 2 ranks, with the default
    # STRATA_DIST_TIMEOUT (60 s), each ends in seconds and every rank names the rank and the problem.
    expect_startup_error "rank 1: error: the start-up check failed on rank 0: --save-model: '.*afile' is a file; a distributed checkpoint is a directory" \
      "$bin" "${base[@]}" --save-model "$work/afile"
    expect_startup_error "rank 1: error: the start-up check failed on rank 0: --load-model: cannot open '.*empty/manifest'" \
      "$bin" "${base[@]}" --load-model "$work/empty"
    # --json is checked by rank 0 alone (it writes it); rank 1 learns it at once.
    expect_startup_error "rank 1: error: the start-up check failed on rank 0: --json: cannot write '.*missing/run.json'" \
      "$bin" "${base[@]}" --json "$work/missing/run.json"
    # A problem of rank 1 alone: its --slow-dir (relative; each rank in its own directory) is a file.
    mkdir -p "$work/r0/slow" "$work/r1/slow"
    touch "$work/r1/slow/rank-1"
    expect_startup_error "rank 0: error: the start-up check failed on rank 1: --slow-dir: cannot create 'slow/rank-1'" \
      bash "$here/rank_flag.sh" cd:"$work" "$bin" "${base[@]}" --slow-dir slow --
    ;;
  kill)
    # Open MPI's mpirun sees rank 2 die and kills the others, printing "mpirun noticed that process
    # rank 2 with PID ... exited on signal 9 (Killed)" (Note [Faults of distributed strata-dlrm]).
    fault KILL
    grep -Eq "process rank 2 with PID|strata::dist: rank [013]: .* for (rank [0-9]+, )*rank 2([^0-9]|$)" "$fault_log" \
      || fail "no message names rank 2"
    expect_checkpoint_loads
    ;;
  stall)
    # A stopped rank is alive to the launcher: the others' next collective waits STRATA_DIST_TIMEOUT
    # for it, names it and aborts the job.
    STRATA_DIST_TIMEOUT=5 fault STOP
    grep -Eq "strata::dist: rank [013]: .* waited .* for (rank [0-9]+, )*rank 2([^0-9]|$)" "$fault_log" \
      || fail "no rank reported waiting for rank 2"
    expect_checkpoint_loads
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "run_dlrm_cli: $mode: PASS"

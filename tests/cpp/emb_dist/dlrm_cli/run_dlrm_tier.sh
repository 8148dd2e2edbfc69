#!/usr/bin/env bash
# strata-dlrm --dist-backend=mpi with each rank's shards in its own slow tier (Note [Shard storage] in
# embeddings/dist/sharded_bags.h), one thread per rank: shards in the slow tier (simple), behind a
# DRAM cache (dynamic, static, and auto over --fast-budget) at 2 and 4 ranks train to the all-DRAM
# 1-rank run's losses and test metrics bit for bit (compare_runs.py); rank R's slow tier is
# --slow-dir/rank-R/ and holds its rows; placements that cannot work are named.
# Usage: run_dlrm_tier.sh STRATA_DLRM MPIEXEC [MPIEXEC FLAGS...] NUMPROC_FLAG
set -uo pipefail
bin=$(realpath "$1")
shift
launcher=("$@")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STRATA_NUM_THREADS=1 STRATA_DIST_TIMEOUT=30
common=(--arch-sparse-feature-size 4 --arch-mlp-bot 5-8-4 --arch-mlp-top 8-1 --mini-batch-size 37 --data-size 180
        --loss-function bce --round-targets True --test-freq 3 --print-freq 1 --mlperf-logging --learning-rate 0.1
        --num-indices-per-lookup 3 --optimizer rwsadagrad --dist-chunks 6 --dist-backend=mpi)
small=(--arch-embedding-size 300-120-50-7 "${common[@]}")
large=(--arch-embedding-size 3000-1200-500-70 "${common[@]}")  # 98 KiB of rows: over a 40 KB budget at 2 ranks
fail() { echo "run_dlrm_tier: FAIL: $*"; exit 1; }

# run and expect_error: cli_lib.sh
source "$here/cli_lib.sh"

# tiered NP NAME BASE PATTERN ARGS...: a run with --slow-dir $work/NAME whose losses equal BASE's, whose
# plan matches PATTERN, every rank's slow tier in NAME/rank-R/ (holding rows when the plan says so).
tiered() {
  local np=$1 name=$2 base=$3 pattern=$4
  shift 4
  local dir=$work/$name log=$work/$name.log
  mkdir -p "$dir"
  run "$np" "$log" "$@" --slow-dir "$dir" --json "$work/$name.json" || { cat "$log"; fail "$name failed"; }
  grep -Eq -- "$pattern" "$log" || { cat "$log"; fail "$name: no '$pattern'"; }
  for ((r = 0; r < np; r++)); do
    local line
    line=$(grep "^rank $r slow tier: " "$log") || { cat "$log"; fail "$name: no slow tier line of rank $r"; }
    [[ $line == "rank $r slow tier: pm:"*":$dir/rank-$r, "* ]] || fail "$name: rank $r's slow tier is not $dir/rank-$r: $line"
    if grep -q "^rank $r shards: .*: rows in the slow tier '$dir/rank-$r'" "$log"; then
      [[ $line != *", 0 B in use" ]] || fail "$name: rank $r's rows are not in its slow tier: $line"
    fi
  done
  python3 "$here/compare_runs.py" "$base" "$work/$name.json" || fail "$name: the losses differ from the all-DRAM run"
}

run 1 "$work/dram.log" "$bin" "${small[@]}" --json "$work/dram.json" || { cat "$work/dram.log"; fail "all-DRAM run"; }
tiered 2 simple "$work/dram.json" "rank 1 shards: .*, slow: rows in the slow tier" "$bin" "${small[@]}" --emb-policy simple
tiered 2 dynamic "$work/dram.json" "rank 0 shards: .*, cached \(dynamic, fraction 0.25\)" \
  "$bin" "${small[@]}" --emb-policy dynamic --cache-fraction 0.25
tiered 4 static "$work/dram.json" "rank 3 shards: .*, cached \(static, fraction 1\)" "$bin" "${small[@]}" --emb-policy static
run 1 "$work/large.log" "$bin" "${large[@]}" --json "$work/large.json" || { cat "$work/large.log"; fail "large run"; }
tiered 2 auto "$work/large.json" "rank 1 shards: .*, cached \(auto, fraction" "$bin" "${large[@]}" --fast-budget 40000
cat "$work/auto.log"

# No slow tier where the placement needs one; a cache fraction out of range or too large for the budget.
expect_error 2 "--emb-policy simple: places the shards in the slow tier.*give --slow-dir" \
  "$bin" "${small[@]}" --emb-policy simple
expect_error 2 "--fast-budget 29.30 KiB per rank \(2 ranks; no slow tier: --slow-dir gives each rank one\)" \
  "$bin" "${large[@]}" --fast-budget 30000
expect_error 2 "--cache-fraction: expected a fraction in \(0, 1\], got 1.5" \
  "$bin" "${small[@]}" --cache-fraction 1.5 --slow-dir "$work"
expect_error 2 "rank 1: error: rank 0's shards \(3 tables\): --cache-fraction 0.5: the caches would need" \
  "$bin" "${large[@]}" --fast-budget 40000 --cache-fraction 0.5 --slow-dir "$work"
echo "run_dlrm_tier: PASS"

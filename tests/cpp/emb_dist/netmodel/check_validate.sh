#!/usr/bin/env bash
# strata-netmodel --validate end to end on a tiny config (Note [Measured step model]): strata-dlrm
# --dist-backend=mpi at 1 rank x 1 thread and 2 ranks x 1 thread writes its per-rank phases, a
# hand-written strata-bench-comm fit stands for this host's α and β, and check_validate.py checks the
# report's structure and arithmetic against the runs' JSON (not the model's accuracy: a benchmark).
# Then the inputs it refuses: a 2-rank run without a fit, a --comm file that is not a fit.
# Usage: check_validate.sh STRATA_DLRM STRATA_NETMODEL MPIEXEC [MPIEXEC FLAGS...] NUMPROC_FLAG
set -uo pipefail
dlrm=$1 netmodel=$2
shift 2
launcher=("$@")
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export STRATA_DIST_TIMEOUT=30 STRATA_NUM_THREADS=1
fail() { echo "check_validate: FAIL: $*"; exit 1; }
tiny=(--arch-embedding-size 300-120-50-7 --arch-sparse-feature-size 4 --arch-mlp-bot 5-8-4 --arch-mlp-top 8-1
      --mini-batch-size 32 --num-batches 4 --loss-function bce --num-indices-per-lookup 3 --dist-chunks 4
      --dist-backend=mpi --print-freq 100)
for np in 1 2; do
  timeout --kill-after=5 60 "${launcher[@]}" "$np" "$dlrm" "${tiny[@]}" --json "$work/np$np.json" \
    >"$work/np$np.log" 2>&1 || { cat "$work/np$np.log"; fail "strata-dlrm at $np ranks"; }
done
cat >"$work/comm.json" <<'JSON'
{"binary": "strata-bench-comm", "ranks": 2,
 "fit": {"latency_s": 2e-06, "per_message_s": 2e-06, "bytes_per_second": 2e10, "host_bytes_per_second": 3e10}}
JSON
"$netmodel" --validate "$work/np1.json" --validate "$work/np2.json" --comm "$work/comm.json" --cores 2 \
  --json "$work/report.json" >"$work/report.md" 2>&1 || { cat "$work/report.md"; fail "strata-netmodel --validate"; }
cat "$work/report.md"
python3 "$here/check_validate.py" "$work/report.json" "$work/report.md" "$work/np1.json" "$work/np2.json" \
  || fail "the report"
# Refused inputs exit 2 naming the flag: no fit for a 2-rank run; a --comm file without a fit.
expect_usage() {
  local pattern=$1
  shift
  "$netmodel" "$@" >"$work/err.log" 2>&1
  local status=$?
  [ "$status" -eq 2 ] || { cat "$work/err.log"; fail "exit $status, not 2, for: $*"; }
  grep -Eq -- "$pattern" "$work/err.log" || { cat "$work/err.log"; fail "no '$pattern' for: $*"; }
}
expect_usage "--comm: no strata-bench-comm fit given for the 2-rank run" --validate "$work/np2.json"
expect_usage "--comm '.*/np1.json': not a strata-bench-comm --json" --validate "$work/np2.json" --comm "$work/np1.json"
echo "check_validate: ok"

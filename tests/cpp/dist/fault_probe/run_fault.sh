#!/usr/bin/env bash
# Runs fault_probe under the MPI launcher with 4 ranks, rank 2 the victim, and checks that the job
# ends non-zero within a bounded time with a message naming rank 2 (Note [Communicator faults]).
# Usage: run_fault.sh kill|stall PROBE MPIEXEC [MPIEXEC FLAGS...] NUMPROC_FLAG
set -uo pipefail
mode=$1 probe=$2
shift 2
launcher=("$@")
limit=60
export STRATA_DIST_TIMEOUT=5  # the stall test waits this long; steps before the fault take milliseconds
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
timeout --kill-after=5 "$limit" "${launcher[@]}" 4 "$probe" "$mode" 2 >"$log" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))
cat "$log"
echo "run_fault: mode $mode, exit status $status after ${elapsed} s"
fail() { echo "run_fault: FAIL: $*"; exit 1; }
[ "$status" -ne 0 ] || fail "the job exited 0"
# timeout(1) exits 124 (or the launcher dies of its KILL); mpirun itself exits 128 + signal when a
# rank was killed, so the hang is judged by the time taken.
[ "$status" -ne 124 ] && [ "$elapsed" -lt "$limit" ] || fail "the job hung until the ${limit} s limit"
grep -q "fault_probe: rank 2" "$log" || fail "the probe never reached its fault"
if grep -q "finished (the fault did not end the job)" "$log"; then fail "a rank finished"; fi
case $mode in
  kill) grep -Ev "^fault_probe:" "$log" | grep -Eq "rank 2([^0-9]|$)" || fail "no message names rank 2" ;;
  stall) grep -Eq "strata::dist: rank [013]: allreduce #3 .*waited .* for rank 2" "$log" \
           || fail "no rank reported waiting for rank 2" ;;
esac
echo "run_fault: PASS"

# Shared by run_dlrm_cli.sh and run_dlrm_tier.sh (sourced): needs `launcher` (the MPI launcher and
# its flags, ending with the rank-count flag), `work` (a scratch directory) and a `fail` function.

# run NP OUT ARGS...: the launcher with NP ranks, output in OUT; the exit status.
run() {
  local np=$1 out=$2
  shift 2
  timeout --kill-after=5 60 "${launcher[@]}" "$np" "$@" >"$out" 2>&1
}

# expect_error NP PATTERN ARGS...: the run fails and its output matches PATTERN (grep -E).
expect_error() {
  local np=$1 pattern=$2
  shift 2
  run "$np" "$work/err.log" "$@"
  local status=$?
  [ "$status" -ne 0 ] || { cat "$work/err.log"; fail "exit 0 for: $*"; }
  [ "$status" -ne 124 ] || fail "the run hung: $*"
  grep -Eq -- "$pattern" "$work/err.log" || { cat "$work/err.log"; fail "no '$pattern' for: $*"; }
}

#!/usr/bin/env bash
# The README's second command: set up, build, and run every test — the C++ suites (plain, under
# AddressSanitizer + UndefinedBehaviorSanitizer, and under ThreadSanitizer) and the Python suite
# against the installed package. Exits non-zero on the first failing stage.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
bash scripts/bootstrap.sh
mkdir -p build
jobs=$(nproc)
# One compiler spelling and one cache base for every tree, `pip install .`'s included (scikit-build-core
# configures with g++): the Python package's library objects are then the Release tree's cache hits.
export CXX="${CXX:-g++}" CCACHE_BASEDIR="$root"

# The sanitizer trees run each GoogleTest binary as a few processes (gtest shards), $(nproc) at a
# time: ctest starts one process per test case, and with ~2000 cases process start-up (oneDNN's
# runtime, sanitizer set-up) dominated (TSan: 18 min under ctest, 22 s as one process); one process
# per suite run one after another left a core idle. Every case still runs exactly once; each
# shard's output is printed whole when it ends.
run_suites() {
  local dir=$1 shards=2
  SUITE_LOGS=$(mktemp -d) SUITE_SHARDS=$shards
  export SUITE_LOGS SUITE_SHARDS
  local -a tasks=()
  for suite in "$dir"/tests/cpp/strata_*_tests; do
    for ((i = 0; i < shards; i++)); do tasks+=("$suite" "$i"); done
  done
  printf '%s\0' "${tasks[@]}" | xargs -0 -n 2 -P "$jobs" bash -c '
    suite=$0 shard=$1 log="$SUITE_LOGS/$(basename "$0").$1" start=$SECONDS status=ok
    GTEST_TOTAL_SHARDS=$SUITE_SHARDS GTEST_SHARD_INDEX=$shard "$suite" --gtest_brief=1 >"$log" 2>&1 || status=FAILED
    { echo "-- $(basename "$suite") shard $((shard + 1))/$SUITE_SHARDS: $status in $((SECONDS - start)) s"
      cat "$log"; } | flock "$SUITE_LOGS" cat
    [ "$status" = ok ]'
}

echo "== Code limits (functions <= 150 lines, files <= 900; scripts/check_code_limits.py) =="
python3 scripts/check_code_limits.py

echo "== Formatting (.clang-format, lines <= 120 columns; scripts/check_format.sh) =="
bash scripts/check_format.sh

echo "== C++ tests (Release) =="
bash scripts/build.sh build/release -DSTRATA_BUILD_TESTS=ON
ctest --test-dir build/release --output-on-failure -j "$jobs"

echo "== C++ tests (AddressSanitizer + UndefinedBehaviorSanitizer) =="
STRATA_BUILD_TYPE=Debug bash scripts/build.sh build/asan -DSTRATA_BUILD_TESTS=ON -DSTRATA_SANITIZE=address,undefined \
  -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1:allocator_may_return_null=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suites build/asan

echo "== C++ tests (ThreadSanitizer) =="
# Optimized so the suites stay fast; see Note [TSan and TBB] in core/threading.cpp.
STRATA_BUILD_TYPE=RelWithDebInfo bash scripts/build.sh build/tsan -DSTRATA_BUILD_TESTS=ON -DSTRATA_SANITIZE=thread \
  -DSTRATA_BUILD_EXAMPLES=OFF -DSTRATA_BUILD_BENCH=OFF
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:allocator_may_return_null=1 \
  run_suites build/tsan

echo "== Python package and tests =="
python3 -m pip install -q --disable-pip-version-check --no-build-isolation "$root"
(cd "$root/tests/python" && python3 -m pytest -q "$root/tests/python")

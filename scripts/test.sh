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

# The sanitizer trees run each GoogleTest binary once, as one process: ctest starts one process per
# test case, and with ~2000 cases process start-up (oneDNN's SYCL runtime, sanitizer set-up)
# dominated (TSan: 18 min under ctest, 22 s as one process). Every case still runs.
run_suites() {
  local dir=$1 status=0
  for suite in "$dir"/tests/cpp/strata_*_tests; do
    echo "-- $(basename "$suite")"
    "$suite" --gtest_brief=1 || status=1
  done
  return $status
}

echo "== Code limits (functions <= 150 lines, files <= 900; scripts/check_code_limits.py) =="
python3 scripts/check_code_limits.py

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

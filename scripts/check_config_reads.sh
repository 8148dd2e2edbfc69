#!/usr/bin/env bash
# Note [One configuration layer] (core/config.h), enforced: fails when the library, the Python
# bindings and package, the examples or the benchmarks read an environment variable outside
# core/config.cpp (C/C++: any getenv call, the library reads no other variable; Python: os.environ /
# os.getenv on a line naming a STRATA_ variable), or when docs/CONFIG.md does not list a variable
# core/config.cpp reads. tests/ may read its own variables. Run by ctest (tests/CMakeLists.txt).
#   bash scripts/check_config_reads.sh [source-root]   check a tree (default: this checkout)
#   bash scripts/check_config_reads.sh --self-test     check that the check catches each case
set -euo pipefail

# Prints the violations in the tree at $1; returns 1 when there are any.
check_tree() {
  local root=$1 found=0 hits v
  hits=$(cd "$root" && grep -rnE '\b(secure_)?getenv[[:space:]]*\(' --include='*.h' --include='*.hpp' \
           --include='*.c' --include='*.cc' --include='*.cpp' --exclude-dir=tests --exclude-dir='build*' \
           --exclude-dir=.git . | grep -v '^\./core/config\.cpp:' || true)
  if [[ -n $hits ]]; then
    echo "environment read outside core/config.cpp (add an environment:: function there instead):"
    echo "$hits"
    found=1
  fi
  hits=$(cd "$root" && grep -rnE '(os\.environ|os\.getenv|environ\.get)' --include='*.py' --exclude-dir=tests \
           --exclude-dir='build*' --exclude-dir=.git . | grep 'STRATA_' || true)
  if [[ -n $hits ]]; then
    echo "STRATA_* variable read in Python (the C++ configuration layer reads it; pass settings as arguments):"
    echo "$hits"
    found=1
  fi
  for v in $(grep -oE '"STRATA_[A-Z0-9_]+"' "$root/core/config.cpp" | tr -d '"' | sort -u); do
    if ! grep -q "\`$v\`" "$root/docs/CONFIG.md" 2>/dev/null; then
      echo "docs/CONFIG.md does not list \`$v\`, which core/config.cpp reads"
      found=1
    fi
  done
  return $found
}

# Builds small trees with one violation each and expects the check to pass or fail as it should.
self_test() {
  local dir status=0
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' RETURN
  mkdir -p "$dir/core" "$dir/docs" "$dir/memory" "$dir/python/strata" "$dir/tests/cpp"
  echo 'const char* v = std::getenv("STRATA_A");' >"$dir/core/config.cpp"
  echo '| `STRATA_A` | ... |' >"$dir/docs/CONFIG.md"
  echo 'const char* t = std::getenv("STRATA_TEST_ONLY");' >"$dir/tests/cpp/t.cpp"
  expect() {  # expect pass|fail <what>
    local got=pass
    check_tree "$dir" >"$dir/out" || got=fail
    if [[ $got != "$1" ]]; then
      echo "self-test: $2: expected the check to $1, it did $got:"; cat "$dir/out"; status=1
    fi
  }
  expect pass "the layer and a test reading variables"
  echo 'if (getenv ("STRATA_B")) {}' >"$dir/memory/m.cpp"
  expect fail "getenv in memory/m.cpp"
  rm "$dir/memory/m.cpp"
  echo 'x = os.environ.get("STRATA_C", "1")' >"$dir/python/strata/p.py"
  expect fail "os.environ in python/strata/p.py"
  echo 'env = dict(os.environ, LD_PRELOAD=shim)' >"$dir/python/strata/p.py"
  expect pass "os.environ without a STRATA_ variable"
  echo 'const char* w = std::getenv("STRATA_UNDOCUMENTED");' >>"$dir/core/config.cpp"
  expect fail "a variable missing from docs/CONFIG.md"
  [[ $status == 0 ]] && echo "self-test passed"
  return $status
}

if [[ ${1:-} == --self-test ]]; then
  self_test
else
  root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
  check_tree "$root"
  echo "configuration reads: only core/config.cpp reads the environment; docs/CONFIG.md lists every variable"
fi

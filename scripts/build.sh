#!/usr/bin/env bash
# Configures and builds one build tree incrementally. Usage:
#   bash scripts/build.sh <build-dir> [extra cmake -D options...]
# STRATA_BUILD_TARGETS="a b" builds only those targets (default: everything).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$1; shift
# ccache keys on paths relative to the checkout, so a fresh clone (CI's) reuses what an earlier
# build of the same sources compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(pwd)}"
# The test targets use precompiled headers (tests/cpp/CMakeLists.txt): ccache caches their objects
# only when told to ignore what a PCH cannot vary (its defines' and time macros' provenance, the
# header's timestamps).
export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
mkdir -p "$(dirname "$dir")"
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE="${STRATA_BUILD_TYPE:-Release}" "$@" >"$dir.configure.log" 2>&1 \
  || { mkdir -p "$(dirname "$dir")"; cat "$dir.configure.log"; exit 1; }
targets=()
for t in ${STRATA_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" --parallel "$(nproc)" "${targets[@]}"

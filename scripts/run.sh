#!/usr/bin/env bash
# The README's first command: set up, build, and run Strata's main job on its embedded default.
# Today the main job is the core tour (examples/core_tour.cpp); it becomes a training run with
# the ops/autograd issue and a strata-dlrm run with the DLRM issue.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
mkdir -p build
bash scripts/build.sh build/release -DSTRATA_BUILD_TESTS=OFF >/dev/null
exec ./build/release/examples/core_tour "$@"

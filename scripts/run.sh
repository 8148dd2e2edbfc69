#!/usr/bin/env bash
# The README's first command: set up, build, and run Strata's main job on its embedded default.
# Today the main job trains a small MLP from C++ on synthetic data (examples/train_mlp.cpp); it
# becomes a strata-dlrm run with the DLRM issue.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
mkdir -p build
bash scripts/build.sh build/release -DSTRATA_BUILD_TESTS=OFF >/dev/null
exec ./build/release/examples/train_mlp "$@"

#!/usr/bin/env bash
# The README's first command: set up, build, and run Strata's main job on its embedded default —
# `strata-dlrm` with no arguments: a DLRM whose embedding tables (8 × 131072 rows × 64, 256 MiB)
# are 4× the fast-tier budget (64 MiB of DRAM), so their rows live in the slow tier behind the
# per-row DRAM cache (policy auto), with the slow tier on the Optane model; generated click data
# (Zipf(1.05) ids, labels from a hidden model: Note [Click data] in embeddings/click_source.h),
# 1500 iterations of rwsadagrad with the reference's progress line, a test pass every 300 iterations
# (the reference's "Testing at" line), then a summary (samples/s, test accuracy and AUC,
# phase breakdown, cache hit rate, bytes moved per tier). Arguments are passed to strata-dlrm (`--help` lists the
# reference's flags, presets and tier flags). The Python training example is examples/train_mlp.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh --run  # only what building and running needs
echo "run.sh: building strata-dlrm (build/release)" >&2
# A tree test.sh configured keeps its settings; a new one is configured without the test suites
# (GoogleTest is not installed for running).
config=()
if [ ! -f build/release/CMakeCache.txt ]; then config=(-DSTRATA_BUILD_TESTS=OFF); fi
STRATA_BUILD_TARGETS=strata-dlrm bash scripts/build.sh build/release "${config[@]}" >&2
exec ./build/release/bench/strata-dlrm "$@"

#!/usr/bin/env bash
# The README's first command: set up, build and install the Python package, and run Strata's main
# job on its embedded default. Today the main job trains a small MLP from Python on synthetic data
# with a progress bar (examples/train_mlp.py; `--model cnn` for a small CNN, `--help` for the
# flags); it becomes a strata-dlrm run with the embeddings issue.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
PYTHON=${PYTHON:-python3}
echo "run.sh: building and installing the strata Python package (pip install .)" >&2
"$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation . >&2
exec "$PYTHON" examples/train_mlp.py "$@"

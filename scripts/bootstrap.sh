#!/usr/bin/env bash
# Installs everything Strata needs to build and test, idempotently: Debian packages via apt and
# Python packages via pip into the current python3. A second run on a ready machine only checks
# (a few seconds). Usage: bash scripts/bootstrap.sh [--run]
#   --run: only what building and running strata-dlrm needs (no GoogleTest, PyTorch, pytest, ...)
set -euo pipefail
RUN_ONLY=0
if [ "${1:-}" = "--run" ]; then RUN_ONLY=1; fi

PYTHON=${PYTHON:-python3}
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# ---- Debian packages -----------------------------------------------------------------------------
APT_PACKAGES=(g++ pkg-config ccache libtbb-dev libmemkind-dev libnuma-dev libglpk-dev zlib1g-dev)
# openmpi-bin + libopenmpi-dev: strata::dist's MPI transport and the mpirun the dist tests launch (without
# them dist builds as a single-process communicator, which the main job needs no more than).
if [ "$RUN_ONLY" = 0 ]; then APT_PACKAGES+=(libgtest-dev libgmock-dev openmpi-bin libopenmpi-dev); fi
missing_apt=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing_apt+=("$p")
  fi
done
if [ ${#missing_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${missing_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing_apt[@]}" >/dev/null
fi

# ---- Python packages -----------------------------------------------------------------------------
# Exact pins where the version matters: oneDNN's v3 API and ABI, and PyTorch 2.13 for parity tests
# (an unpinned torch would pull a multi-GB CUDA build).
PIP_REQUIREMENTS=(
  "onednn==2026.1.0" "onednn-devel==2026.1.0" "torch==2.13.0"
  "numpy>=1.24" "pytest>=7" "pybind11>=2.12" "scikit-build-core>=0.10" "cmake>=3.24" "ninja"
  "matplotlib>=3.7" "scikit-learn>=1.6"
  # The formatter scripts/check_format.sh holds the C++ to (pinned: versions format differently).
  "clang-format==19.1.7"
)
if [ "$RUN_ONLY" = 1 ]; then
  PIP_REQUIREMENTS=("onednn==2026.1.0" "onednn-devel==2026.1.0" "cmake>=3.24" "ninja")
fi
missing_pip=$("$PYTHON" - "${PIP_REQUIREMENTS[@]}" <<'PY'
import sys
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:  # packaging ships with pip's vendored copy
    from pip._vendor.packaging.requirements import Requirement
missing = []
for spec in sys.argv[1:]:
    req = Requirement(spec)
    try:
        have = metadata.version(req.name)
    except metadata.PackageNotFoundError:
        missing.append(spec)
        continue
    if req.specifier and not req.specifier.contains(have, prereleases=True):
        missing.append(spec)
print(" ".join(missing))
PY
)
if [ -n "$missing_pip" ]; then
  echo "bootstrap: installing Python packages: $missing_pip"
  # shellcheck disable=SC2086
  "$PYTHON" -m pip install -q --disable-pip-version-check $missing_pip
fi
echo "bootstrap: dependencies ready"

#!/usr/bin/env bash
# Make .venv with everything Gauntlet needs, on a fresh machine. Idempotent: a second run only re-checks.
# The venv sees system site-packages, so a GPU runner's preinstalled CUDA torch/triton/cupy are used as they are.
# Where no torch is importable, GAUNTLET_TORCH (default torch==2.13.0) is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv --system-site-packages .venv
fi
VPY=.venv/bin/python
"$VPY" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  "$VPY" -m pip install -q "${GAUNTLET_TORCH:-torch==2.13.0}"
fi
# Triton's CPU interpreter (how CI checks Triton kernels) needs numpy < 2.4 with triton 3.6.
"$VPY" -m pip install -q -e ".[test]"
"$VPY" -c "import torch, triton, numpy, hypothesis; print('gauntlet env: torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"

#!/usr/bin/env bash
# Make .venv with everything Gauntlet needs, on a fresh machine. Idempotent: a second run only re-checks.
# The venv sees system site-packages, so a GPU runner's preinstalled CUDA torch/triton/cupy are used as they are.
# Where no torch is importable, GAUNTLET_TORCH (default torch==2.13.0) is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv --system-site-packages .venv
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
fi
VPY=.venv/bin/python
if ! "$VPY" -c "import torch" >/dev/null 2>&1; then
  "$VPY" -m pip install -q "${GAUNTLET_TORCH:-torch==2.13.0}"
fi
# Triton's CPU interpreter (how CI checks Triton kernels) needs numpy < 2.4 with triton 3.6.
# The editable install is redone only when pyproject.toml changed (or none is there): each redo builds it again
# (about 5 s) and setuptools says, every time, that it installs through a meta path finder, about ten lines of
# "Editable installation ... may take precedence during imports". That notice (an InformationOnly warning, raised
# because pyproject's package-dir maps problems/ and solutions/ to package names of their own) says nothing to
# act on, so the one install that remains is run with it filtered out, by its message; other warnings still show.
STAMP=.venv/.gauntlet-installed
WANT="$(pwd) $(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ] || [ ! -x .venv/bin/gauntlet ] \
    || ! "$VPY" -c "from importlib.metadata import version; version('gauntlet')" >/dev/null 2>&1; then
  PYTHONWARNINGS="${PYTHONWARNINGS:+$PYTHONWARNINGS,}ignore:Editable installation:UserWarning" \
    "$VPY" -m pip install -q -e ".[test]"
  echo "$WANT" > "$STAMP"
fi
"$VPY" -c "import torch, triton, numpy, hypothesis; print('gauntlet env: torch', torch.__version__, 'triton', triton.__version__, 'numpy', numpy.__version__)"

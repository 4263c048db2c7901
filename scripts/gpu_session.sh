#!/usr/bin/env bash
# One call on a lent GPU machine (no internet, packages preinstalled): unpack the carried CuTe DSL if present, run
# the suite on cuda with timing, write results + leaderboard under $OUT, print the leaderboard last.
# Usage: OUT=/some/dir bash scripts/gpu_session.sh [extra `gauntlet run` flags]
set -u
OUT=${OUT:-/tmp/gauntlet-out}
mkdir -p "$OUT"
if [ -f .carry/cutedsl.tar.xz ]; then
  mkdir -p /tmp/site && tar xJf .carry/cutedsl.tar.xz -C /tmp/site \
    && export PYTHONPATH=/tmp/site:/tmp/site/nvidia_cutlass_dsl/dsl_packages:${PYTHONPATH:-}
fi
export PYTHONPATH=$PWD:${PYTHONPATH:-} PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  python3 -c "import cupy; print('cupy', cupy.__version__)" || true
  python3 -c "import cutlass; print('cutlass-dsl ok')" || true
  python3 -m gauntlet list
} 2>&1 | tee "$OUT/log.txt"
timeout "${RUN_TIMEOUT:-480}" python3 -m gauntlet run --device cuda --out "$OUT/results.json" --report "$OUT/report" \
  "$@" 2>&1 | tee -a "$OUT/log.txt"

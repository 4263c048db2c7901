#!/usr/bin/env bash
# The main job (README): install what is needed, run the suite on the default device (the GPU if there is one,
# else the CPU), write results/results.json and the leaderboard into reports/out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/gauntlet run --out results/results.json --report reports/out "$@"

#!/usr/bin/env bash
# Predicted against measured cost on this machine's NVIDIA GPUs, energy read by NVML, in about
# six minutes (at most eight):
#
#   scripts/gpu-validate.sh [OUT]          # default OUT: gpu-validation
#   SEEDS="1 2 3" scripts/gpu-validate.sh  # three seeds on one set of profiles (below)
#
# It runs `andreas validate --gpu`: profiles the PyTorch example at three widths on one GPU
# (seconds per epoch and board power), serves a seeded workload of JOBS jobs (default 10) on all
# the GPUs, and writes OUT/validation.json and OUT/validation.png (docs/service-measured.md). QUICK=1
# runs tiny jobs instead: a smoke test of the machine in about a minute, not a measurement.
# Python: $PYTHON, else .venv/bin/python (`make install`), else python3; it needs torch with
# CUDA, nvidia-ml-py and ANDREAS's service dependencies. On a machine without a package index,
# WHEELS=DIR first installs the wheels in DIR (no index, no dependencies) into a private folder.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gpu-validation}
py=${PYTHON:-}
if [ -z "$py" ]; then
  if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi
fi
if [ -n "${WHEELS:-}" ]; then
  site=$(mktemp -d)
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" \
    "$WHEELS"/*.whl
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ! nvidia-smi --query-gpu=index,name,driver_version,power.limit --format=csv; then
  echo "gpu-validate: nvidia-smi failed: no NVIDIA GPU or driver here" >&2
  exit 2
fi
"$py" - <<'PY'
import sys

import torch

if not torch.cuda.is_available():
    sys.exit("gpu-validate: torch sees no CUDA device")
print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
PY
# SEEDS="1 2 3": one run per seed, each in OUT/seed-N, the first profiling and the others
# reusing its profiles (--profiles-from), all within LIMIT_S (default 480 s, one run; 540 s
# for a list). Without SEEDS, one run of SEED (default 1) in OUT.
if [ -z "${SEEDS:-}" ]; then
  timeout "${LIMIT_S:-480}" "$py" -m andreas validate --gpu --jobs "${JOBS:-10}" \
    --seed "${SEED:-1}" ${QUICK:+--quick} --out "$out"
  exit 0
fi
deadline=$(( $(date +%s) + ${LIMIT_S:-540} ))
first=""
for seed in $SEEDS; do
  left=$(( deadline - $(date +%s) ))
  if [ "$left" -le 0 ]; then
    echo "gpu-validate: LIMIT_S spent before seed $seed" >&2
    exit 124
  fi
  timeout "$left" "$py" -m andreas validate --gpu --jobs "${JOBS:-10}" --seed "$seed" \
    ${QUICK:+--quick} ${first:+--profiles-from "$first"} --out "$out/seed-$seed"
  first=${first:-$out/seed-$seed/work/profiles-measured.csv}
done

#!/bin/bash
# One GPU call: confirmed tuning winners next to the vendor library (benchmarks/confirm_h200.py).
# Run from the repository root on the H200 machine; results go to $OUT (at most 8 files).
# Carried, git-ignored inputs: .whl/ (cp312 wheels the image lacks: pydantic, pydantic-core,
# pydantic-settings, annotated-types, typing-inspection, ...), .kp-cutlass/cutlass-*-include.tar.xz
# (CUTLASS include/, tools/util/include/ and examples/88_hopper_fmha/), unless CUTLASS_DIR is set.
#   bash benchmarks/confirm_h200.sh                 # every phase, deadline 500 s after setup
#   bash benchmarks/confirm_h200.sh --phases plan,build,gemm,ncu
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
PYTHONUNBUFFERED=1 python3 benchmarks/confirm_h200.py --out "$OUT" --jobs 16 \
  --deadline-s $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )) "$@" 2>&1 | tee "$OUT/driver.log"
echo "total $(( $(date +%s) - T0 )) s"

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
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/kp_install.log 2>&1 \
  || { tail -20 /tmp/kp_install.log; exit 1; }
if [ -z "$CUTLASS_DIR" ]; then
  tarball=$(ls .kp-cutlass/cutlass-*-include.tar.xz 2>/dev/null | head -1)
  if [ -n "$tarball" ]; then
    mkdir -p /tmp/cutlass && tar -xJf "$tarball" -C /tmp/cutlass && export CUTLASS_DIR=/tmp/cutlass
  fi
fi
echo "setup took $(( $(date +%s) - T0 )) s; CUTLASS_DIR=$CUTLASS_DIR"
PYTHONUNBUFFERED=1 python3 benchmarks/confirm_h200.py --out "$OUT" --jobs 16 \
  --deadline-s $(( ${BUDGET_S:-540} - ($(date +%s) - T0) )) "$@" 2>&1 | tee "$OUT/driver.log"
echo "total $(( $(date +%s) - T0 )) s"

#!/bin/bash
# One H200: the same GEMM batch in-process and through `--cluster local` (Dask), side by side.
# Run on the GPU machine from the repository root with the git-ignored inputs .whl/ and .kp-cutlass/
# present (see benchmarks/scaleout_setup.sh):
#   bash benchmarks/scaleout_h200.sh
# Writes $OUT/scaleout_h200.json (copy it to benchmarks/results/) plus the per-run JSONs in $OUT/runs.
# About 6-9 minutes: a cold warm-up build (~3 GEMM shapes x 6 configs, --jobs 16), then 2 alternating
# pairs of in-process / cluster runs on the warm cache.  Extra arguments go to scaleout_bench.py
# (e.g. --reps 1, --workloads 2, --budget 4 to make it shorter).
set -o pipefail
T0=$(date +%s)
source benchmarks/scaleout_setup.sh || exit 1
echo "setup took $(( $(date +%s) - T0 )) s"
PYTHONUNBUFFERED=1 python3 benchmarks/scaleout_bench.py h200 --out "$OUT" --work "$OUT/runs" --jobs 16 \
  --deadline-s $(( ${BUDGET_S:-570} - ($(date +%s) - T0) )) "$@" 2>&1 | tee "$OUT/driver.log"
rc=$?
rm -rf "$OUT"/runs/cache* "$OUT"/runs/*/build  # build trees and binaries stay on the device
# the device tool returns at most 8 files: the per-run JSONs and stores travel as one archive
tar -czf "$OUT/runs.tgz" -C "$OUT" runs && rm -rf "$OUT/runs"
echo "total $(( $(date +%s) - T0 )) s"
exit $rc

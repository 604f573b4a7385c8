#!/bin/bash
# One H200 call: tune the grouped and MoE workloads -> export -> check the exported operators, on the
# same GPU minutes apart.
#
# Why: the exported operators are held to the confirmed times of the run they came from, and runs
# recorded in other calls are 5-17 % away from the same binary timed now (another machine of the pool,
# clocks under the power cap), so the run has to be made in the same call (as
# benchmarks/export_sameday_h200.sh does for the GEMMs).  Steps:
#   1. benchmarks/confirm_h200.py --phases plan,build,$KINDS: `kernelpilot tune` of those kinds'
#      workloads of cuda_kinds_common.py (model proposer, confirmation, vendor baseline; $BUDGET configs
#      per workload), from the build cache $CACHE (prebuilt on a CPU: benchmarks/README.md);
#   2. `kernelpilot export` of the run documents (one per kind) at the defaults;
#   3. benchmarks/export_kinds_h200.sh: pip install of the export, then benchmarks/export_kinds_h200.py
#      (correctness under the three fallbacks, bad inputs, torch.compile, and speed: the exported op, the
#      vendor and the row's tuning program from the run's build cache in interleaved rounds, next to the
#      run's confirmed time).
# Run from the repository root on the device; carried, git-ignored: .whl/ and .kp-cutlass/ (as for
# confirm_h200.sh).  Results go to $OUT: tune.tgz (summary.json, run_kinds.json, log.txt, driver.log,
# export.log) and the check's files (export_kinds_h200.json/.log, dispatch.json, install.log, nvidia-smi.txt).
#   BUDGET_S=560 CACHE=/tmp/kp_cache bash benchmarks/export_kinds_sameday_h200.sh
# The causal grouped-query prefill rows (SDPA serves them by default; the shared-K/V launch of template 5
# checked through the exported operator, each row's kernel kept):
#   KINDS=fa_prefill BUDGET=fa_prefill=16 MIN_VENDOR_RATIO=0 BUDGET_S=560 bash benchmarks/export_kinds_sameday_h200.sh
# Every carried .kp-prebuilt-*/cache.tar.xz is unpacked into $CACHE first (content-addressed build cache).
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
BUDGET_S=${BUDGET_S:-560}
KINDS=${KINDS:-moe_gemm,grouped_gemm}
BUDGET=${BUDGET:-moe_gemm=6,grouped_gemm=6}
TUNE_S=${TUNE_S:-260}
CONFIRM_ROUNDS=${CONFIRM_ROUNDS:-3}   # the tuner's confirmation rounds (its default 3)
ROUNDS=${ROUNDS:-5}                   # the check's interleaved timing rounds per tuned problem
CACHE=${CACHE:-/tmp/kp_cache}
mkdir -p "$OUT/tune" "$CACHE"
for t in .kp-prebuilt-*/cache.tar.xz; do if [ -f "$t" ]; then tar -xJf "$t" -C "$CACHE"; fi; done
source benchmarks/device_setup.sh
W=/tmp/kp_kinds_sameday
rm -rf "$W" && mkdir -p "$W"
PYTHONUNBUFFERED=1 python3 benchmarks/confirm_h200.py --out "$OUT/tune" --work "$W/work" --jobs 16 \
  --deadline-s "$TUNE_S" --phases "plan,build,$KINDS" --budget "$BUDGET" --cache "$CACHE" \
  --confirm-rounds "$CONFIRM_ROUNDS" > "$OUT/tune/driver.log" 2>&1
RC=$?
tail -5 "$OUT/tune/driver.log"
[ $RC -eq 0 ] && [ -f "$OUT/tune/run_kinds.json" ] || { echo "tune failed (rc=$RC)"; exit 1; }
echo "tune: $(( $(date +%s) - T0 )) s"
python3 -c "
import json, sys
for kind, run in json.load(open('$OUT/tune/run_kinds.json')).items():
    json.dump(run, open(f'$W/run_{kind}.json', 'w'))
"
python3 -m kernelpilot export "$W"/run_*.json --out "$W/kp_kinds" --name kp_kinds \
  ${MIN_VENDOR_RATIO:+--min-vendor-ratio "$MIN_VENDOR_RATIO"} > "$OUT/tune/export.log" 2>&1 \
  || { tail -20 "$OUT/tune/export.log"; exit 1; }
echo "export: $(( $(date +%s) - T0 )) s"
EXPORT="$W/kp_kinds" NAME=kp_kinds OUT="$OUT" BUDGET_S=$(( BUDGET_S - ($(date +%s) - T0) )) \
  RUNS="$OUT/tune/run_kinds.json" PROGRAM_CACHE="$CACHE" ROUNDS="$ROUNDS" bash benchmarks/export_kinds_h200.sh
tar -czf "$OUT/tune.tgz" -C "$OUT" tune && rm -rf "$OUT/tune"  # the device returns at most 8 files
echo "total $(( $(date +%s) - T0 )) s"

#!/bin/bash
# One H200 call: tune -> export -> call on the same GPU, minutes apart.
#
# Why: the exported operator is held to the confirmed times of the run it came from.  Checked against
# runs recorded in other calls, the tuning program itself came out 5-17 % slower than its own record
# (another machine of the pool, another temperature, and, with longer timed windows, the 700 W cap
# lowering the clocks under sustained load), so only a run made in the same call says whether the
# export loses anything.  Steps:
#   1. `kernelpilot tune examples/tune_llama3_gemm_sm90.yaml` (confirmation and cuBLAS baseline on) with
#      --target-ms/--reps of a sustained window (default 30 ms x 7: what a model's back-to-back GEMMs see;
#      the 10 ms x 5 default swings by +-5 % with the clocks on the large shapes) and --budget-configs
#      (default 12, to fit one lease with the export build);
#   2. `kernelpilot export` of that run (benchmarks/export_speed_h200.py prepare: the export plus the
#      tuning program of every exported kernel and of every vendor-served shape);
#   3. benchmarks/export_speed_h200.sh: pip install of the export, nvcc of the programs, then interleaved
#      rounds of program / exported op / cuBLAS with the same timing window as the run.
# Run from the repository root on the device; carried, git-ignored: .whl/ (wheels the image lacks) and
# .kp-cutlass/cutlass-*-include.tar.xz.  Results go to $OUT (sameday_*.json/log, export_speed_h200*).
#   BUDGET_S=570 bash benchmarks/export_sameday_h200.sh
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
BUDGET_S=${BUDGET_S:-570}
TARGET_MS=${TARGET_MS:-30}
REPS=${REPS:-7}
BUDGET_CONFIGS=${BUDGET_CONFIGS:-12}
ROUNDS=${ROUNDS:-7}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
echo "setup: $(( $(date +%s) - T0 )) s; CUTLASS_DIR=$CUTLASS_DIR" > "$OUT/sameday_driver.log"
W=/tmp/kp_sameday
rm -rf "$W" && mkdir -p "$W"
cmd=(python3 -m kernelpilot tune examples/tune_llama3_gemm_sm90.yaml --jobs 16 --budget-configs "$BUDGET_CONFIGS"
     --target-ms "$TARGET_MS" --reps "$REPS" --cache-dir "$W/cache" --store "$W/results.sqlite" --out "$W/run"
     --no-plots)
echo "\$ ${cmd[*]}" | tee -a "$OUT/sameday_driver.log"
"${cmd[@]}" > "$OUT/sameday_tune.log" 2>&1
RC=$?
tail -25 "$OUT/sameday_tune.log"
cp "$W/run/run.json" "$OUT/sameday_run.json" 2>/dev/null
[ $RC -eq 0 ] || { echo "tune failed (rc=$RC)"; exit 1; }
T1=$(date +%s)
echo "tune: $((T1 - T0)) s" | tee -a "$OUT/sameday_driver.log"
python3 benchmarks/export_speed_h200.py prepare --dir "$W/speed" "$W/run/run.json" >> "$OUT/sameday_driver.log" 2>&1 \
  || { tail -20 "$OUT/sameday_driver.log"; exit 1; }
DIR="$W/speed" OUT="$OUT" BUDGET_S=$(( BUDGET_S - ($(date +%s) - T0) )) bash benchmarks/export_speed_h200.sh \
  --rounds "$ROUNDS" --target-ms "$TARGET_MS" --reps "$REPS"
cp "$W/speed/kp_h200/dispatch.json" "$OUT/sameday_dispatch.json"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,enforced.power.limit,temperature.gpu \
  --format=csv > "$OUT/sameday_nvidia-smi.txt" 2>&1
echo "total $(( $(date +%s) - T0 )) s" | tee -a "$OUT/sameday_driver.log"

#!/bin/bash
# One GPU call: (1) a COLD run of examples/tune_llama3_gemm_sm90.yaml at the library defaults (empty
# build cache and store, confirmation and vendor baseline on; --jobs 16 as in every H200 record), and
# (2) the independent check of a stream-K GEMM winner against cuBLAS (benchmarks/confirm_crosscheck_h200.py:
# the run's own confirmation path, then ncu over the same CUDA graphs on both sides).  Confirmation runs
# after each group's search, so the run document's confirm.wall_s is exactly the wall time a run with
# --finalists 0 --no-baseline would not spend; the same run is the library-default GEMM record.
# With SIDE=1 (default) the check runs beside the cold run's first compile wave, when the GPU is idle
# and the compiles are niced: the check records its CPU seconds, an upper bound of what it took from
# the compiles (report the cold wall both as measured and less the check's whole wall, the bound that
# favours confirmation least).  SIDE=0 runs them one after the other; COLD=0 runs the check alone.  nvidia-smi samples clocks, power
# and throttle reasons all along.  Run from the repository root on the H200; results go to $OUT (at
# most 8 files).  Carried, git-ignored inputs: .whl/ (wheels, as for confirm_h200.sh),
# .kp-cutlass/cutlass-*-include.tar.xz, and the winner's prebuilt binary in the build cache named by
# PREBUILT (default .kp-cache/crosscheck; a missing binary is built there, ~80 s).
#   BUDGET_S=350 bash benchmarks/confirm_cost_h200.sh
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
BUDGET_S=${BUDGET_S:-350}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$q --format=csv,noheader >/dev/null 2>&1 || q=${q/clocks_event_reasons/clocks_throttle_reasons}
nvidia-smi --query-gpu=$q --format=csv -lms 250 > "$OUT/smi.csv" 2>&1 &
SMI=$!
rm -rf /tmp/kp_cold && mkdir -p /tmp/kp_cold
cmd=(python3 -m kernelpilot tune examples/tune_llama3_gemm_sm90.yaml --jobs 16 --cache-dir /tmp/kp_cold/cache
     --store /tmp/kp_cold/results.sqlite --out /tmp/kp_cold/out --no-plots --json)
echo "\$ ${cmd[*]}" > "$OUT/llama3_log.txt"
crosscheck() {
  echo "crosscheck start $(( $(date +%s) - T0 )) s" | tee -a "$OUT/driver.log"
  PYTHONUNBUFFERED=1 python3 benchmarks/confirm_crosscheck_h200.py --cache "${PREBUILT:-.kp-cache/crosscheck}" \
    --out /tmp/kp_xc --jobs 16 ${XC_ARGS:---ncu graph} 2>&1 | tee -a "$OUT/driver.log"
  cp /tmp/kp_xc/crosscheck.json "$OUT/" 2>/dev/null
  tar -czf "$OUT/crosscheck_ncu.tgz" -C /tmp/kp_xc . 2>/dev/null
  echo "crosscheck end $(( $(date +%s) - T0 )) s" | tee -a "$OUT/driver.log"
}
if [ "${COLD:-1}" = 0 ]; then  # the check alone
  crosscheck; kill $SMI 2>/dev/null; echo "total $(( $(date +%s) - T0 )) s" | tee -a "$OUT/driver.log"; exit 0
fi
[ "${SIDE:-1}" = 1 ] || crosscheck
left=$(( BUDGET_S - ($(date +%s) - T0) - 10 ))
echo "cold run start $(( $(date +%s) - T0 )) s, limit ${left} s" | tee -a "$OUT/driver.log"
t1=$(date +%s)
PYTHONUNBUFFERED=1 timeout -k 5 "$left" "${cmd[@]}" >> "$OUT/llama3_log.txt" 2>&1 &
COLD=$!
[ "${SIDE:-1}" = 1 ] && crosscheck
wait $COLD
rc=$?
echo "cold run rc=$rc wall $(( $(date +%s) - t1 )) s" | tee -a "$OUT/driver.log"
cp /tmp/kp_cold/out/run.json "$OUT/llama3_run.json" 2>/dev/null
kill $SMI 2>/dev/null
echo "total $(( $(date +%s) - T0 )) s" | tee -a "$OUT/driver.log"

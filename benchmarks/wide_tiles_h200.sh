#!/bin/bash
# One H200 call: the 192-wide grouped / MoE tiles (benchmarks/wide_tiles_h200.yaml) measured by
# `kernelpilot tune` (every config of the filtered space, then 3 finalists + the default confirmed in
# 3 interleaved rounds with the vendor paths: a torch.mm loop and torch._grouped_mm).  From the
# repository root, carrying .whl, .kp-cutlass and .kp-prebuilt-wide (programs prebuilt on a CPU with
# the same command and --cache-dir; what is missing is built here on 16 cores):
#   bash benchmarks/wide_tiles_h200.sh
# Writes into $OUT: run.json (the tuner's run document), results.sqlite, log.txt, nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/kp_cache
source benchmarks/device_setup.sh
if [ -f .kp-prebuilt-wide/cache.tar.xz ]; then tar -xJf .kp-prebuilt-wide/cache.tar.xz -C /tmp/kp_cache; fi
timeout "${BUDGET_S:-540}" kernelpilot tune benchmarks/wide_tiles_h200.yaml --store "$OUT/results.sqlite" \
  --out /tmp/kp_wide --jobs 16 --cache-dir /tmp/kp_cache --no-plots --finalists 3 --confirm-rounds 3 \
  > "$OUT/log.txt" 2>&1
echo "tune rc=$?"
cp /tmp/kp_wide/run.json "$OUT/run.json" 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv > "$OUT/nvidia_smi.txt"
tail -25 "$OUT/log.txt"
echo "total $(( $(date +%s) - T0 )) s"

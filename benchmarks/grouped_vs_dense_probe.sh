#!/bin/bash
# One GPU call: the grouped kernel against the dense kernel of the same tile and against cuBLAS, on the
# grouped workloads of few large GEMMs (benchmarks/grouped_vs_dense_probe.py run).  From the repository
# root, carrying .whl and .kp-grouped-dense (the two programs and their manifest, built on a CPU by
# `python benchmarks/grouped_vs_dense_probe.py build --dir .kp-grouped-dense`).
# Writes $OUT/grouped_vs_dense.json, grouped_vs_dense_log.txt and nvidia_smi.txt.  PER_VARIANT=1 runs the
# one-group programs once per raster / swizzle variant (--per-variant) and samples the SM clock and power
# every 200 ms into $OUT/clocks.csv, to be matched with the record's spans.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-3}
mkdir -p "$OUT"
source benchmarks/device_setup.sh
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt"
DIR=$(pwd)/.kp-grouped-dense
FLAG=""
if [ "${PER_VARIANT:-0}" = 1 ]; then
  FLAG=--per-variant
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$OUT/clocks.csv" &
  SAMPLER=$!
fi
cd benchmarks && python3 grouped_vs_dense_probe.py run --dir "$DIR" --rounds "$ROUNDS" --out "$OUT/grouped_vs_dense.json" \
  $FLAG 2>&1 | tee "$OUT/grouped_vs_dense_log.txt"
rc=$?
if [ -n "${SAMPLER:-}" ]; then kill "$SAMPLER"; fi
echo "wall $(( $(date +%s) - T0 )) s"
exit $rc

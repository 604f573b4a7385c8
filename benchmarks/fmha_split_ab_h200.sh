#!/bin/bash
# One GPU call: the split-KV decode programs of FMHA template 4 and of the earlier revision side by side
# (benchmarks/fmha_split_ab.py run).  From the repository root, carrying .whl and .kp-split-ab/programs.tar.xz
# (the programs and their manifest, made on a CPU by `fmha_split_ab.py build --dir DIR` and
# `tar -C DIR -cJf .kp-split-ab/programs.tar.xz manifest.json case*_old case*_new`; benchmarks/README.md).
# Writes $OUT/fmha_split_ab.json, fmha_split_ab_log.txt and nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-6}
mkdir -p "$OUT" /tmp/kp_split
source benchmarks/device_setup.sh
tar -xJf .kp-split-ab/programs.tar.xz -C /tmp/kp_split || { echo "no .kp-split-ab/programs.tar.xz"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt"
cd benchmarks && python3 fmha_split_ab.py run --dir /tmp/kp_split --rounds "$ROUNDS" --out "$OUT/fmha_split_ab.json" \
  2>&1 | tee "$OUT/fmha_split_ab_log.txt"
rc=$?
echo "wall $(( $(date +%s) - T0 )) s"
exit $rc

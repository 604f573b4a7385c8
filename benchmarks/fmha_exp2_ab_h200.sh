#!/bin/bash
# One GPU call: the FMHA prefill winners with and without exp2 emulation side by side
# (benchmarks/fmha_exp2_ab.py run).  From the repository root, carrying .whl and .kp-exp2-ab/programs.tar.xz
# (the programs and their manifest, made on a CPU by `fmha_exp2_ab.py build --dir DIR` and
# `tar -C DIR -cJf .kp-exp2-ab/programs.tar.xz manifest.json case*_ex?`; benchmarks/README.md).
# Writes $OUT/fmha_exp2_ab.json, fmha_exp2_ab_log.txt and nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-6}
mkdir -p "$OUT" /tmp/kp_exp2
source benchmarks/device_setup.sh
tar -xJf .kp-exp2-ab/programs.tar.xz -C /tmp/kp_exp2 || { echo "no .kp-exp2-ab/programs.tar.xz"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt"
cd benchmarks && python3 fmha_exp2_ab.py run --dir /tmp/kp_exp2 --rounds "$ROUNDS" --out "$OUT/fmha_exp2_ab.json" \
  2>&1 | tee "$OUT/fmha_exp2_ab_log.txt"
rc=$?
echo "wall $(( $(date +%s) - T0 )) s"
exit $rc

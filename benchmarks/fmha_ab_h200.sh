#!/bin/bash
# One GPU call of an FMHA A/B script, benchmarks/fmha_${AB}_ab.py run, AB one of ftz, exp2, split, gqa, lpt: its
# variants side by side.  From the repository root, carrying .whl, .kp-cutlass and
# .kp-${AB}-ab/programs.tar.xz (the programs and their manifest, made on a CPU by
# `fmha_${AB}_ab.py build --dir DIR` and `tar -C DIR -cJf .kp-${AB}-ab/programs.tar.xz manifest.json` plus
# the binaries; benchmarks/README.md).  Writes $OUT/fmha_${AB}_ab.json, fmha_${AB}_ab_log.txt and nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-6}
case "$AB" in ftz|exp2|split|gqa|lpt) ;; *) echo "AB=$AB: one of ftz, exp2, split, gqa, lpt"; exit 2;; esac
mkdir -p "$OUT" "/tmp/kp_$AB"
source benchmarks/device_setup.sh
tar -xJf ".kp-$AB-ab/programs.tar.xz" -C "/tmp/kp_$AB" || { echo "no .kp-$AB-ab/programs.tar.xz"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt"
cd benchmarks && python3 "fmha_${AB}_ab.py" run --dir "/tmp/kp_$AB" --rounds "$ROUNDS" --out "$OUT/fmha_${AB}_ab.json" \
  2>&1 | tee "$OUT/fmha_${AB}_ab_log.txt"
rc=$?
echo "wall $(( $(date +%s) - T0 )) s"
exit $rc

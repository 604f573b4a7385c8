#!/bin/bash
# One GPU call: the FMHA winners with and without -ftz=true side by side (benchmarks/fmha_ftz_ab.py run).
# From the repository root, carrying .whl, .kp-cutlass and .kp-ftz-ab/programs.tar.xz (the 8 programs and
# their manifest, made on a CPU by `fmha_ftz_ab.py build --dir DIR` and `tar -C DIR -cJf ... .`;
# benchmarks/README.md).  Writes $OUT/fmha_ftz_ab.json, fmha_ftz_ab_log.txt and nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
ROUNDS=${ROUNDS:-6}
mkdir -p "$OUT" /tmp/kp_ab
source benchmarks/device_setup.sh
tar -xJf .kp-ftz-ab/programs.tar.xz -C /tmp/kp_ab || { echo "no .kp-ftz-ab/programs.tar.xz"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv > "$OUT/nvidia_smi.txt"
cd benchmarks && python3 fmha_ftz_ab.py run --dir /tmp/kp_ab --rounds "$ROUNDS" --out "$OUT/fmha_ftz_ab.json" \
  2>&1 | tee "$OUT/fmha_ftz_ab_log.txt"
rc=$?
echo "wall $(( $(date +%s) - T0 )) s"
exit $rc

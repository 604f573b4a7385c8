#!/bin/bash
# One device call: benchmarks/pergroup_mixed_probe.py (per-group launches with mixed token-side widths
# against their single-width twins, the best configs of earlier runs and a torch.mm loop, interleaved
# rounds) on the rows of few large GEMMs.  From the repository root, carrying .whl, .kp-cutlass and
# .kp-prebuilt-pgm (the programs prebuilt on a CPU with `pergroup_mixed_probe.py --plan --cache DIR`,
# then `tar -C DIR -cJf .kp-prebuilt-pgm/cache.tar.xz .`; what is missing is built here on 16 cores):
#   bash benchmarks/pergroup_mixed_probe_h200.sh
# Writes into $OUT: pergroup_mixed.json, log.txt, nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/kp_cache
source benchmarks/device_setup.sh
if [ -f .kp-prebuilt-pgm/cache.tar.xz ]; then tar -xJf .kp-prebuilt-pgm/cache.tar.xz -C /tmp/kp_cache; fi
timeout "${BUDGET_S:-520}" python3 benchmarks/pergroup_mixed_probe.py --cache /tmp/kp_cache \
  --out "$OUT/pergroup_mixed.json" --rounds "${ROUNDS:-5}" ${ONLY:+--only "$ONLY"} > "$OUT/log.txt" 2>&1
echo "probe rc=$?"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv > "$OUT/nvidia_smi.txt"
tail -40 "$OUT/log.txt"
echo "total $(( $(date +%s) - T0 )) s"

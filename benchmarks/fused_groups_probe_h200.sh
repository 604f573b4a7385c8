#!/bin/bash
# One device call: benchmarks/fused_groups_probe.py (the fused-groups launch against the same tile as a
# ptr-array launch, the best configs of earlier runs and a torch.mm loop, interleaved rounds) on the rows
# of few large GEMMs.  From the repository root, carrying .whl, .kp-cutlass and .kp-prebuilt-fused (the
# programs prebuilt on a CPU with `fused_groups_probe.py --plan --cache DIR`, then
# `tar -C DIR -cJf .kp-prebuilt-fused/cache.tar.xz .`; what is missing is built here on 16 cores):
#   bash benchmarks/fused_groups_probe_h200.sh
# Writes into $OUT: fused_groups.json, log.txt, nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/kp_cache
source benchmarks/device_setup.sh
if [ -f .kp-prebuilt-fused/cache.tar.xz ]; then tar -xJf .kp-prebuilt-fused/cache.tar.xz -C /tmp/kp_cache; fi
timeout "${BUDGET_S:-520}" python3 benchmarks/fused_groups_probe.py --cache /tmp/kp_cache \
  --out "$OUT/fused_groups.json" --rounds "${ROUNDS:-5}" ${ONLY:+--only "$ONLY"} > "$OUT/log.txt" 2>&1
echo "probe rc=$?"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv > "$OUT/nvidia_smi.txt"
tail -40 "$OUT/log.txt"
echo "total $(( $(date +%s) - T0 )) s"

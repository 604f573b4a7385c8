#!/bin/bash
# One H200 call of the attention / decode / grouped / MoE workloads at the tuner's library defaults:
# kernelpilot tune with the model proposer and 16 configs per workload (the library default, the
# default config included), confirmation (3 finalists + the default, 3 rounds, extra rounds when
# unstable) and the vendor baseline (every PyTorch path, each from a rested GPU), through
# benchmarks/confirm_h200.py; plus the device-to-device copy bandwidth of the same call.
# Every program comes prebuilt on a CPU (grouped / MoE: .kp-prebuilt-b16/cache.tar.xz and, for the
# swap-AB family, .kp-prebuilt-swap/cache.tar.xz; attention: the fa_prefill and fa_decode phases' caches,
# FMHA prefill template 5 in .kp-prebuilt-fa5/cache.tar.xz; benchmarks/README.md); any the caches lack is
# built here on 16 cores.
# From the repository root, carrying .whl, .kp-cutlass and the pair's caches:
#   PHASES=fa_prefill,fa_decode BUDGET_S=560 bash benchmarks/kinds_default_h200.sh
#   PHASES=moe_gemm,grouped_gemm BUDGET_S=560 bash benchmarks/kinds_default_h200.sh
# SPACE (JSON) adds a space filter to the grouped / MoE kinds, e.g. SPACE='{"swap_ab": [false]}' to leave the
# swap-AB family out; the prebuilt cache must then come from a prebuild with the same --space.
# WORKLOADS (comma list) runs only those workloads of the phases' kinds, e.g. the rows a change is meant for.
# RESUME names a carried folder with the store_<phase>.sqlite files of an earlier call: its tune phases go on
# from them instead of measuring again. BUILD_LABELS (comma list of config labels) builds only those programs,
# e.g. the finalists such a resumed call confirms again (its search is served from the store).
# Writes into $OUT: summary.json, run_kinds.json, log.txt, driver.log, hbm_copy.json, nvidia_smi.txt and
# store_<phase>.sqlite per tune phase.
set -o pipefail
OUT=${OUT:-/tmp/out}
PHASES=${PHASES:-fa_prefill,fa_decode,moe_gemm,grouped_gemm}
mkdir -p "$OUT" /tmp/kp_cache
# every carried prebuilt cache (.kp-prebuilt-b16, -swap, -fa3): content-addressed
for t in .kp-prebuilt-*/cache.tar.xz; do if [ -f "$t" ]; then tar -xJf "$t" -C /tmp/kp_cache; fi; done
timeout 60 python3 benchmarks/hbm_copy_h200.py --out "$OUT/hbm_copy.json" 2>&1 | tail -1
BUDGETS=$(echo "$PHASES" | tr ',' '\n' | sed 's/$/=16/' | paste -sd, -)
BUDGET_S=${BUDGET_S:-560} bash benchmarks/confirm_h200.sh --phases "plan,build,$PHASES" --budget "$BUDGETS" \
  --cache /tmp/kp_cache ${SPACE:+--space "$SPACE"} ${RESUME:+--resume "$RESUME"} \
  ${WORKLOADS:+--workloads "$WORKLOADS"} ${BUILD_LABELS:+--build-labels "$BUILD_LABELS"} 2>&1 | tail -40
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit --format=csv > "$OUT/nvidia_smi.txt"

#!/bin/bash
# One short GPU call on the grouped / MoE workloads a per-group torch.mm loop wins: which cuBLAS kernels
# the loop launches (vendor_kernels_probe.py) and the SM clock / power under load of the confirmed
# winner and of the loop (grouped_load_probe.py).  From the repository root, carrying .whl, .kp-cutlass
# and .kp-prebuilt-b16 (the winners' programs prebuilt on a CPU):
#   RUNS=benchmarks/results/kinds_default_h100_grouped_r2_run_kinds.json bash benchmarks/grouped_gap_probe.sh
# Writes into $OUT: vendor_kernels.json, load.json, log.txt, nvidia_smi.txt.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
RUNS=${RUNS:-benchmarks/results/kinds_default_h100_grouped_r2_run_kinds.json}
LOSERS=${LOSERS:-mixtral_8x7b_down,qwen3_8b_mlp_down_varlen16,phi3_medium_qkv_varlen16,llama3_8b_mlp_up_varlen8}
LOAD=${LOAD:-mixtral_8x7b_down,qwen3_8b_mlp_down_varlen16}
mkdir -p "$OUT" /tmp/kp_cache
source benchmarks/device_setup.sh > "$OUT/log.txt" 2>&1
if [ -f .kp-prebuilt-b16/cache.tar.xz ]; then tar -xJf .kp-prebuilt-b16/cache.tar.xz -C /tmp/kp_cache; fi
python3 benchmarks/vendor_kernels_probe.py --runs "$RUNS" --workloads "$LOSERS" --out "$OUT/vendor_kernels.json" \
  >> "$OUT/log.txt" 2>&1
echo "vendor_kernels rc=$?"
python3 benchmarks/grouped_load_probe.py --runs "$RUNS" --workloads "$LOAD" --cache /tmp/kp_cache \
  --seconds "${SECONDS_PER_SIDE:-2.5}" --out "$OUT/load.json" >> "$OUT/log.txt" 2>&1
echo "load rc=$?"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv > "$OUT/nvidia_smi.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
try:
    v = json.load(open(f"{out}/vendor_kernels.json"))
    for n, w in v["workloads"].items():
        print(n, round(w["loop_kernel_ms"], 4), round(w["loop_tflops"]))
        for k, s in w["kernels"].items():
            print("   ", s["count"], round(s["median_ms"], 4), k[:110])
except Exception as e:  # noqa: BLE001
    print("vendor_kernels:", e)
try:
    d = json.load(open(f"{out}/load.json"))
    for n, w in d["workloads"].items():
        for side in ("tuned", "torch_mm_loop"):
            s = w[side]
            print(n, side, s.get("ms_per_call"), s.get("sm_mhz_median"), s.get("power_w_median"), s.get("clock_event_reasons"), s.get("status", ""), s.get("message", "")[:80])
except Exception as e:  # noqa: BLE001
    print("load:", e)
PY
tail -5 "$OUT/log.txt"
echo "total $(( $(date +%s) - T0 )) s"

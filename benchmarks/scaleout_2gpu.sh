#!/bin/bash
# Two GPUs of one host (2x H200): 8 GEMM workloads, COLD build cache per phase,
# 1 GPU vs 2 GPUs with --gpus and with --cluster local; wall time split into build and benchmark;
# same best configs check.  A phase is ~4-5 minutes (6 cold builds at --jobs 30, then 48 benchmarks),
# so run one phase per invocation, from the repository root, with .whl/ and .kp-cutlass/ present
# (see benchmarks/scaleout_setup.sh):
#   bash benchmarks/scaleout_2gpu.sh 1gpu        # --gpus 0
#   bash benchmarks/scaleout_2gpu.sh 2gpu        # --gpus 0,1
#   bash benchmarks/scaleout_2gpu.sh cluster2    # --cluster local --gpus 0,1
#   (optional: cluster1 = --cluster local --gpus 0)
# Each invocation writes $OUT/scaleout_2gpu.<phase>.json (plus runs/<phase>.run.json); then, anywhere:
#   python benchmarks/scaleout_bench.py merge --out benchmarks/results FILE1 FILE2 FILE3
# which writes benchmarks/results/scaleout_2gpu.json: per phase wall / build_busy_s / bench_busy_s,
# speed-ups 2gpu_vs_1gpu, cluster2_vs_1gpu, and whether the same configs and best configs came out.
# Extra arguments go to scaleout_bench.py (e.g. --workloads 8 --budget 4 for a shorter phase).
set -o pipefail
T0=$(date +%s)
PHASES=${1:-1gpu}
shift || true
source benchmarks/scaleout_setup.sh || exit 1
echo "setup took $(( $(date +%s) - T0 )) s"
PYTHONUNBUFFERED=1 python3 benchmarks/scaleout_bench.py 2gpu --phases "$PHASES" --out "$OUT" --work "$OUT/runs" \
  --jobs 30 --name "scaleout_2gpu.${PHASES//,/_}.json" "$@" 2>&1 | tee "$OUT/driver.log"
rc=$?
rm -rf "$OUT"/runs/cache_* "$OUT"/runs/*/build
echo "total $(( $(date +%s) - T0 )) s"
exit $rc

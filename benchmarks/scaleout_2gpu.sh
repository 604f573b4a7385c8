#!/bin/bash
# Issue 9, two GPUs of one host (kind nvidia-h200-x2): 8 GEMM workloads, COLD build cache per phase,
# 1 GPU vs 2 GPUs with --gpus and with --cluster local; wall time split into build and benchmark;
# same best configs check.  Each phase is ~4-6 minutes, so run them in separate device calls:
#   run(command="bash benchmarks/scaleout_2gpu.sh 1gpu,2gpu", carry=[".whl", ".kp-cutlass"], kind="nvidia-h200-x2")
#   run(command="bash benchmarks/scaleout_2gpu.sh cluster2", carry=[".whl", ".kp-cutlass"], kind="nvidia-h200-x2")
# (optional: cluster1).  Each call writes $OUT/scaleout_2gpu.<phases>.json; then, here:
#   python benchmarks/scaleout_bench.py merge --out benchmarks/results FILE1 FILE2 ...
# which writes benchmarks/results/scaleout_2gpu.json with the speed-ups and the config comparison.
set -o pipefail
T0=$(date +%s)
PHASES=${1:-1gpu,2gpu}
shift || true
source benchmarks/scaleout_setup.sh || exit 1
echo "setup took $(( $(date +%s) - T0 )) s"
PYTHONUNBUFFERED=1 python3 benchmarks/scaleout_bench.py 2gpu --phases "$PHASES" --out "$OUT" --work "$OUT/runs" \
  --jobs 30 --name "scaleout_2gpu.${PHASES//,/_}.json" "$@" 2>&1 | tee "$OUT/driver.log"
rc=$?
rm -rf "$OUT"/runs/cache_* "$OUT"/runs/*/build
echo "total $(( $(date +%s) - T0 )) s"
exit $rc

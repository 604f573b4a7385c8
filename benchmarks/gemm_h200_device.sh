#!/bin/bash
# Driver for one H200 run (from the repository root; results go to $OUT, default /tmp/out).
# Carried (git-ignored) inputs: .kp-whl/ (pydantic, pydantic-settings wheels for Python 3.12),
# .kp-cutlass/cutlass-4.2-include.tar.xz (nvidia-cutlass 4.2.0 wheel's include + tools/util/include),
# .kp-cutlass/bin/ (two binaries built on the CPU machine for a 10-second smoke test).
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .kp-whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
mkdir -p /tmp/cutlass && tar -xJf .kp-cutlass/cutlass-4.2-include.tar.xz -C /tmp/cutlass || exit 1
export CUTLASS_DIR=/tmp/cutlass
python3 -m pip install -q --no-deps --no-build-isolation -e . > $OUT/install.log 2>&1 || { tail -20 $OUT/install.log; exit 1; }
python3 -m kernelpilot plugins > $OUT/plugins.txt 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee -a $OUT/smoke.txt
ok=1
for b in .kp-cutlass/bin/*; do
  for shape in "--m=712 --n=520 --k=264" "--m=4096 --n=4096 --k=4096" "--m=64 --n=28672 --k=4096"; do
    timeout 60 $b $shape --variants=M:1:D:1,N:8:D:1,H:1:K:1,H:1:S:4 > /tmp/smoke.json 2>&1; rc=$?
    echo "$b $shape rc=$rc $(head -c 1500 /tmp/smoke.json)" | tee -a $OUT/smoke.txt
    [ $rc -eq 0 ] || ok=0
  done
done
echo "setup+smoke took $(( $(date +%s) - T0 )) s"
[ $ok -eq 1 ] || [ "$FORCE" = 1 ] || { echo "smoke test failed: stopping"; exit 3; }
PYTHONUNBUFFERED=1 python3 benchmarks/gemm_h200.py --out $OUT --deadline-s $(( ${BUDGET_S:-560} - ($(date +%s) - T0) )) "$@" 2>&1 | tee $OUT/driver.log
echo "total $(( $(date +%s) - T0 )) s"

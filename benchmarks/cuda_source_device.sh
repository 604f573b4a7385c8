#!/bin/bash
# One GPU run: the CUDA source examples through `kernelpilot optimize --engine rules` on the GPU,
# then original vs optimized side by side; JSON + log in $OUT.  Run from the repository root:
#
#   bash benchmarks/cuda_source_device.sh                      # cuda_gemm_bias_relu + cuda_inline_softmax
#   bash benchmarks/cuda_source_device.sh cuda_inline_softmax  # any subset of examples/cuda_*
#
# Assumes torch (CUDA build), triton, nvcc and ninja on the device; carried cp312 wheels of what the
# image lacks (pydantic, pydantic-settings, optuna, dask, ...) in .whl/ (the setup lines of
# benchmarks/scaleout_setup.sh, without its CUTLASS/dask checks, which these examples do not need).
# Each example runs under its own `timeout` (EXAMPLE_TIMEOUT_S, default 290 s) and its result is written
# to $OUT/cuda_source_h200.json as soon as it is done, so a slow one never hides the other.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || { tail -20 "$OUT/install.log"; exit 1; }
# torch's load_inline needs `ninja` on PATH; use kernelpilot's finder if it lives elsewhere
NINJA=$(python3 -c "from kernelpilot import toolchain; print(toolchain.ninja_path() or '')" 2>/dev/null)
if [ -n "$NINJA" ] && ! command -v ninja > /dev/null; then export PATH=$(dirname "$NINJA"):$PATH; fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$OUT/gpus.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__, '| cuda', torch.version.cuda)" \
  | tee "$OUT/versions.txt"
EXAMPLES=${*:-cuda_gemm_bias_relu cuda_inline_softmax}
for name in $EXAMPLES; do
  start=$(date +%s)
  timeout -k 10 "${EXAMPLE_TIMEOUT_S:-290}" python3 benchmarks/cuda_source_h200.py --examples "$name" \
    --max-iterations 1 --max-trials 14 --max-configs 6 --rounds 3 --pipeline-timeout 240 \
    --workdir /tmp/kp_cuda_source --out "$OUT/cuda_source_h200.json" 2>&1 | tee -a "$OUT/cuda_source_h200.log"
  echo "== $name: exit ${PIPESTATUS[0]} after $(( $(date +%s) - start )) s" | tee -a "$OUT/cuda_source_h200.log"
done

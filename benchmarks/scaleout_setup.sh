#!/bin/bash
# Sourced by benchmarks/scaleout_h200.sh and benchmarks/scaleout_2gpu.sh on the GPU machine
# (repository root; works without network access).  Carried, git-ignored inputs:
#   .whl/        cp312 wheels of what the device image lacks (dask, distributed, pydantic, optuna, ...)
#   .kp-cutlass/cutlass-4.2-include.tar.xz   CUTLASS 4.2 include/, tools/util/include/, example 88's FMHA (benchmarks/README.md)
# Leaves: PYTHONPATH with the wheels, kernelpilot installed editable, CUTLASS_DIR, OUT.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; return 1 2>/dev/null || exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$OUT/install.log" 2>&1 \
  || { tail -20 "$OUT/install.log"; return 1 2>/dev/null || exit 1; }
if [ -z "$CUTLASS_DIR" ]; then
  tarball=$(ls .kp-cutlass/cutlass-*-include.tar.xz 2>/dev/null | head -1)
  if [ -n "$tarball" ]; then
    mkdir -p /tmp/cutlass && tar -xJf "$tarball" -C /tmp/cutlass && export CUTLASS_DIR=/tmp/cutlass
  fi
fi
python3 - <<'PY' || { echo "setup check failed"; return 1 2>/dev/null || exit 1; }
import distributed, kernelpilot
from kernelpilot import toolchain
tree = toolchain.find_headers("cutlass")
print("distributed", distributed.__version__, "| cutlass", tree and tree.version, "| cmake", toolchain.cmake_path(),
      "| ninja", toolchain.ninja_path(), "| nvcc", toolchain.which("nvcc"))
assert tree is not None, "no CUTLASS headers: provide .kp-cutlass/ or set CUTLASS_DIR"
PY
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv | tee "$OUT/gpus.txt"

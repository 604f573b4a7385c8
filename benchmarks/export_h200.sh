#!/bin/bash
# H200 check of `kernelpilot export` (run from the repository root on the device; results go to $OUT).
# The exported folder is made on a CPU machine and carried (git-ignored .kp-export/), so the device needs
# only torch, nvcc, cmake and ninja -- never kernelpilot:
#   kernelpilot export benchmarks/results/gemm_h200_final_run.json --out .kp-export/kp_h200 --name kp_h200
# Steps: pip install of the folder (timed; then --no-build-isolation, then CMake + Ninja directly if pip
# cannot build, recorded as such), then benchmarks/export_h200.py.  About 5-7 minutes on 16 cores.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
EXPORT=${EXPORT:-.kp-export/kp_h200}
NAME=${NAME:-kp_h200}
RUN=${RUN:-benchmarks/results/gemm_h200_final_run.json}
mkdir -p "$OUT"
[ -f "$EXPORT/dispatch.json" ] || { echo "no exported folder at $EXPORT (see the header of this script)"; exit 2; }
EXPORT=$(cd "$EXPORT" && pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
cp "$EXPORT/dispatch.json" "$OUT/dispatch.json"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
HOW="pip install --no-deps --no-index $EXPORT"
python3 -m pip install --no-deps --no-index -v "$EXPORT" > "$OUT/install.log" 2>&1
RC=$?
if [ $RC -ne 0 ]; then  # the compiled objects stay in $EXPORT/build/cmake: a retry only finishes the build
  echo "pip install failed (rc=$RC), last lines:"; tail -15 "$OUT/install.log"
  HOW="pip install --no-build-isolation --no-deps --no-index $EXPORT (plain pip install failed: install.log)"
  python3 -m pip install --no-build-isolation --no-deps --no-index -v "$EXPORT" > "$OUT/install2.log" 2>&1
  RC=$?
fi
T1=$(date +%s)
if [ $RC -ne 0 ]; then
  echo "pip install failed again (rc=$RC), last lines:"; tail -25 "$OUT/install2.log"
  echo "building with CMake + Ninja directly"
  HOW="cmake -G Ninja + cmake --build (pip install failed: see install.log, install2.log)"
  B=$EXPORT/build/cmake
  { cmake -S "$EXPORT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v python3)" &&
    cmake --build "$B" --parallel "$MAX_JOBS"; } > "$OUT/cmake_build.log" 2>&1 || { tail -40 "$OUT/cmake_build.log"; exit 1; }
  cp "$B/_C.so" "$EXPORT/python/$NAME/" && export PYTHONPATH="$EXPORT/python${PYTHONPATH:+:$PYTHONPATH}"
  T1=$(date +%s)
fi
echo "install: $((T1 - T0)) s ($HOW)"
cd /tmp && python3 -c "import $NAME, torch; print(torch.ops.$NAME.get_fallback())" || exit 1
cd - > /dev/null
PYTHONUNBUFFERED=1 python3 benchmarks/export_h200.py --name "$NAME" --dispatch "$EXPORT/dispatch.json" --run "$RUN" \
  --out "$OUT/export_h200.json" --install-s $((T1 - T0)) --install-how "$HOW" \
  --deadline-s $(( ${BUDGET_S:-500} - (T1 - T0) )) 2>&1 | tee "$OUT/export_h200.log"
echo "total $(( $(date +%s) - T0 )) s"

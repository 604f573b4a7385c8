#!/bin/bash
# H200 check of the grouped_mm / moe_gemm / attention operators of `kernelpilot export` (run from the
# repository root on the device; results go to $OUT).  The exported folder is made on a CPU machine and
# carried (git-ignored .kp-export/), so the device needs only torch, nvcc, cmake and ninja:
#   python3 -c "import json; [json.dump(r, open(f'/tmp/kinds_{k}.json', 'w')) for k, r in
#               json.load(open('benchmarks/results/confirm_h200_run_kinds.json')).items()]"
#   kernelpilot export /tmp/kinds_*.json --out .kp-export/kp_kinds --name kp_kinds
# Steps: pip install of the folder (timed; CMake + Ninja directly if pip cannot build, recorded as such),
# then benchmarks/export_kinds_h200.py (with RUNS=run_kinds.json and PROGRAM_CACHE=the run's build cache,
# each kernel-served row's tuning program is timed in the same rounds as the exported op).  5 kernels (1 grouped, 4 FMHA); about 6-9 minutes on 16 cores.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
EXPORT=${EXPORT:-.kp-export/kp_kinds}
NAME=${NAME:-kp_kinds}
mkdir -p "$OUT"
[ -f "$EXPORT/dispatch.json" ] || { echo "no exported folder at $EXPORT (see the header of this script)"; exit 2; }
EXPORT=$(cd "$EXPORT" && pwd)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > "$OUT/nvidia-smi.txt" 2>&1
cp "$EXPORT/dispatch.json" "$OUT/dispatch.json"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
HOW="pip install --no-deps --no-index $EXPORT"
python3 -m pip install --no-deps --no-index -v "$EXPORT" > "$OUT/install.log" 2>&1
RC=$?
T1=$(date +%s)
if [ $RC -ne 0 ]; then  # the compiled objects stay in $EXPORT/build/cmake: the retry only finishes the build
  echo "pip install failed (rc=$RC), last lines:"; tail -25 "$OUT/install.log"
  echo "building with CMake + Ninja directly"
  HOW="cmake -G Ninja + cmake --build (pip install failed: see install.log)"
  B=$EXPORT/build/cmake
  { cmake -S "$EXPORT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPython_EXECUTABLE="$(command -v python3)" &&
    cmake --build "$B" --parallel "$MAX_JOBS"; } > "$OUT/cmake_build.log" 2>&1 || { tail -40 "$OUT/cmake_build.log"; exit 1; }
  cp "$B/_C.so" "$EXPORT/python/$NAME/" && export PYTHONPATH="$EXPORT/python${PYTHONPATH:+:$PYTHONPATH}"
  T1=$(date +%s)
fi
echo "install: $((T1 - T0)) s ($HOW)"
cd /tmp && python3 -c "import $NAME, torch; print(torch.ops.$NAME.get_fallback())" || exit 1
cd - > /dev/null
PYTHONUNBUFFERED=1 python3 -X faulthandler benchmarks/export_kinds_h200.py --name "$NAME" --dispatch "$EXPORT/dispatch.json" \
  --out "$OUT/export_kinds_h200.json" --install-s $((T1 - T0)) --install-how "$HOW" \
  --deadline-s $(( ${BUDGET_S:-540} - (T1 - T0) )) ${RUNS:+--runs "$RUNS"} ${PROGRAM_CACHE:+--cache "$PROGRAM_CACHE"} ${ROUNDS:+--rounds "$ROUNDS"} ${REST_S:+--rest-s "$REST_S"} \
  2>&1 | tee "$OUT/export_kinds_h200.log"
echo "total $(( $(date +%s) - T0 )) s"

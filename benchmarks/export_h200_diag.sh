#!/bin/bash
# H200: where does an exported package's first operator call crash, and does the fixed export work?
# Run from the repository root on the device machine; everything it keeps goes to $OUT (8 files).
#
#   A_EXPORT  an export as the old generator wrote it (CUDA runtime linked statically into _C.so), with
#             its bundled CUTLASS; built here with CMake + Ninja (-g for the operator source)
#   B_EXPORT  the same run exported by the fixed generator (--no-bundle-cutlass: CUTLASS_DIR is A's
#             copy); installed with `pip install`, as users do
#   RUN       the run.json both were exported from (benchmarks/export_h200.py compares with its times)
#
# Steps: build A and install B side by side (8 jobs each); every probe of benchmarks/export_h200_diag.py
# against A and against B, one process each, with a SIGSEGV handler that prints the native stack
# (benchmarks/segv_backtrace.c; frames in _C.so resolved with addr2line); then, if B's first call
# works, benchmarks/export_h200.py on B (results under every fallback, CUDA-graph timing against the
# run and cuBLAS, torch.compile); cuda-gdb's backtrace of A's crash last, if time is left.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
NAME=${NAME:-kp_h200}
RUN=${RUN:-benchmarks/results/gemm_h200_final_run.json}
BUDGET_S=${BUDGET_S:-420}
REPO=$(pwd)
mkdir -p "$OUT"
A=$(cd "$A_EXPORT" && pwd) && B=$(cd "$B_EXPORT" && pwd) || { echo "set A_EXPORT and B_EXPORT"; exit 2; }
export CUTLASS_DIR=$(cd "${CUTLASS_DIR:-$A/third_party/cutlass}" && pwd)
PY=$(command -v python3)
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  echo "gdb: $(command -v gdb || echo none)  cuda-gdb: $(command -v cuda-gdb || echo none)  addr2line: $(command -v addr2line || echo none)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
  "$PY" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'cxx11abi', torch._C._GLIBCXX_USE_CXX11_ABI)"
  nvcc --version | tail -1; g++ --version | head -1; cmake --version | head -1; nproc
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
gcc -shared -fPIC -O1 -o /tmp/segv_backtrace.so benchmarks/segv_backtrace.c -ldl || exit 1

echo "[$(( $(date +%s) - T0 )) s] build A (CMake) and pip install B, 8 jobs each"
( cmake -S "$A" -B /tmp/bA -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS=-g -DPython_EXECUTABLE="$PY" &&
  cmake --build /tmp/bA --parallel 8 ) > /tmp/build_A.log 2>&1 &
PID_A=$!
TB0=$(date +%s)
MAX_JOBS=8 "$PY" -m pip install --no-deps --no-index -v "$B" > /tmp/install_B.log 2>&1
RC_B=$?
INSTALL_B_S=$(( $(date +%s) - TB0 ))
wait $PID_A
RC_A=$?
echo "[$(( $(date +%s) - T0 )) s] A build rc=$RC_A; B pip install rc=$RC_B (${INSTALL_B_S} s, beside A's build)"
{ echo "== A build (rc=$RC_A)"; tail -25 /tmp/build_A.log; echo "== B pip install (rc=$RC_B, ${INSTALL_B_S} s)"; tail -40 /tmp/install_B.log; } > "$OUT/builds.log"
mkdir -p /tmp/pyA && cp -r "$A/python/$NAME" /tmp/pyA/ && cp /tmp/bA/_C.so "/tmp/pyA/$NAME/" 2>/dev/null
B_SO=$("$PY" -c "import importlib.util as u; print(u.find_spec('$NAME').submodule_search_locations[0])")/_C.so
for lib in /tmp/pyA/$NAME/_C.so "$B_SO"; do
  echo "== $lib"; ldd "$lib" | grep -E "cudart|torch_cuda" ; echo "cudaLaunchKernel defined here: $(nm "$lib" 2>/dev/null | grep -cE ' [tT] cudaLaunchKernel$')"
done >> "$OUT/builds.log" 2>&1

CASES="cpu_explain fp32_explain major_cold major_warm untuned_explain tuned_explain tuned_gemm"
probe() {  # $1 = A|B, $2 = PYTHONPATH for the package ('' = installed)
  for c in $CASES; do
    ( cd /tmp && PYTHONPATH=$2 LD_PRELOAD=/tmp/segv_backtrace.so timeout 120 "$PY" "$REPO/benchmarks/export_h200_diag.py" "$c" --name "$NAME" \
        > "/tmp/diag_$1_$c.log" 2>&1; echo "exit code $?" >> "/tmp/diag_$1_$c.log" ) &
  done
  wait
  for c in $CASES; do
    echo "===== $1 $c"
    grep -v "^$" "/tmp/diag_$1_$c.log" | while IFS= read -r line; do
      echo "$line"
      if [[ "$line" =~ ^#[0-9].*/_C\.so\+(0x[0-9a-f]+) ]]; then
        echo "      -> $(addr2line -f -C -e "$( [ "$1" = A ] && echo /tmp/pyA/$NAME/_C.so || echo "$B_SO")" "${BASH_REMATCH[1]}" | tr '\n' ' ')"
      fi
    done
  done
}
[ $RC_A -eq 0 ] && probe A /tmp/pyA > "$OUT/diag.log" 2>&1
[ $RC_B -eq 0 ] && probe B "" >> "$OUT/diag.log" 2>&1
echo "[$(( $(date +%s) - T0 )) s] probes:"
grep -E "^===== |^exit code|: ok;|=== signal|device_major|rel err|^(tuned|nearest|vendor|error)" "$OUT/diag.log" | cut -c1-220

if grep -q "tuned_gemm: ok" /tmp/diag_B_tuned_gemm.log 2>/dev/null; then
  echo "[$(( $(date +%s) - T0 )) s] B works: benchmarks/export_h200.py"
  ( cd /tmp && PYTHONUNBUFFERED=1 "$PY" "$REPO/benchmarks/export_h200.py" --name "$NAME" --dispatch "$B/dispatch.json" \
      --run "$REPO/$RUN" --out "$OUT/export_h200.json" --install-s "$INSTALL_B_S" \
      --install-how "pip install --no-deps --no-index (MAX_JOBS=8, beside another 8-job build)" \
      --deadline-s $(( BUDGET_S - ($(date +%s) - T0) - 60 )) ) 2>&1 | tee "$OUT/export_h200.log"
else
  echo "B's first call failed: no verification run"
fi

LEFT=$(( BUDGET_S - ($(date +%s) - T0) ))
if grep -q "=== signal" /tmp/diag_A_tuned_explain.log 2>/dev/null && command -v cuda-gdb > /dev/null && [ $LEFT -gt 60 ]; then
  echo "[$(( $(date +%s) - T0 )) s] cuda-gdb on A's tuned_explain (limit $(( LEFT - 20 )) s)"
  ( cd /tmp && PYTHONPATH=/tmp/pyA timeout $(( LEFT - 20 )) cuda-gdb -batch -ex run -ex bt -ex "info registers rip" \
      --args "$PY" "$REPO/benchmarks/export_h200_diag.py" tuned_explain --name "$NAME" ) > "$OUT/cuda_gdb.log" 2>&1
  grep -A25 "SIGSEGV" "$OUT/cuda_gdb.log" | head -40
fi
echo "total $(( $(date +%s) - T0 )) s"

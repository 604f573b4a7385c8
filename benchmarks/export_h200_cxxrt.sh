#!/bin/bash
# H200: the exported operators' C++ runtime.  The first operator call of an export crashed inside
# std::ostream's number output in _C.so (benchmarks/results/export_h200_diag.log).  This script records
# how the machine's C++ compiler links libstdc++, then builds two exports of the same run with stub
# kernels (no CUTLASS compile: the crash is in the operator library, and explain() never reaches a
# kernel) -- OLD as the generator wrote them before linking torch's libstdc++ by path, NEW after -- and
# probes each one's first call (benchmarks/export_h200_diag.py, SIGSEGV handler preloaded).
# Run from the repository root on the device machine:
#   OLD_EXPORT=... NEW_EXPORT=... bash benchmarks/export_h200_cxxrt.sh      (results in $OUT)
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
NAME=${NAME:-kp_h200}
REPO=$(pwd)
PY=$(command -v python3)
mkdir -p "$OUT"
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  echo "c++: $(command -v c++)  g++: $(command -v g++)  gcc: $(command -v gcc)"
  env | grep -E '^(CC|CXX|CFLAGS|CXXFLAGS|LDFLAGS|CUDAHOSTCXX|CMAKE_[A-Z_]+|PATH)=' | sort
  file "$(command -v g++)" /opt/gcc/bin/g++ 2>&1
  for f in /opt/gcc/bin/g++ "$(command -v g++)"; do echo "== head of $f"; head -c 1500 "$f" | strings | head -30; done
  echo "== ls /opt/gcc"; ls /opt/gcc /opt/gcc/lib* 2>&1 | head -40
  for cxx in /opt/gcc/bin/g++ /usr/bin/g++; do
    [ -x "$cxx" ] || continue
    echo "== $cxx: $("$cxx" --version | head -1)"
    echo "libstdc++.so -> $("$cxx" -print-file-name=libstdc++.so)   libstdc++.a -> $("$cxx" -print-file-name=libstdc++.a)"
    echo 'int f(){return 1;}' > /tmp/x.cpp && "$cxx" -fPIC -c /tmp/x.cpp -o /tmp/x.o
    echo "link of a shared library:"; "$cxx" -### -shared /tmp/x.o -o /tmp/x.so 2>&1 | grep -E 'collect2|/ld"? ' | tail -1 | tr ' ' '\n' | tr -d '"' | grep -E 'stdc|static|Bstatic|Bdynamic|^-L' | tr '\n' ' '; echo
  done
  "$PY" -c "import torch; print('torch loads', sorted({l.split()[-1] for l in open('/proc/self/maps') if 'libstdc++' in l}))"
} > "$OUT/toolchain.txt" 2>&1
cat "$OUT/toolchain.txt"
gcc -shared -fPIC -O1 -o /tmp/segv_backtrace.so benchmarks/segv_backtrace.c -ldl || exit 1
mkdir -p /tmp/stubcutlass/include/cutlass && touch /tmp/stubcutlass/include/cutlass/cutlass.h

for v in old new; do
  src=$([ $v = old ] && echo "$OLD_EXPORT" || echo "$NEW_EXPORT")
  rm -rf "/tmp/$v" && cp -r "$src" "/tmp/$v" && rm -rf "/tmp/$v/build"
  for k in /tmp/$v/csrc/kernels/*.cu; do
    s=$(basename "$k" .cu)
    printf '#include "%s/kernels.h"\nnamespace %s {\nstd::size_t %s_workspace_bytes(const GemmCall&) { return kRejected; }\nint %s_run(const GemmCall&, void*, std::size_t) { return kStatusRejected; }\n}\n' \
      "$NAME" "$NAME" "$s" "$s" > "$k"
  done
  ( cmake -S "/tmp/$v" -B "/tmp/$v/b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCUTLASS_DIR=/tmp/stubcutlass -DPython_EXECUTABLE="$PY" \
      "-DCMAKE_SHARED_LINKER_FLAGS=${LDFLAGS:+$LDFLAGS }-Wl,--trace-symbol=_ZNSt6locale7classicEv" && cmake --build "/tmp/$v/b" --parallel 8 -v ) > "/tmp/build_$v.log" 2>&1 &
done
wait
echo "[$(( $(date +%s) - T0 )) s] built"
for v in old new; do
  lib=/tmp/$v/b/_C.so
  echo "===== $v"
  grep -E "C\+\+ runtime|error|Error" "/tmp/build_$v.log" | head -5
  grep -E "_C.so" "/tmp/build_$v.log" | grep -E "\-o _C.so|-shared" | tail -1 | cut -c1-1500
  grep -E "locale7classic" "/tmp/build_$v.log" | head -4
  echo "NEEDED: $(readelf -d "$lib" | grep -o 'NEEDED.*' | grep -oE '\[[^]]+\]' | tr '\n' ' ')"
  echo "std::locale symbols defined in _C.so: $(nm -D --defined-only "$lib" | grep -c ' _ZNSt6locale')"
  ( cd "/tmp/$v" && "$PY" -c "import build_backend, pathlib; build_backend._check_cxx_runtime(pathlib.Path('$lib')); print('build_backend check: passes')" 2>&1 | tail -1 | cut -c1-300 )
  mkdir -p "/tmp/py_$v" && cp -r "/tmp/$v/python/$NAME" "/tmp/py_$v/" && cp "$lib" "/tmp/py_$v/$NAME/"
done > "$OUT/builds.log" 2>&1
cat "$OUT/builds.log"
for v in old new; do
  for c in untuned_explain tuned_explain tuned_gemm; do
    ( cd /tmp && PYTHONPATH=/tmp/py_$v LD_PRELOAD=/tmp/segv_backtrace.so timeout 120 "$PY" "$REPO/benchmarks/export_h200_diag.py" "$c" --name "$NAME" \
        > "/tmp/probe_${v}_$c.log" 2>&1; echo "exit code $?" >> "/tmp/probe_${v}_$c.log" ) &
  done
done
wait
for v in old new; do for c in untuned_explain tuned_explain tuned_gemm; do
  echo "===== $v $c"; grep -v "^$" "/tmp/probe_${v}_$c.log" | head -12
done; done > "$OUT/probes.log" 2>&1
cat "$OUT/probes.log"
echo "total $(( $(date +%s) - T0 )) s"

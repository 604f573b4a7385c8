#!/bin/bash
# One H200 call: the exported GEMM operator against the tuning program of the same config and cuBLAS,
# interleaved (benchmarks/export_speed_h200.py).  Run from the repository root; results go to $OUT.
# The folder DIR is prepared on a CPU machine with kernelpilot and carried (git-ignored .kp-*):
#   python benchmarks/export_speed_h200.py prepare --dir .kp-export-speed \
#     benchmarks/results/gemm_h200_final_run.json benchmarks/results/confirm_cost_h200_llama3_run.json \
#     benchmarks/results/confirm_h200_run_gemm.json
# The device needs torch, nvcc, cmake and ninja, never kernelpilot.  Steps: pip install of the export and
# nvcc builds of the tuning programs (the tuner's flags, static CUDA runtime as its CMake build links it),
# side by side on all cores; then the interleaved rounds.  About 6-7 minutes for 14 shapes / 9 kernels.
set -o pipefail
T0=$(date +%s)
OUT=${OUT:-/tmp/out}
DIR=${DIR:-.kp-export-speed}
NAME=${NAME:-kp_h200}
BUDGET_S=${BUDGET_S:-470}
mkdir -p "$OUT"
[ -f "$DIR/tuning/build.json" ] || { echo "no prepared folder at $DIR (see the header of this script)"; exit 2; }
DIR=$(cd "$DIR" && pwd)
export MAX_JOBS=${MAX_JOBS:-$(( $(nproc) / 2 ))}
python3 -m pip install --no-deps --no-index -v "$DIR/$NAME" > "$OUT/export_speed_h200_install.log" 2>&1 &
PIP=$!
# the tuning programs: NVCC_FLAGS of the tuner, the export's bundled CUTLASS headers
mkdir -p "$DIR/tuning/bin"
python3 - "$DIR/tuning" > "$DIR/tuning/commands.txt" <<'EOF'
import json, shlex, sys
t = sys.argv[1]
b = json.load(open(f"{t}/build.json"))
inc = [f"-I{t}/{i}" for i in b["includes"]]
for kid, p in sorted(b["programs"].items()):
    print(shlex.join(["nvcc", *b["nvcc_flags"], *inc, f"{t}/{p['source']}", "-o", f"{t}/bin/{kid}"]) + f" > {t}/bin/{kid}.log 2>&1")
EOF
cp "$DIR/tuning/commands.txt" "$OUT/export_speed_h200_tuning_commands.txt"
xargs -P "$(( $(nproc) - MAX_JOBS ))" -I{} bash -c '{}' < "$DIR/tuning/commands.txt"
for f in "$DIR"/tuning/bin/*.log; do tail -3 "$f" | grep -i error && echo "(in $f)"; done
wait $PIP
RC=$?
T1=$(date +%s)
echo "builds: $((T1 - T0)) s (pip rc=$RC)"
tail -5 "$OUT/export_speed_h200_install.log"
ls "$DIR/tuning/bin"
[ $RC -eq 0 ] || exit 1
cd /tmp && python3 -c "import $NAME, torch; print(torch.ops.$NAME.get_fallback())" || exit 1
cd - > /dev/null
PYTHONUNBUFFERED=1 python3 benchmarks/export_speed_h200.py measure --dir "$DIR" --name "$NAME" \
  --out "$OUT/export_speed_h200.json" --deadline-s $(( BUDGET_S - (T1 - T0) - 20 )) "$@" 2>&1 | tee "$OUT/export_speed_h200.log"
echo "total $(( $(date +%s) - T0 )) s"

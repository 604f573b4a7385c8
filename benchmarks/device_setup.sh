# Sourced (not run) by the H200 drivers from the repository root: what the device image lacks.
#  - .whl/: cp312 wheels (pydantic, pydantic-settings, optuna, ...) installed to /tmp/site, on PYTHONPATH;
#  - kernelpilot itself, editable, without dependencies (the image has torch, triton, numpy);
#  - CUTLASS_DIR: left as set, else the carried .kp-cutlass/cutlass-*-include.tar.xz unpacked to /tmp/cutlass.
# Exits the calling script (with the failing step's output) when a step fails; T0 is the caller's start.
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > /tmp/kp_install.log 2>&1 \
  || { tail -20 /tmp/kp_install.log; exit 1; }
if [ -z "$CUTLASS_DIR" ]; then
  tarball=$(ls .kp-cutlass/cutlass-*-include.tar.xz 2>/dev/null | head -1)
  if [ -n "$tarball" ]; then
    mkdir -p /tmp/cutlass && tar -xJf "$tarball" -C /tmp/cutlass && export CUTLASS_DIR=/tmp/cutlass
  fi
fi
echo "setup took $(( $(date +%s) - ${T0:-$(date +%s)} )) s; CUTLASS_DIR=$CUTLASS_DIR"

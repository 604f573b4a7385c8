"""One probe of an exported package's first operator call, for finding where a crash happens.

Each case runs in its own process (``benchmarks/export_h200_diag.sh`` starts them, with a SIGSEGV
handler preloaded that prints the native stack), so one crash does not hide the others:

* ``cpu_explain``: ``explain`` on CPU tensors (rejected before any CUDA call);
* ``fp32_explain``: ``explain`` on CUDA fp32 tensors (rejected by dtype before any CUDA call);
* ``major_cold`` / ``major_warm``: the kernel library's ``device_major(0)`` called directly (ctypes),
  before and after PyTorch has initialised CUDA;
* ``untuned_explain``: ``explain`` on CUDA bf16 tensors of an untuned shape (the device check, then
  the vendor path: no tuned entry is read);
* ``tuned_explain``: the recorded crash (``explain`` on a tuned 4096^3 bf16 problem);
* ``tuned_gemm``: ``gemm`` on the same problem, checked against an fp32 reference.

Every case prints the CUDA runtime libraries mapped into the process afterwards (``/proc/self/maps``).
"""

from __future__ import annotations

import argparse
import ctypes
import importlib
import sys
from pathlib import Path


def mapped_cudart() -> list[str]:
    libs = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1] if len(line.split()) >= 6 else ""
        if "cudart" in path or path.endswith("_C.so"):
            libs.add(path)
    return sorted(libs)


def device_major(mod) -> int:
    lib = ctypes.CDLL(str(next(Path(mod.__file__).parent.glob("_C*.so"))))
    fn = getattr(lib, f"_ZN{len(mod.__name__)}{mod.__name__}12device_majorEi")
    fn.restype, fn.argtypes = ctypes.c_int, [ctypes.c_int]
    return int(fn(0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("--name", default="kp_h200")
    args = ap.parse_args()
    import torch

    mod = importlib.import_module(args.name)
    ops = getattr(torch.ops, args.name)
    print(f"{args.case}: loaded {mod.__file__}", flush=True)
    m = n = k = 4096
    if args.case == "cpu_explain":
        a = torch.randn(m, k, dtype=torch.bfloat16)
        print(ops.explain(a, a), flush=True)
    elif args.case == "fp32_explain":
        a = torch.randn(m, k, device="cuda")
        print(ops.explain(a, a), flush=True)
    elif args.case == "major_cold":
        print("device_major(0) =", device_major(mod), flush=True)
    elif args.case == "major_warm":
        torch.zeros(1, device="cuda")
        torch.cuda.synchronize()
        print("device_major(0) =", device_major(mod), flush=True)
    elif args.case == "untuned_explain":
        a = torch.randn(1000, 1000, device="cuda", dtype=torch.bfloat16)
        print(ops.explain(a, a), flush=True)
    elif args.case in ("tuned_explain", "tuned_gemm"):
        a = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
        b = torch.rand(k, n, device="cuda", dtype=torch.bfloat16) * 2 - 1
        print(ops.explain(a, b), flush=True)
        if args.case == "tuned_gemm":
            out = ops.gemm(a, b)
            ref = a.float() @ b.float()
            rel = float(torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref))
            print(f"gemm rel err vs fp32 {rel:.2e}", flush=True)
    else:
        print(f"unknown case {args.case}", flush=True)
        return 2
    print(f"{args.case}: ok; mapped: {mapped_cudart()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

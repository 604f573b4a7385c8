"""The CUDA kernels' vendor baseline plan: which PyTorch path a user would call, run by
:mod:`kernelpilot.dsl_plugins.cuda.vendor_worker` in a fresh process per confirmation round."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

from kernelpilot.tile_tuner.baseline import VendorPlan

NAMES = {
    "gemm": "cuBLAS (torch.matmul)",
    "grouped_gemm": "best of torch._grouped_mm and a torch.mm loop",
    "moe_gemm": "best of torch._grouped_mm and a torch.mm loop",
    "fa_prefill": "best of the SDPA backends (cuDNN, flash, efficient) and flash_attn",
    "fa_decode": "best of the SDPA backends (cuDNN, flash, efficient) and flash_attn",
}


def vendor_plan(kind: str, problem: dict[str, Any], bench_args: dict[str, Any]) -> VendorPlan:
    """The worker command for ``kind`` on ``problem``; a reason instead when torch is not installed
    (checked without importing torch: planning must stay cheap)."""
    name = NAMES[kind]
    if str(problem.get("dtype")) in ("e4m3", "fp8_e4m3", "e5m2", "fp8_e5m2"):
        name = "cuBLASLt (torch._scaled_mm)"
    if importlib.util.find_spec("torch") is None:
        return VendorPlan(name=name, reason="torch is not installed: no vendor baseline (pip install torch)")
    worker = (sys.executable, "-m", "kernelpilot.dsl_plugins.cuda.vendor_worker")
    argv = [*worker, "--kind", kind, "--problem", json.dumps(problem, sort_keys=True)]
    if bench_args.get("target_ms"):
        argv.append(f"--target-ms={bench_args['target_ms']}")
    if bench_args.get("reps"):
        argv.append(f"--reps={bench_args['reps']}")
    request = {"kind": kind, "problem": problem, "target_ms": bench_args.get("target_ms"),
               "reps": bench_args.get("reps")}  # fmt: skip
    return VendorPlan(name=name, argv=tuple(argv), serve_argv=(*worker, "--serve"),
                      request=json.dumps(request, sort_keys=True))  # fmt: skip

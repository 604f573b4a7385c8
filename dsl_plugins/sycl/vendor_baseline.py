"""The Xe kernels' vendor baseline plan: the ``torch.xpu`` path, run by
:mod:`kernelpilot.dsl_plugins.sycl.vendor_worker` (which says why when torch-xpu or the GPU is missing)."""

from __future__ import annotations

import importlib.util
import json
import sys
from typing import Any

from kernelpilot.tile_tuner.baseline import VendorPlan

NAMES = {
    "gemm": "oneDNN (torch.matmul on torch.xpu)",
    "grouped_gemm": "torch.xpu: torch._grouped_mm or a torch.mm loop",
    "moe_gemm": "torch.xpu: torch._grouped_mm or a torch.mm loop",
    "fa_prefill": "torch.xpu scaled_dot_product_attention",
    "fa_decode": "torch.xpu scaled_dot_product_attention",
}


def vendor_plan(kind: str, problem: dict[str, Any], bench_args: dict[str, Any]) -> VendorPlan:
    name = NAMES.get(kind, f"torch.xpu ({kind})")
    if importlib.util.find_spec("torch") is None:
        return VendorPlan(
            name=name, reason="torch is not installed: no vendor baseline (torch with XPU support)"
        )
    argv = [sys.executable, "-m", "kernelpilot.dsl_plugins.sycl.vendor_worker", "--kind", kind,
            "--problem", json.dumps(problem, sort_keys=True)]  # fmt: skip
    if bench_args.get("reps"):
        argv.append(f"--reps={bench_args['reps']}")
    return VendorPlan(name=name, argv=tuple(argv))

"""Vendor-baseline worker for the Xe kernel kinds: the ``torch.xpu`` path (oneDNN behind torch.matmul,
torch's XPU SDPA) when torch-xpu and an Intel GPU are present, else a cannot_run line saying why.

Run as ``python -m kernelpilot.dsl_plugins.sycl.vendor_worker --kind KIND --problem JSON``.  The sycl-tla
problems name their fields differently from the CUDA ones (``shapes``, ``tokens_per_expert``, dtype
pairs); :func:`generic_problem` maps them onto :mod:`kernelpilot.tile_tuner.torch_baselines`.  XPU has
no CUDA graphs here, so calls are timed eagerly with XPU events, 20 per repetition after 5 warm-up
calls, sets rotated past 200 MiB.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kernelpilot.tile_tuner.torch_baselines import attention, gemm, grouped
from kernelpilot.tile_tuner.vendor_timing import Rule, emit, fail, result_line

SUPPORTED_DTYPES = ("bf16", "f16")


def generic_problem(kind: str, problem: dict[str, Any]) -> dict[str, Any]:
    """The torch_baselines form of a sycl-tla problem (raises ValueError for what torch cannot run)."""
    dtype = problem.get("dtype")
    if isinstance(dtype, dict):
        dtype = dtype.get("a")
    dtype = {"fp16": "f16", "half": "f16", "bfloat16": "bf16"}.get(str(dtype), str(dtype))
    if dtype not in SUPPORTED_DTYPES:
        raise ValueError(f"dtype {problem.get('dtype')!r}: the torch.xpu baseline covers {SUPPORTED_DTYPES}")
    if kind == "gemm":
        return {"M": problem["M"], "N": problem["N"], "K": problem["K"], "layout": problem["layout"],
                "dtype": dtype}  # fmt: skip
    if kind == "grouped_gemm":
        return {"groups": problem["shapes"], "layout": problem.get("layout", "rr"), "dtype": dtype}
    if kind == "moe_gemm":
        groups = [[t, problem["N"], problem["K"]] for t in problem["tokens_per_expert"]]
        return {"groups": groups, "layout": "rc", "dtype": dtype}
    if problem.get("head_dim") is None:
        raise ValueError("head_dim_qk != head_dim_vo: SDPA needs one head dim")
    keys = ("batch", "num_heads_q", "num_heads_kv", "seq_qo", "seq_kv", "head_dim", "causal")
    return {**{k: problem[k] for k in keys}, "dtype": dtype}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kind", required=True, choices=("gemm", "grouped_gemm", "moe_gemm", "fa_prefill", "fa_decode")
    )
    ap.add_argument("--problem", required=True)
    ap.add_argument("--reps", type=int)
    args = ap.parse_args(argv)
    try:
        problem = generic_problem(args.kind, json.loads(args.problem))
    except ValueError as exc:
        return fail(args.kind, str(exc))
    try:
        import torch
    except ImportError:
        return fail(args.kind, "torch is not installed: no vendor baseline (install torch with XPU support)")
    xpu = getattr(torch, "xpu", None)
    if xpu is None or not xpu.is_available():
        return fail(args.kind, f"torch {torch.__version__} sees no XPU device (torch.xpu.is_available() is "
                    "False): install a torch build with XPU support and the Intel GPU driver")  # fmt: skip
    rule = Rule(iters_rule="fixed", **({"reps": args.reps} if args.reps else {}))
    if args.kind == "gemm":
        candidates = gemm(problem, "xpu", rule)
    elif args.kind in ("grouped_gemm", "moe_gemm"):
        candidates = grouped(problem, "xpu", rule)
    else:
        candidates = attention(problem, "xpu", rule, backends=("DEFAULT",), flash_attn=False)
    shown = {k: v for k, v in problem.items() if k != "groups"}
    return emit(result_line(args.kind, shown, candidates, rule, "xpu"))


if __name__ == "__main__":
    sys.exit(main())

"""Vendor-baseline worker for the CUDA kernel kinds: what a PyTorch user calls instead of the tuned kernel.

Run as ``python -m kernelpilot.dsl_plugins.cuda.vendor_worker --kind KIND --problem JSON`` (the tuner
does, once per confirmation round); prints one result line in the programs' schema with the fastest
path as ``backend`` and every path tried under ``candidates`` (its time, or why it was skipped or
failed).  Exit 0 ok, 3 when no path can run (no CUDA device, no torch), with the reason.

* ``gemm``: cuBLAS through ``torch.matmul`` (bf16/f16); fp8 (``e4m3``/``e5m2``) through cuBLASLt's
  ``torch._scaled_mm`` where this torch has it;
* ``grouped_gemm`` / ``moe_gemm``: the best of ``torch._grouped_mm`` (groups sharing N and K) and a loop
  of ``torch.mm`` per group (the loop is captured in one CUDA graph, so its launches are not host-bound);
* ``fa_prefill`` / ``fa_decode``: the best of every SDPA backend that accepts the problem (cuDNN, flash,
  memory-efficient; GQA through ``enable_gqa``, else K/V expanded outside the timing) and
  FlashAttention's ``flash_attn_func`` when the package is installed.

The paths are :mod:`kernelpilot.tile_tuner.torch_baselines` (shared with the Xe worker); timing
follows the programs (:mod:`kernelpilot.tile_tuner.vendor_timing`): the GEMM rule (>= 5 ms
warm-up, ~10 ms per repetition, sets rotated past 2.5 x 60 MB) for ``gemm``; the grouped/FMHA rule
(5 warm-up calls, 20 timed, sets rotated past 200 MiB) for the others; 5 repetitions, median.
``--device cpu`` runs the same code on the CPU (tests; no graphs, wall clock).
"""

from __future__ import annotations

import argparse
import json
import sys

from kernelpilot.tile_tuner.torch_baselines import attention, gemm, grouped
from kernelpilot.tile_tuner.vendor_timing import Rule, emit, result_line, serve, unavailable

KINDS = {"gemm": gemm, "grouped_gemm": grouped, "moe_gemm": grouped, "fa_prefill": attention,
         "fa_decode": attention}  # fmt: skip


def rule_for(kind: str, target_ms: float | None, reps: int | None) -> Rule:
    """The programs' rule of this kind, with the run's ``--target-ms`` / ``--reps`` where they apply."""
    base = Rule(iters_rule="target_ms") if kind == "gemm" else Rule(iters_rule="fixed")
    return Rule(**{**base.describe(), **({"target_ms": target_ms} if target_ms else {}),
                   **({"reps": reps} if reps else {})})  # fmt: skip


def measure(kind: str, problem: dict, device: str, target_ms: float | None, reps: int | None) -> dict:
    """One result line: every path of ``kind`` on ``problem`` timed anew, or why none can run."""
    try:
        import torch
    except ImportError:
        return unavailable(kind, "torch is not installed: no vendor baseline (pip install torch)")
    if device == "cuda" and not torch.cuda.is_available():
        return unavailable(kind, f"torch {torch.__version__} sees no CUDA device "
                           f"(torch.cuda.is_available() is False; CUDA build: {torch.version.cuda})")  # fmt: skip
    if kind not in KINDS:
        return unavailable(kind, f"unknown kind {kind!r}; allowed: {sorted(KINDS)}")
    rule = rule_for(kind, target_ms, reps)
    shown = {k: v for k, v in problem.items() if k not in ("groups", "tokens")}
    line = result_line(kind, shown, KINDS[kind](problem, device, rule), rule, device)
    if device == "cuda":
        torch.cuda.empty_cache()  # the next request allocates its own inputs
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", choices=sorted(KINDS))
    ap.add_argument("--problem", help="the normalized problem as JSON")
    ap.add_argument("--target-ms", type=float)
    ap.add_argument("--reps", type=int)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument(
        "--serve", action="store_true",
        help='answer one line per request line {"kind", "problem", "target_ms", "reps"} on stdin',
    )  # fmt: skip
    args = ap.parse_args(argv)
    if args.serve:
        return serve(
            lambda r: measure(r["kind"], r["problem"], args.device, r.get("target_ms"), r.get("reps"))
        )
    if not args.kind or not args.problem:
        ap.error("--kind and --problem are required without --serve")
    return emit(measure(args.kind, json.loads(args.problem), args.device, args.target_ms, args.reps))


if __name__ == "__main__":
    sys.exit(main())

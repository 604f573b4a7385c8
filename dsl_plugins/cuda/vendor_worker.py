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
from kernelpilot.tile_tuner.vendor_timing import Rule, result_line, serve_or_once, unavailable

KINDS = {"gemm": gemm, "grouped_gemm": grouped, "moe_gemm": grouped, "fa_prefill": attention,
         "fa_decode": attention}  # fmt: skip


def rule_for(kind: str, target_ms: float | None, reps: int | None) -> Rule:
    """The programs' rule of this kind, with the run's ``--target-ms`` / ``--reps`` where they apply."""
    base = Rule(iters_rule="target_ms") if kind == "gemm" else Rule(iters_rule="fixed")
    return Rule(**{**base.describe(), **({"target_ms": target_ms} if target_ms else {}),
                   **({"reps": reps} if reps else {})})  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kind", required=True, choices=sorted(KINDS))
    ap.add_argument("--problem", required=True, help="the normalized problem as JSON")
    ap.add_argument("--target-ms", type=float)
    ap.add_argument("--reps", type=int)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--serve", action="store_true", help="one result line per 'run' line on stdin")
    args = ap.parse_args(argv)
    problem = json.loads(args.problem)
    rule = rule_for(args.kind, args.target_ms, args.reps)
    shown = {k: v for k, v in problem.items() if k not in ("groups", "tokens")}

    def line() -> dict:
        try:
            import torch
        except ImportError:
            return unavailable(args.kind, "torch is not installed: no vendor baseline (pip install torch)")
        if args.device == "cuda" and not torch.cuda.is_available():
            return unavailable(args.kind, f"torch {torch.__version__} sees no CUDA device "
                               f"(torch.cuda.is_available() is False; CUDA build: {torch.version.cuda})")  # fmt: skip
        candidates = KINDS[args.kind](problem, args.device, rule)
        out = result_line(args.kind, shown, candidates, rule, args.device)
        if args.device == "cuda":
            torch.cuda.empty_cache()  # the next request allocates its own inputs
        return out

    return serve_or_once(args.serve, line)


if __name__ == "__main__":
    sys.exit(main())

"""Timing of candidate launches and the ``timing`` record every DSL's worker writes.

On a GPU the samples come from ``triton.testing.do_bench`` (warm-up, L2 flush between runs, CUDA
events), imported only when timing runs: it is the reference benchmark helper whatever DSL built the
kernel.  Under the CPU interpreter a short wall-clock loop stands in.
"""

from __future__ import annotations

import statistics
import time
from typing import Any


def sync(torch: Any, device: str) -> None:
    """Wait for the device (no-op on the CPU) so timings and results are complete."""
    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "xpu":
        torch.xpu.synchronize()


def time_forward(torch: Any, fn: Any, device: str, warmup_ms: int, rep_ms: int) -> dict[str, Any]:
    """Median/min/max over ``do_bench`` samples on a GPU; a wall-clock loop under the interpreter."""
    if device == "cpu":
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e3)
        interpreter = True
    else:
        import triton.testing

        try:
            raw = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="all")
            samples = [float(x) for x in raw]
        except (TypeError, ValueError, AssertionError):  # older Triton without return_mode="all"
            raw = triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=[0.5, 0.0, 1.0])
            samples = [float(x) for x in raw]
        interpreter = False
    return timing_summary(samples, interpreter)


def timing_summary(samples: list[float], interpreter: bool = False) -> dict[str, Any]:
    """The ``timing`` record of a verdict (ProgramResult schema) from per-run or per-round times;
    every DSL's worker writes it through here so the field names cannot drift apart."""
    return {
        "median_ms": statistics.median(samples),
        "min_ms": min(samples),
        "max_ms": max(samples),
        "repetitions": len(samples),
        "interpreter": interpreter,
    }

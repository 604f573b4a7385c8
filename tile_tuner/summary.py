"""The per-workload part of the run document: best, default, speedup, trace, failures, timings."""

from __future__ import annotations

import math
from typing import Any

from kernelpilot.tile_tuner.store import canonical
from kernelpilot.tile_tuner.workload import (
    FAILED_STATUSES,
    WorkloadState,
)


def tflops_of(kernel: Any, problem: dict[str, Any], time_ms: float | None) -> float | None:
    if not time_ms or not math.isfinite(time_ms):
        return None
    return kernel.flops(problem) / (time_ms * 1e-3) / 1e12


def summarize_state(s: WorkloadState, target: str, device: Any, kernel: Any) -> dict[str, Any]:
    """Per-workload part of the run JSON."""
    best = s.best()
    default = next((t for t in s.tried if t.is_default), None)
    peak = None
    if device is not None:
        try:
            peak = float(device.peak(s.problem["dtype"]))
        except Exception:  # noqa: BLE001
            peak = None
    flops = kernel.flops(s.problem)
    min_bytes = kernel.min_bytes(s.problem)
    disagreements = [
        {"label": t.label, "config": t.config, "status": t.status, "reason": t.reason}
        for t in s.tried
        if t.status in FAILED_STATUSES
    ]
    return {
        "name": s.workload.name,
        "kernel": s.workload.kernel,
        "dims": {k: v for k, v in s.problem.items() if k not in ("dtype",)},
        "dtype": s.problem["dtype"],
        "target": target,
        "device": getattr(device, "name", None),
        "proposer": s.workload.proposer,
        "space_size": len(s.space),
        "flops": flops,
        "min_bytes": min_bytes,
        "best": None
        if best is None
        else {
            "config": best.config,
            "label": best.label,
            "runtime": best.runtime,
            "time_ms": best.time_ms,
            "tflops": best.tflops,
            "pct_of_peak": (100.0 * best.tflops / peak) if (peak and best.tflops) else None,
        },
        "default": None
        if default is None
        else {
            "config": default.config,
            "label": default.label,
            "status": default.status,
            "time_ms": default.time_ms,
            "tflops": default.tflops,
        },
        "speedup_vs_default": (default.time_ms / best.time_ms)
        if (best and default and default.time_ms and best.time_ms)
        else None,
        # "library": the library's untuned default; "model_best": the library has none for this problem
        # and the model's best legal config is the baseline (note says why)
        "baseline": {
            "source": getattr(s.space, "default_source", "library"),
            "note": getattr(s.space, "default_note", ""),
        },
        # legal but never built and run by anyone (the model's experimental warnings): results need confirming
        "experimental": s.space.experimental_notes() if hasattr(s.space, "experimental_notes") else [],
        "measured_configs": s.measured,
        "best_trace_ms": s.best_trace,
        "stop_reason": s.stop_reason,
        "model_disagreements": disagreements,
        "invalid_proposals": s.history.invalid,
        "tried": [t.__dict__ for t in s.tried],
        "time_s": {
            "propose": round(s.propose_s, 3),
            "build_wait": round(s.build_s, 3),
            "benchmark": round(s.bench_s, 3),
        },
        "peak_tflops": peak,
    }


def canonical_problem(problem: dict[str, Any]) -> str:
    return canonical(problem)

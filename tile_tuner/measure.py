"""Worker-side measurement: run one built config on one problem, or serve a recorded measurement.

Called in the tuning process (:mod:`.backends`) and on Dask GPU workers (:mod:`.scaleout.jobs`), so a
cluster run measures exactly what a local one does.  Imports nothing of the loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.tile_tuner.runner import run_program
from kernelpilot.tile_tuner.store import Measurement


def measure_binary(
    kernel: Any,
    config: Any,
    problem: dict[str, Any],
    binary: Path,
    bench_args: dict[str, Any],
    timeout_s: float,
    extra_env: dict[str, str] | None = None,
) -> tuple[str, str, dict[str, Any] | None, float]:
    """Run one built config on one problem (all run-time variants); also called on Dask GPU workers."""
    variants = kernel.runtime_variants(config, problem)
    runtime: dict[str, Any] = dict(bench_args)
    if kernel.runs_variants_in_one_process:
        runtime["variants"] = variants
        argv, env = kernel.run_command(binary, problem, runtime)
        run = run_program(argv, {**env, **(extra_env or {})}, timeout_s)
        return run.status, run.message, run.raw or None, run.seconds
    # one process per variant: keep the fastest verified one, any failure fails the config
    best: dict[str, Any] | None = None
    seconds = 0.0
    all_raw: list[dict[str, Any]] = []
    for variant in variants:
        argv, env = kernel.run_command(binary, problem, {**runtime, **variant})
        run = run_program(argv, {**env, **(extra_env or {})}, timeout_s)
        seconds += run.seconds
        if run.status != "ok":
            return run.status, run.message, run.raw or None, seconds
        all_raw.append(run.raw)
        if best is None or run.raw["time_ms"]["median"] < best["time_ms"]["median"]:
            best = run.raw
    if best is None:
        return "cannot_run", "no run-time variant", None, seconds
    best = dict(best)
    best["variants"] = [
        {"runtime": r.get("runtime"), "status": r["status"], "time_ms": r.get("time_ms")} for r in all_raw
    ]
    return "ok", "", best, seconds


def replay_result(m: Measurement | None) -> tuple[str, str, dict[str, Any] | None, float]:
    """A recorded measurement as a benchmark result (also called on Dask GPU workers)."""
    if m is None:
        return "not_recorded", "config not in the replay store", None, 0.0
    result = dict(m.result or {})
    result.setdefault(
        "time_ms", {"median": m.time_ms, "min": m.time_min_ms, "max": m.time_max_ms, "repetitions": 1}
    )
    result["replayed_from"] = {"device": m.key.device, "toolchain": m.key.toolchain, "library": m.key.library}
    return m.status, m.reason, result, m.run_s

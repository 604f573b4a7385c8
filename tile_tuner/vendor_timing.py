"""Timing rules for vendor-baseline workers: the same rules the benchmark programs use, for PyTorch calls.

Why one module: the CUDA and the Xe baselines time PyTorch calls (cuBLAS, SDPA, oneDNN behind
``torch.xpu``) and must follow the programs' rules, or a ratio compares two different stopwatches:

* inputs rotated over enough buffer sets that the working set exceeds L2 (``rotating_sets``);
* warm-up before timing: at least ``warmup_ms`` and 3 calls (``iters_rule="target_ms"``, the GEMM
  programs) or ``warmup`` calls (``iters_rule="fixed"``, the grouped and FMHA programs);
* the timed calls replayed from a CUDA graph where capture works, so PyTorch's per-call host
  dispatch is not counted (it would be for eager calls: 10-20 us each, more than a small GEMM);
* ``reps`` repetitions of ``iters`` calls, each timed with device events; median, min, max per call;
* each candidate starts its timed calls from ``rest_s`` of idle device and a fresh warm-up, as a
  program does after its own process start.  Why: under the power cap an H200 runs a large GEMM
  5-10 % faster right after a pause than after other work back to back (recorded in
  benchmarks/results/export_kinds_sameday_h200_r4.json, rested vs back-to-back rounds); without the
  pause, the second and later candidates of one worker (torch._grouped_mm after the torch.mm loop,
  the SDPA backends after the first) would be timed at a disadvantage the programs never have.

The worker protocol (one JSON line, exit 0 ok / 3 cannot run) is :func:`emit`.  Only the worker
processes import this module (it imports torch lazily inside the functions).
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

EXIT_OK = 0
EXIT_CANNOT_RUN = 3


@dataclass(frozen=True)
class Rule:
    """How many calls are timed; mirrors the program of the same kernel kind."""

    iters_rule: str = "target_ms"  # "target_ms" (GEMM programs) | "fixed" (grouped, FMHA programs)
    target_ms: float = 10.0
    warmup_ms: float = 5.0
    warmup: int = 5
    iters: int = 20
    reps: int = 5
    max_iters: int = 2000  # the GEMM programs' longest graph
    rest_s: float = 0.5  # idle device before the timed calls (a program's process start gives it one)

    def describe(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def rotating_sets(set_bytes: float, *, factor_bytes: float, max_sets: int) -> int:
    """Buffer sets so the rotation exceeds L2: ceil(factor_bytes / set_bytes), in [1, max_sets].

    The GEMM programs use 2.5 x 60 MB (max 64 sets), the grouped and FMHA programs 200 MiB (max 8)."""
    return int(min(max_sets, max(1, math.ceil(factor_bytes / max(set_bytes, 1.0)))))


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()
    elif device == "xpu":
        torch.xpu.synchronize()


def _events(device: str):
    import torch

    if device == "cuda":
        return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    if device == "xpu":
        return torch.xpu.Event(enable_timing=True), torch.xpu.Event(enable_timing=True)
    return None


def time_calls(fns: Sequence[Callable[[], Any]], device: str, rule: Rule) -> dict[str, Any]:
    """Median/min/max ms per call over ``rule.reps`` repetitions, cycling through ``fns`` (one per
    rotating buffer set).  ``graph`` says whether the timed calls were replayed from a CUDA graph."""
    n = len(fns)
    warm_up(fns, device, rule)
    if rule.iters_rule == "fixed":
        iters = rule.iters
    else:
        t1 = time.perf_counter()
        for i in range(8):
            fns[i % n]()
        _sync(device)
        per = max((time.perf_counter() - t1) * 1e3 / 8, 1e-4)
        iters = int(min(rule.max_iters, max(3, rule.target_ms / per)))
    graph = _capture(fns, iters, device)
    if rule.rest_s > 0 and device in ("cuda", "xpu"):
        time.sleep(rule.rest_s)
        warm_up(fns, device, rule)
    times: list[float] = []
    ev = _events(device)
    for r in range(rule.reps):
        if ev is not None:
            ev[0].record()
        else:
            t1 = time.perf_counter()
        if graph is not None:
            graph.replay()
        else:
            for i in range(iters):
                fns[(r * iters + i) % n]()
        if ev is not None:
            ev[1].record()
            ev[1].synchronize()
            times.append(ev[0].elapsed_time(ev[1]) / iters)
        else:
            _sync(device)
            times.append((time.perf_counter() - t1) * 1e3 / iters)
    return {
        "time_ms": {
            "median": statistics.median(times),
            "min": min(times),
            "max": max(times),
            "repetitions": rule.reps,
        },  # fmt: skip
        "iters": iters,
        "graph": graph is not None,
        "buffers": n,
    }


def warm_up(fns: Sequence[Callable[[], Any]], device: str, rule: Rule) -> None:
    """The programs' warm-up: ``rule.warmup`` calls (fixed rule), or at least ``rule.warmup_ms`` and 3
    calls (target_ms rule)."""
    t0, it = time.perf_counter(), 0
    while True:
        fns[it % len(fns)]()
        it += 1
        if rule.iters_rule == "fixed" and it >= rule.warmup:
            break
        if rule.iters_rule != "fixed" and it >= 3 and it % 4 == 0:
            _sync(device)
            if (time.perf_counter() - t0) * 1e3 >= rule.warmup_ms:
                break
    _sync(device)


def _capture(fns: Sequence[Callable[[], Any]], iters: int, device: str):
    """A CUDA graph of ``iters`` calls (rotating buffers), replayed once untimed; None if not capturable."""
    if device != "cuda":
        return None
    import torch

    try:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):  # warm the library (workspaces, heuristics) on the side stream
            for i in range(min(3, len(fns))):
                fns[i]()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(iters):
                fns[i % len(fns)]()
        graph.replay()
        torch.cuda.synchronize()
        return graph
    except Exception:  # noqa: BLE001 - a call that cannot be captured is timed eagerly
        torch.cuda.synchronize()
        return None


def torch_versions(device: str) -> dict[str, Any]:
    """torch, the device runtime and the libraries behind the vendor paths, as far as torch tells."""
    import torch

    out: dict[str, Any] = {"torch": torch.__version__}
    if device == "cuda":
        out["cuda"] = torch.version.cuda
        out["cublas"] = f"the cuBLAS of CUDA {torch.version.cuda} (torch reports no cuBLAS version)"
        out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        with contextlib.suppress(Exception):
            out["device"] = torch.cuda.get_device_name(0)
    if device == "xpu":
        out["xpu"] = getattr(torch.version, "xpu", None)
        with contextlib.suppress(Exception):
            out["device"] = torch.xpu.get_device_name(0)
    return out


def emit(doc: dict[str, Any]) -> int:
    """Print the one result line (the programs' schema) and return the matching exit code."""
    doc.setdefault("config", {})
    doc.setdefault("problem", {})
    print(json.dumps(doc, default=str), flush=True)
    return EXIT_OK if doc["status"] == "ok" else EXIT_CANNOT_RUN


def best_of(candidates: dict[str, dict[str, Any]]) -> str | None:
    """Name of the fastest candidate that ran."""
    timed = {k: v["time_ms"]["median"] for k, v in candidates.items() if v.get("time_ms")}
    return min(timed, key=lambda k: timed[k]) if timed else None


def result_line(kind: str, problem: dict[str, Any], candidates: dict[str, dict[str, Any]],
                rule: Rule, device: str) -> dict[str, Any]:  # fmt: skip
    """The worker's result: the best candidate's times, every candidate with its time or its reason."""
    best = best_of(candidates)
    doc: dict[str, Any] = {
        "kernel": f"vendor_{kind}",
        "problem": problem,
        "candidates": candidates,
        "timing": {**rule.describe(), "device": device},
        "versions": torch_versions(device),
    }
    if best is None:
        why = "; ".join(f"{k}: {v.get('skipped') or v.get('error')}" for k, v in candidates.items())
        return {**doc, "status": "cannot_run", "message": f"no vendor path ran: {why}"}
    return {**doc, "status": "ok", "backend": best, "config": {"backend": best},
            "time_ms": candidates[best]["time_ms"]}  # fmt: skip


def serve(handle: Callable[[dict[str, Any]], dict[str, Any]]) -> int:
    """Answer one result line per JSON request line on stdin until "quit" or end of input; each request
    is measured anew (fresh inputs and timing).  A failing request is a cannot_run line, not the end."""
    for request in sys.stdin:
        text = request.strip()
        if text == "quit":
            break
        if not text:
            continue
        try:
            line = handle(json.loads(text))
        except Exception as exc:  # noqa: BLE001 - reported in the line, the worker keeps serving
            line = {"status": "cannot_run", "kernel": "vendor", "message": f"{type(exc).__name__}: {exc}"}
        emit(line)
    return EXIT_OK


def unavailable(kind: str, message: str) -> dict[str, Any]:
    """The line of a worker that cannot run at all (no torch, no device)."""
    return {"status": "cannot_run", "kernel": f"vendor_{kind}", "message": message}


def fail(kind: str, message: str) -> int:
    """Print :func:`unavailable`'s line and return the cannot-run exit code."""
    return emit(unavailable(kind, message))

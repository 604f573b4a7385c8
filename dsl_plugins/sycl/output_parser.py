"""Parse what sycl-tla's own example and benchmark programs print, into the tuner's result shape.

Why: users compare against (and sometimes only have) sycl-tla's examples and its Google-Benchmark
suite.  Their text formats are fixed in the library's source; turning them into the same
``ProgramResult`` fields our programs print lets a library example serve as a measured baseline and
lets recorded logs be imported.  Our own programs print one JSON line and are parsed with
:func:`kernelpilot.tile_tuner.kernel_api.parse_result_line`; :func:`parse_any` tries that first.

Formats (sycl-tla 0.9.1):

* GEMM examples (00, 01, 03, 05, 13): ``Disposition: Passed|Failed`` or ``Disposition is skipped.``,
  ``Problem Size: MxNxKxL``, ``Cutlass GEMM Performance:     [%4.3f]TFlop/s  (%6.4f)ms``
  (examples/00_bmg_gemm/00_bmg_gemm.cpp:280-298).
* Grouped GEMM examples (04, 09, 10) and MoE (12): ``Avg runtime : <ms> ms``, ``GFLOPS      : <g>``
  (examples/04_bmg_grouped_gemm/04_bmg_grouped_gemm.cpp:505-531; 12_..._cute_interface.cpp:355-370,
  which adds ``Memory BW utilization : <b>  GBPs``).
* FA example 06: ``Disposition: ...``, a tab-separated parameter line, then
  ``Performance:   %4.3f  GB/s,    %4.3f  TFlop/s,   %6.4f  ms``
  (examples/06_bmg_flash_attention/xe_fmha_fwd_runner.hpp:843-853).
* benchmarks/ (Google Benchmark JSON, ``BENCHMARK_FORMAT=json``): per benchmark ``avg_runtime_ms``,
  ``best_runtime_ms``, ``worst_runtime_ms`` or ``avg_tflops`` counters
  (benchmarks/gemm/benchmark_runner.hpp:703-796, benchmarks/flash_attention/benchmark_runner.hpp:728-837).
"""

from __future__ import annotations

import json
import re
from typing import Any

from kernelpilot.tile_tuner.kernel_api import ProgramResult, parse_result_line

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"
_DISPOSITION = re.compile(r"^Disposition(?::\s*(Passed|Failed)| is skipped\.)", re.M)
_GEMM_PERF = re.compile(rf"Cutlass GEMM Performance:\s+\[{_NUM}\]TFlop/s\s+\({_NUM}\)ms")
_PROBLEM = re.compile(r"Problem Size:\s*(\d+)x(\d+)x(\d+)x(\d+)")
_AVG_RUNTIME = re.compile(rf"Avg runtime\s*:\s*{_NUM}\s*ms")
_GFLOPS = re.compile(rf"GFLOPS\s*:\s*{_NUM}")
_MEM_BW = re.compile(rf"Memory BW utilization\s*:\s*{_NUM}\s*GBPs")
_FA_PERF = re.compile(rf"Performance:\s+{_NUM}\s+GB/s,\s+{_NUM}\s+TFlop/s,\s+{_NUM}\s+ms")
_FA_PARAMS = re.compile(r"Batch:\s*(\d+)\s+NumHeads_q:\s*(\d+)\s+NumHeads_kv:\s*(\d+)\s+Seq Length QO:\s*(\d+)\s+"
                        r"Seq Length KV:\s*(\d+)\s+Head Size QK:\s*(\d+)\s+Head Size VO:\s*(\d+)\s+"
                        r"Causal Mask:\s*(true|false)")  # fmt: skip


def _verdict(text: str) -> tuple[str, dict[str, Any] | None]:
    """Status and verification block from the Disposition line: skipped is *not* passed."""
    m = _DISPOSITION.search(text)
    if m is None or m.group(1) is None:
        return "cannot_run", None  # no verdict (or "is skipped"): unverified, never counted as ok
    passed = m.group(1) == "Passed"
    ver = {"passed": passed, "reference": "sycl-tla example reference (Disposition line)"}
    return ("ok" if passed else "wrong_result"), ver


def _time(ms: float) -> dict[str, Any]:
    # the examples print one mean over all iterations: min = max = median = that mean, one repetition
    return {"median": ms, "min": ms, "max": ms, "repetitions": 1}


def parse_library_output(text: str, kernel: str = "") -> ProgramResult:
    """Parse one run of a sycl-tla example (GEMM, grouped/MoE or FA format) into a ProgramResult.

    A run without ``Disposition: Passed`` is never ``ok``: skipped verification is reported as
    ``cannot_run`` with a message saying so, a failed one as ``wrong_result``."""
    status, ver = _verdict(text)
    result: dict[str, Any] = {"status": status, "kernel": kernel, "config": {}, "problem": {}}
    if ver is not None:
        result["verification"] = ver
    if (m := _GEMM_PERF.search(text)) is not None:
        result["kernel"] = kernel or "gemm"
        result["tflops"] = float(m.group(1))
        result["time_ms"] = _time(float(m.group(2)))
        if (p := _PROBLEM.search(text)) is not None:
            result["problem"] = dict(zip(("M", "N", "K", "L"), map(int, p.groups()), strict=True))
    elif (m := _FA_PERF.search(text)) is not None:
        result["kernel"] = kernel or "fa"
        result["gbps"] = float(m.group(1))
        result["tflops"] = float(m.group(2))
        result["time_ms"] = _time(float(m.group(3)))
        if (p := _FA_PARAMS.search(text)) is not None:
            names = ("batch", "num_heads_q", "num_heads_kv", "seq_qo", "seq_kv", "head_dim_qk", "head_dim_vo")
            result["problem"] = {
                **dict(zip(names, map(int, p.groups()[:7]), strict=True)),
                "causal": p.group(8) == "true",
            }
    elif (m := _AVG_RUNTIME.search(text)) is not None:
        result["kernel"] = kernel or "grouped_gemm"
        result["time_ms"] = _time(float(m.group(1)))
        if (g := _GFLOPS.search(text)) is not None:
            result["tflops"] = float(g.group(1)) / 1000.0
        if (b := _MEM_BW.search(text)) is not None:
            result["gbps"] = float(b.group(1))
    else:
        if status == "wrong_result":  # the examples stop before timing when verification fails
            result["message"] = "Disposition: Failed (no timing printed)"
            return ProgramResult.model_validate(result)
        result["status"] = "cannot_run"
        result.pop("verification", None)
        result["message"] = "no performance line in the output"
        return ProgramResult.model_validate(result)
    if ver is None:
        result["message"] = "the program did not verify its result (Disposition missing or skipped)"
    return ProgramResult.model_validate(result)


def parse_gbench_json(text: str) -> list[dict[str, Any]]:
    """One entry per benchmark of a sycl-tla Google-Benchmark JSON report: name, time and TFLOP/s.

    Entries skipped with an error (``SkipWithError("Disposition Failed.")``) come back with
    ``status: wrong_result`` and no time."""
    doc = json.loads(text)
    out = []
    for bench in doc.get("benchmarks", []):
        entry: dict[str, Any] = {"name": bench.get("name", "")}
        if bench.get("error_occurred"):
            entry["status"] = (
                "wrong_result" if "Disposition" in str(bench.get("error_message", "")) else "cannot_run"
            )
            entry["message"] = bench.get("error_message", "")
            out.append(entry)
            continue
        entry["status"] = "ok"
        if "avg_runtime_ms" in bench:
            entry["time_ms"] = {
                "median": float(bench["avg_runtime_ms"]),
                "min": float(bench.get("best_runtime_ms", bench["avg_runtime_ms"])),
                "max": float(bench.get("worst_runtime_ms", bench["avg_runtime_ms"])),
                "repetitions": int(bench.get("iterations", 1)),
            }
        if "avg_tflops" in bench:
            entry["tflops"] = float(bench["avg_tflops"])
        out.append(entry)
    return out


def parse_any(stdout: str, kernel: str = "") -> ProgramResult:
    """Our programs' JSON line if there is one, else a sycl-tla example's text format."""
    try:
        return parse_result_line(stdout)
    except ValueError:
        return parse_library_output(stdout, kernel)

"""Stages and static analysis for SYCL source kernels.

The ``dtype_fix`` and autotuning stages are the core's C++ stages (:mod:`kernelpilot.cpp_source.stages`:
same ``tunables:`` spec section, same search) with ``dsl="sycl"``; the analyzer adds Xe/SYCL findings
to the core's C++ checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelpilot.cpp_source.analysis import Check, CppSourceAnalyzer, strip_comments
from kernelpilot.cpp_source.stages import DoubleToFloatStage, SourceAutotuneStage
from kernelpilot.pipeline.contracts import Issue

FLOAT64_CHECK: Check = (
    "float64_usage",
    re.compile(r"\bdouble\b"),
    "double-precision arithmetic (GPUs run fp64 at a fraction of fp32 / matrix-engine speed)",
    "high",
    "compute in float (or the input dtype) if the reference still matches",
)

_SYCL_CHECKS: list[Check] = [
    (
        "host_device_sync",
        re.compile(r"\b(?:q|queue)\s*(?:->|\.)\s*wait(?:_and_throw)?\s*\(|\.wait\s*\(\s*\)"),
        "kp_forward waits for the device (the runner already waits once per call)",
        "medium",
        "return after submitting; let the runner synchronise",
    ),
    (
        "host_device_sync",
        re.compile(r"\bmalloc_(?:device|shared|host)\s*[<(]|\bsycl::buffer\s*<"),
        "allocation or sycl::buffer per call (allocation and buffer write-back synchronise)",
        "medium",
        "use the USM pointers kp_forward receives; allocate scratch once",
    ),
    (
        "device_tuning",
        re.compile(r"\bparallel_for\s*\(\s*sycl::range\b|\bparallel_for\s*\(\s*range\b"),
        "a basic-range parallel_for: the runtime picks the work-group size and the sub-group size",
        "low",
        "use nd_range with an explicit work-group size and [[sycl::reqd_sub_group_size(16)]]",
    ),
]


@dataclass
class SyclSourceAnalyzer:
    dsl: str = "sycl"
    stage: Literal["analysis"] = "analysis"
    base: CppSourceAnalyzer = field(
        default_factory=lambda: CppSourceAnalyzer(
            dsl="sycl", checks=[FLOAT64_CHECK], launch_pattern=re.compile(r"\bparallel_for\s*[<(]")
        )
    )

    def analyze(self, source: str) -> list[Issue]:
        issues = self.base.analyze(source)
        code = strip_comments(source)
        for category, pattern, message, severity, suggestion in _SYCL_CHECKS:
            match = pattern.search(code)
            if match:
                line = code.count("\n", 0, match.start()) + 1
                issues.append(Issue(category, message, line=line, severity=severity, suggestion=suggestion))  # type: ignore[arg-type]
        if "parallel_for" in code and "reqd_sub_group_size" not in code:
            issues.append(
                Issue(
                    "device_tuning",
                    "no [[sycl::reqd_sub_group_size(N)]]: the compiler chooses SIMD width (Xe DPAS and 2D block "
                    "loads are built for sub-groups of 16)",
                    severity="low",
                    suggestion="request sub-group size 16 on Xe2/Xe-HPC",
                )
            )
        return issues


def sycl_stages() -> list[Any]:
    return [DoubleToFloatStage(dsl="sycl"), SourceAutotuneStage(dsl="sycl")]

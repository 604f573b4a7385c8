"""Stages and static analysis for CUDA source kernels.

Rules engine (no LLM, deterministic):

* ``dtype_fix`` and ``autotuning`` -- the core's C++ stages (:mod:`kernelpilot.cpp_source.stages`)
  configured for CUDA: :class:`CudaDoubleToFloatStage`, :class:`CudaAutotuneStage`.
* ``memory_access`` -- :class:`RestrictPointersStage` marks the pointer parameters of device kernels
  ``__restrict__`` (no aliasing, so the compiler may use the read-only path and keep loads in
  registers); the oracle decides whether the kernel really had no aliasing.

LLM engine: the core's generic ``LLMStage`` renders this plugin's prompts (``prompts/``), so no class here.
The analyzer (:class:`CudaSourceAnalyzer`) reports what a regex can see in CUDA C++, with line numbers;
it never parses the CUDA as Python.

The ``load_inline`` form (a Python file with the CUDA in a string, :mod:`.inline_source`): every stage
reads and rewrites only the embedded CUDA strings (:class:`InlineCudaView`), the Python around them
stays unchanged; the analyzer's line numbers are the file's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelpilot.cpp_source.analysis import (
    Check,
    CppSourceAnalyzer,
    line_of,
    param_list_spans,
    split_params,
)
from kernelpilot.cpp_source.stages import CppView, DoubleToFloatStage, SourceAutotuneStage, Transform
from kernelpilot.dsl_plugins.cuda.inline_source import (
    cuda_segments,
    cuda_text,
    rewrite_cuda,
    uses_load_inline,
)
from kernelpilot.pipeline.contracts import Issue, StageContext


def is_inline(source: str) -> bool:
    """The load_inline form (Python wrapper with the CUDA in strings), not a plain C++ file."""
    return uses_load_inline(source) and "kp_forward" not in source


def cpp_view(source: str) -> str:
    """The C++ a stage should read: the file itself, or the embedded CUDA of the inline form."""
    return cuda_text(source) if is_inline(source) else source


def rewrite_cpp(source: str, transform: Any) -> str:
    """``transform`` applied to the C++ (the embedded CUDA strings of the inline form only)."""
    return rewrite_cuda(source, transform) if is_inline(source) else transform(source)


class InlineCudaView(CppView):
    """A ``.cu`` file as it is; a ``load_inline`` Python file through its embedded CUDA strings."""

    def read(self, source: str) -> str:
        return cpp_view(source)

    def rewrite(self, source: str, transform: Transform) -> str:
        return rewrite_cpp(source, transform)

    def where(self, source: str) -> str:
        return "the CUDA source strings" if is_inline(source) else "the kernel"


@dataclass
class CudaAutotuneStage(SourceAutotuneStage):
    dsl: str = "cuda"
    view: CppView = field(default_factory=InlineCudaView)


@dataclass
class CudaDoubleToFloatStage(DoubleToFloatStage):
    dsl: str = "cuda"
    view: CppView = field(default_factory=InlineCudaView)


_BOUNDS = r"(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?"
_GLOBAL_SIGNATURE = re.compile(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}\w+\s*\(", re.S)


def restrict_pointers(source: str, signature: re.Pattern[str] = _GLOBAL_SIGNATURE) -> tuple[str, int]:
    """Add ``__restrict__`` after the last ``*`` of every kernel pointer parameter that lacks it."""
    changed = 0
    out = source
    for start, end in reversed(param_list_spans(source, signature)):
        params = split_params(out[start:end])
        new = []
        for p in params:
            if "*" in p and "__restrict__" not in p and "restrict" not in p.split():
                head, _, tail = p.rpartition("*")
                p = f"{head}* __restrict__{tail if tail.startswith(' ') else ' ' + tail.lstrip()}"
                changed += 1
            new.append(p)
        out = out[:start] + ",".join(new) + out[end:]
    return out, changed


@dataclass
class RestrictPointersStage:
    dsl: str = "cuda"
    stage: str = "memory_access"
    engine: Literal["rules", "llm"] = "rules"

    def propose(self, context: StageContext) -> list[str]:
        if context.attempt > 0:
            return []
        new = rewrite_cpp(context.current_source, lambda text: restrict_pointers(text)[0])
        return [new] if new != context.current_source else []


CUDA_CHECKS: list[Check] = [
    # (category, pattern, message, severity, suggestion)
    (
        "float64_usage",
        re.compile(r"\bdouble\b"),
        "double-precision arithmetic (Hopper runs fp64 at a fraction of fp32/tensor-core speed)",
        "high",
        "compute in float (or the input dtype) if the reference still matches",
    ),
    (
        "host_device_sync",
        re.compile(r"\bcudaDeviceSynchronize\s*\(|\bcudaStreamSynchronize\s*\(|\bcudaMemcpy\s*\("),
        "host-device synchronisation in the entry point",
        "medium",
        "launch asynchronously on the given stream; kernelpilot synchronises when it must",
    ),
    (
        "host_device_sync",
        re.compile(r"\bcudaMalloc\s*\("),
        "device allocation per call (cudaMalloc synchronises and is slow)",
        "medium",
        "allocate scratch once (static buffer) or restructure to need none",
    ),
]


@dataclass
class CudaSourceAnalyzer(CppSourceAnalyzer):
    """The core's C++ findings with CUDA's checks, plus ``__restrict__`` and ``__launch_bounds__``
    findings on ``__global__`` kernels; the inline form is analysed segment by segment."""

    dsl: str = "cuda"
    checks: list[Check] = field(default_factory=lambda: list(CUDA_CHECKS))
    kernel_signature: re.Pattern[str] = field(default=_GLOBAL_SIGNATURE)

    def analyze(self, source: str) -> list[Issue]:
        if not is_inline(source):
            return self.analyze_cpp(source)
        try:
            segments = cuda_segments(source)
        except SyntaxError:
            return []
        issues = []
        for seg in segments:  # line numbers of the Python file
            for issue in self.analyze_cpp(seg.text):
                if issue.line is not None:
                    issue.line += seg.line - 1
                issues.append(issue)
        return issues

    def kernel_findings(self, code: str) -> list[Issue]:
        issues = []
        for start, end in param_list_spans(code, self.kernel_signature):
            if any("*" in p and "__restrict__" not in p for p in split_params(code[start:end])):
                issues.append(
                    Issue(
                        "redundant_loads",
                        "kernel pointer parameters are not __restrict__: the compiler must assume aliasing "
                        "and reload values it already has",
                        line=line_of(code, start),
                        severity="low",
                        suggestion="mark non-aliasing pointers __restrict__ (and inputs const)",
                    )
                )
                break
        kernels = list(self.kernel_signature.finditer(code))
        if kernels and "__launch_bounds__" not in code:
            issues.append(
                Issue(
                    "device_tuning",
                    "no __launch_bounds__: the compiler cannot budget registers for the block size",
                    line=line_of(code, kernels[0].start()),
                    severity="low",
                    suggestion="add __launch_bounds__(THREADS) so register allocation fits the occupancy you want",
                )
            )
        return issues


def cuda_stages() -> list[Any]:
    return [
        CudaDoubleToFloatStage(),
        RestrictPointersStage(dsl="cuda"),
        CudaAutotuneStage(),
    ]

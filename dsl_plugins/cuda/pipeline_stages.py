"""Stages and static analysis for C++ source kernels (CUDA here; the SYCL plugin reuses the classes).

Rules engine (no LLM, deterministic):

* ``dtype_fix`` -- :class:`DoubleToFloatStage`: ``double`` -> ``float`` (and float literals) in code.
* ``autotuning`` -- :class:`SourceAutotuneStage` searches the compile-time constants and launch
  configuration the spec declares under ``tunables:`` (see :mod:`.source_tunables`); each attempt
  proposes the next batch of legal configurations as rewritten sources, the pipeline checks and times
  them and keeps the fastest one that beats the stage input by more than the noise.
* ``memory_access`` -- :class:`RestrictPointersStage` marks the pointer parameters of device kernels
  ``__restrict__`` (no aliasing, so the compiler may use the read-only path and keep loads in
  registers); the oracle decides whether the kernel really had no aliasing.

LLM engine: the core's generic ``LLMStage`` renders this plugin's prompts (``prompts/``), so no class here.
The analyzer (``stage == "analysis"``) reports what a regex can see in C++ source, with line numbers;
it never parses the CUDA as Python.

The ``load_inline`` form (a Python file with the CUDA in a string, :mod:`.inline_source`): every stage
reads and rewrites only the embedded CUDA strings (:func:`cpp_view` / :func:`rewrite_cpp`), the Python
around them stays unchanged; the analyzer's line numbers are the file's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from kernelpilot.dsl_plugins.cuda.inline_source import (
    cuda_segments,
    cuda_text,
    rewrite_cuda,
    uses_load_inline,
)
from kernelpilot.dsl_plugins.cuda.source_tunables import (
    apply_config,
    batches,
    current_values,
    search_order,
    spec_tunables,
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


@dataclass
class SourceAutotuneStage:
    """Search the spec's ``tunables`` by rewriting the constants in the source (no LLM)."""

    dsl: str = "cuda"
    stage: str = "autotuning"
    engine: Literal["rules", "llm"] = "rules"
    seed: int = 0

    def propose(self, context: StageContext) -> list[str]:
        tunables = spec_tunables(context.spec, context.variant)
        if tunables is None:
            raise ValueError("the spec has no 'tunables:' section, so there is nothing to search")
        start = current_values(cpp_view(context.current_source), tunables.names)
        missing = [n for n, v in start.items() if v is None]
        if missing:
            where = "the CUDA source strings" if is_inline(context.current_source) else "the kernel"
            raise ValueError(
                f"tunable(s) {', '.join(missing)} are not declared in {where} as '#define NAME <int>' "
                "or 'constexpr int NAME = <int>;'"
            )
        dims = dict(context.spec.resolve(context.variant).dims)
        order = search_order(
            tunables, dims, {k: int(v) for k, v in start.items() if v is not None}, self.seed
        )
        plan = batches(order, tunables.max_configs)
        if context.attempt >= len(plan):
            return []
        source = context.current_source
        return [
            rewrite_cpp(source, lambda text, c=config: apply_config(text, c))
            for config in plan[context.attempt]
        ]


_BOUNDS = r"(?:__launch_bounds__\s*\((?:[^()]|\([^()]*\))*\)\s*)?"
_GLOBAL_SIGNATURE = re.compile(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}\w+\s*\(", re.S)


def _split_params(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "(<[":
            depth += 1
        elif ch in ")>]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return parts


def _param_list_spans(source: str, signature: re.Pattern[str]) -> list[tuple[int, int]]:
    spans = []
    for match in signature.finditer(source):
        start = match.end()
        depth, i = 1, start
        while i < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        spans.append((start, i - 1))
    return spans


def restrict_pointers(source: str, signature: re.Pattern[str] = _GLOBAL_SIGNATURE) -> tuple[str, int]:
    """Add ``__restrict__`` after the last ``*`` of every kernel pointer parameter that lacks it."""
    changed = 0
    out = source
    for start, end in reversed(_param_list_spans(source, signature)):
        params = _split_params(out[start:end])
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


_DOUBLE = re.compile(r"\bdouble\b")
_DOUBLE_LITERAL = re.compile(
    r"(?<![\w.])(\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)(?![\w.])"
)


def double_to_float(source: str, literals: bool) -> tuple[str, int]:
    """``double`` -> ``float`` outside comments (and ``1.0`` -> ``1.0f`` if ``literals``)."""
    out, changes, pos = [], 0, 0
    for match in re.finditer(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"", source, flags=re.S):
        code = source[pos : match.start()]
        code, n = _DOUBLE.subn("float", code)
        changes += n
        if literals:
            code, m = _DOUBLE_LITERAL.subn(lambda lit: lit.group(1) + "f", code)
            changes += m
        out += [code, match.group(0)]
        pos = match.end()
    tail = source[pos:]
    tail, n = _DOUBLE.subn("float", tail)
    changes += n
    if literals:
        tail, m = _DOUBLE_LITERAL.subn(lambda lit: lit.group(1) + "f", tail)
        changes += m
    out.append(tail)
    return "".join(out), changes


@dataclass
class DoubleToFloatStage:
    """dtype_fix without an LLM: fp64 -> fp32 in the C++ source; the oracle decides if it still matches.

    Attempt 0 also makes floating literals ``float`` (``1.0`` silently promotes float math to double);
    attempt 1 changes only the declared types, in case a literal needed double range.
    """

    dsl: str = "cuda"
    stage: str = "dtype_fix"
    engine: Literal["rules", "llm"] = "rules"

    def propose(self, context: StageContext) -> list[str]:
        if context.attempt > 1 or not _DOUBLE.search(_strip_comments(cpp_view(context.current_source))):
            return []
        literals = context.attempt == 0
        new = rewrite_cpp(context.current_source, lambda text: double_to_float(text, literals)[0])
        return [new] if new != context.current_source else []


_CHECKS: list[tuple[str, re.Pattern[str], str, str, str]] = [
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
class CppSourceAnalyzer:
    """Regex findings on C++ kernel source for one DSL (CUDA by default)."""

    dsl: str = "cuda"
    stage: Literal["analysis"] = "analysis"
    kernel_signature: re.Pattern[str] = field(default=_GLOBAL_SIGNATURE)
    launch_pattern: re.Pattern[str] = field(default=re.compile(r"<<<"))
    tunable_names: re.Pattern[str] = field(
        default=re.compile(
            r"^[ \t]*#[ \t]*define[ \t]+((?:BLOCK|TILE|THREADS|WARPS|VEC|GROUP|BM|BN|BK|TM|TN|ROWS|WG|SG)\w*)[ \t]+\d+",
            re.M,
        )
    )

    def analyze(self, source: str) -> list[Issue]:
        if self.dsl == "cuda" and is_inline(source):
            try:
                segments = cuda_segments(source)
            except SyntaxError:
                return []
            issues = []
            for seg in segments:  # line numbers of the Python file
                for issue in self._analyze_cpp(seg.text):
                    if issue.line is not None:
                        issue.line += seg.line - 1
                    issues.append(issue)
            return issues
        return self._analyze_cpp(source)

    def _analyze_cpp(self, source: str) -> list[Issue]:
        code = _strip_comments(source)
        issues: list[Issue] = []
        for category, pattern, message, severity, suggestion in _CHECKS:
            if self.dsl != "cuda" and category == "host_device_sync":
                continue
            for match in pattern.finditer(code):
                line = code.count("\n", 0, match.start()) + 1
                issues.append(Issue(category, message, line=line, severity=severity, suggestion=suggestion))  # type: ignore[arg-type]
                break  # one finding per check is enough to plan the stage
        names = self.tunable_names.findall(code)
        if names:
            line = code.count("\n", 0, code.find(names[0])) + 1
            issues.append(
                Issue(
                    "hardcoded_block_size",
                    f"compile-time tile/launch constants fixed in the source: {', '.join(dict.fromkeys(names))}",
                    line=line,
                    severity="medium",
                    suggestion="declare them under 'tunables:' in the spec so the autotuning stage searches them",
                )
            )
        if self.dsl == "cuda":
            for start, end in _param_list_spans(code, self.kernel_signature):
                params = _split_params(code[start:end])
                if any("*" in p and "__restrict__" not in p for p in params):
                    issues.append(
                        Issue(
                            "redundant_loads",
                            "kernel pointer parameters are not __restrict__: the compiler must assume aliasing "
                            "and reload values it already has",
                            line=code.count("\n", 0, start) + 1,
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
                        line=code.count("\n", 0, kernels[0].start()) + 1,
                        severity="low",
                        suggestion="add __launch_bounds__(THREADS) so register allocation fits the occupancy you want",
                    )
                )
        launches = len(self.launch_pattern.findall(code))
        if launches > 1:
            issues.append(
                Issue(
                    "extra_kernel_launches",
                    f"the entry point launches {launches} kernels; intermediates round-trip through memory",
                    severity="medium",
                    suggestion="fuse the kernels",
                )
            )
        return issues


def _strip_comments(source: str) -> str:
    """Blank out comments but keep line breaks, so line numbers stay right."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, source, flags=re.S)


def cuda_stages() -> list[Any]:
    return [
        DoubleToFloatStage(dsl="cuda"),
        RestrictPointersStage(dsl="cuda"),
        SourceAutotuneStage(dsl="cuda"),
        CppSourceAnalyzer(dsl="cuda"),
    ]

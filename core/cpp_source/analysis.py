"""Static analysis of C++ kernel source by regular expressions, with line numbers.

What a regex can see in C++ without a compiler: float64 use, tile/launch constants fixed in the
source, several kernel launches per entry point, plus whatever checks a DSL adds (its synchronisation
calls, its kernel signatures).  Comments are blanked first (:func:`strip_comments`) so a finding in a
comment never counts and line numbers stay those of the file.  The source is never parsed as Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from kernelpilot.pipeline.contracts import Issue

Severity = Literal["low", "medium", "high"]
# (category, pattern, message, severity, suggestion): the first match of each is one finding
Check = tuple[str, "re.Pattern[str]", str, Severity, str]

TUNABLE_DEFINES = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+((?:BLOCK|TILE|THREADS|WARPS|VEC|GROUP|BM|BN|BK|TM|TN|ROWS|WG|SG)\w*)[ \t]+\d+",
    re.M,
)


def strip_comments(source: str) -> str:
    """Blank out comments but keep line breaks, so line numbers stay right."""

    def blank(match: re.Match[str]) -> str:
        return re.sub(r"[^\n]", " ", match.group(0))

    return re.sub(r"//[^\n]*|/\*.*?\*/", blank, source, flags=re.S)


def split_params(text: str) -> list[str]:
    """A parameter list split at top-level commas (commas inside ``()``, ``<>``, ``[]`` kept)."""
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


def param_list_spans(source: str, signature: re.Pattern[str]) -> list[tuple[int, int]]:
    """``(start, end)`` of the parameter list after each match of ``signature`` (which ends at ``(``)."""
    spans = []
    for match in signature.finditer(source):
        start = match.end()
        depth, i = 1, start
        while i < len(source) and depth:
            depth += {"(": 1, ")": -1}.get(source[i], 0)
            i += 1
        spans.append((start, i - 1))
    return spans


def line_of(code: str, offset: int) -> int:
    return code.count("\n", 0, offset) + 1


@dataclass
class CppSourceAnalyzer:
    """Regex findings on C++ kernel source for one DSL.

    ``checks`` are the DSL's own patterns (one finding each, at the first match); ``launch_pattern``
    counts kernel launches.  A DSL subclasses it for findings about its kernel signatures
    (:meth:`kernel_findings`) or for sources that embed the C++ (override :meth:`analyze`).
    """

    dsl: str
    checks: list[Check] = field(default_factory=list)
    launch_pattern: re.Pattern[str] = field(default=re.compile(r"<<<"))
    tunable_names: re.Pattern[str] = field(default=TUNABLE_DEFINES)
    stage: Literal["analysis"] = "analysis"

    def analyze(self, source: str) -> list[Issue]:
        return self.analyze_cpp(source)

    def analyze_cpp(self, source: str) -> list[Issue]:
        code = strip_comments(source)
        issues: list[Issue] = []
        for category, pattern, message, severity, suggestion in self.checks:
            match = pattern.search(code)
            if match:
                issues.append(
                    Issue(
                        category,
                        message,
                        line=line_of(code, match.start()),
                        severity=severity,
                        suggestion=suggestion,
                    )
                )
        names = self.tunable_names.findall(code)
        if names:
            issues.append(
                Issue(
                    "hardcoded_block_size",
                    f"compile-time tile/launch constants fixed in the source: {', '.join(dict.fromkeys(names))}",
                    line=line_of(code, code.find(names[0])),
                    severity="medium",
                    suggestion="declare them under 'tunables:' in the spec so the autotuning stage searches them",
                )
            )
        issues += self.kernel_findings(code)
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

    def kernel_findings(self, code: str) -> list[Issue]:
        """Findings about the DSL's kernel signatures in comment-free ``code``; none by default."""
        return []

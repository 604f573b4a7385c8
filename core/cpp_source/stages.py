"""Rules stages every C++ source DSL shares (no LLM, deterministic).

* ``dtype_fix`` -- :class:`DoubleToFloatStage`: ``double`` -> ``float`` (and float literals) in code.
* ``autotuning`` -- :class:`SourceAutotuneStage` searches the compile-time constants and launch
  configuration the spec declares under ``tunables:`` (see :mod:`.tunables`); each attempt proposes
  the next batch of legal configurations as rewritten sources, the pipeline checks and times them and
  keeps the fastest one that beats the stage input by more than the noise.

A DSL whose kernel file embeds the C++ (CUDA's ``load_inline`` form: C++ in Python strings) passes a
:class:`CppView` that reads and rewrites only the embedded C++; the default view is the file itself.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from kernelpilot.cpp_source.analysis import strip_comments
from kernelpilot.cpp_source.tunables import apply_config, batches, current_values, search_order, spec_tunables
from kernelpilot.pipeline.contracts import StageContext

Transform = Callable[[str], str]


def _apply(text: str, config: dict[str, int]) -> str:
    return apply_config(text, config)


class CppView:
    """The C++ of a kernel file: the file itself.  Subclasses handle files that embed the C++."""

    def read(self, source: str) -> str:
        """The C++ a stage should read."""
        return source

    def rewrite(self, source: str, transform: Transform) -> str:
        """``transform`` applied to the C++ only."""
        return transform(source)

    def where(self, source: str) -> str:
        """Where the C++ is, for messages."""
        return "the kernel"


@dataclass
class SourceAutotuneStage:
    """Search the spec's ``tunables`` by rewriting the constants in the source (no LLM)."""

    dsl: str
    stage: str = "autotuning"
    engine: Literal["rules", "llm"] = "rules"
    seed: int = 0
    view: CppView = field(default_factory=CppView)

    def propose(self, context: StageContext) -> list[str]:
        tunables = spec_tunables(context.spec, context.variant)
        if tunables is None:
            raise ValueError("the spec has no 'tunables:' section, so there is nothing to search")
        start = current_values(self.view.read(context.current_source), tunables.names)
        missing = [n for n, v in start.items() if v is None]
        if missing:
            raise ValueError(
                f"tunable(s) {', '.join(missing)} are not declared in {self.view.where(context.current_source)} "
                "as '#define NAME <int>' or 'constexpr int NAME = <int>;'"
            )
        dims = dict(context.spec.resolve(context.variant).dims)
        order = search_order(
            tunables, dims, {k: int(v) for k, v in start.items() if v is not None}, self.seed
        )
        plan = batches(order, tunables.max_configs)
        if context.attempt >= len(plan):
            return []
        source = context.current_source
        return [self.view.rewrite(source, functools.partial(_apply, config=c)) for c in plan[context.attempt]]


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

    dsl: str
    stage: str = "dtype_fix"
    engine: Literal["rules", "llm"] = "rules"
    view: CppView = field(default_factory=CppView)

    def propose(self, context: StageContext) -> list[str]:
        if context.attempt > 1 or not _DOUBLE.search(strip_comments(self.view.read(context.current_source))):
            return []
        literals = context.attempt == 0
        new = self.view.rewrite(context.current_source, lambda text: double_to_float(text, literals)[0])
        return [new] if new != context.current_source else []

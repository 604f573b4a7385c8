"""Rules-engine rewrite of Python kernel files (Triton, Gluon, ...): float64 -> float32.

GPUs run FP64 at a fraction of FP32 speed (H200: 67 vs 989 dense TFLOP/s at 16 bit) and float64
registers halve occupancy; most float64 in kernels is "for safety" and unnecessary once a reduction
subtracts its maximum or accumulates in float32.  Whether it *is* unnecessary is for the oracle to
say: the pipeline keeps the candidate only if it still matches within tolerance.

Only qualified dtype names are rewritten (``tl.float64``, Gluon's ``gl.float64``, ``torch.float64``, ``torch.double``,
``.double()``, ``dtype="float64"``), through the tokenizer, so prose in comments and docstrings and
unrelated identifiers stay as written.
"""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass
from typing import Literal

from kernelpilot.pipeline.contracts import StageContext

KERNEL_SIDE = {
    ("tl", "float64"): "float32",
    ("gl", "float64"): "float32",
}  # Triton and Gluon language modules
HOST_SIDE = {
    ("torch", "float64"): "float32",
    ("torch", "double"): "float32",
    ("np", "float64"): "float32",
    ("numpy", "float64"): "float32",
}


@dataclass
class DtypeFixResult:
    source: str
    changed: bool
    replacements: int


def float64_to_float32(source: str, *, kernel_side: bool = True, host_side: bool = True) -> DtypeFixResult:
    """Rewrite float64 uses; ``kernel_side`` = ``tl.*`` names, ``host_side`` = torch/numpy names."""
    table: dict[tuple[str, str], str] = {}
    if kernel_side:
        table.update(KERNEL_SIDE)
    if host_side:
        table.update(HOST_SIDE)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    for i, tok in enumerate(tokens):
        if tok.type != tokenize.NAME or i < 2:
            continue
        prev_dot, owner = tokens[i - 1], tokens[i - 2]
        if prev_dot.string != ".":
            continue
        new = table.get((owner.string, tok.string)) if owner.type == tokenize.NAME else None
        if new:
            edits.append((tok.start, tok.end, new))
        elif host_side and tok.string == "double" and i + 1 < len(tokens) and tokens[i + 1].string == "(":
            edits.append((tok.start, tok.end, "float"))
    for i, tok in enumerate(tokens):
        if (
            host_side
            and tok.type == tokenize.STRING
            and tok.string.strip("'\"") == "float64"
            and i >= 2
            and tokens[i - 1].string == "="
            and tokens[i - 2].string == "dtype"
        ):
            edits.append((tok.start, tok.end, repr("float32")))
    lines = source.splitlines(keepends=True)
    for (sl, sc), (el, ec), text in sorted(edits, reverse=True):
        assert sl == el
        line = lines[sl - 1]
        lines[sl - 1] = line[:sc] + text + line[ec:]
    out = "".join(lines)
    return DtypeFixResult(source=out, changed=out != source, replacements=len(edits))


@dataclass
class DtypeFixRulesStage:
    """dtype_fix without an LLM for Python kernel files: float64 -> float32; the oracle decides whether
    the kernel still computes the same thing.  Attempt 1 keeps host-side float64 buffers."""

    dsl: str = "triton"
    stage: str = "dtype_fix"
    engine: Literal["rules", "llm"] = "rules"

    def propose(self, context: StageContext) -> list[str]:
        plans = [
            {"kernel_side": True, "host_side": True},
            {"kernel_side": True, "host_side": False},  # keep host-side float64 buffers
        ]
        if context.attempt >= len(plans):
            return []
        try:
            result = float64_to_float32(context.current_source, **plans[context.attempt])
        except (SyntaxError, ValueError):
            return []
        return [result.source] if result.changed else []

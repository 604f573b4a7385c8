"""Rules-engine rewrite: float64 -> float32.

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

"""The second CUDA form: a Python ``Model`` whose extension is built with ``load_inline``.

::

    CUDA_SRC = r'''  ... __global__ void k(...) ... torch::Tensor forward(torch::Tensor x) { ... }  '''
    _ext = load_inline(name="ext", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["forward"])

    class Model(torch.nn.Module):
        def forward(self, x):
            return _ext.forward(x)

This module finds the CUDA source in such a file *statically*: the wrapper is parsed with Python's
``ast`` (it is Python), the CUDA text never is.  ``cuda_sources=`` may be a string literal, a module-level
name bound to one, or a list/tuple of those.  Each literal is a :class:`Segment` with its exact place in
the file, so the C++ rewrites of the rules stages (tunables, ``__restrict__``, ``double``) apply to the
embedded CUDA only and are spliced back into an otherwise unchanged Python file.

No torch import here: detection and validation run in the pipeline's parent process.  Torch's include
directories and C++ standard come from one short subprocess (:func:`torch_build_info`).
"""

from __future__ import annotations

import ast
import functools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from kernelpilot.python_source.load_inline import uses_load_inline

# what load_inline prepends to the CUDA sources (torch/utils/cpp_extension.py, no_implicit_headers=False)
IMPLICIT_CUDA_HEADERS = "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n"
# torch's COMMON_NVCC_FLAGS: the syntax pass sees the code the way the extension build does
TORCH_NVCC_FLAGS = (
    "-D__CUDA_NO_HALF_OPERATORS__",
    "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-D__CUDA_NO_HALF2_OPERATORS__",
    "--expt-relaxed-constexpr",
)


@dataclass(frozen=True)
class Segment:
    """One string literal passed (directly or by name) as ``cuda_sources`` to ``load_inline``."""

    name: str  # the variable it is bound to, or "cuda_sources"
    text: str  # the string's value (what load_inline compiles)
    start: int  # character offsets of the literal's *content* (between the quotes) in the file
    end: int
    line: int  # file line of the content's first character
    editable: bool  # content == value (raw string or no escapes): rewrites can be spliced in


def _offsets(source: str) -> list[int]:
    """Character offset of the start of each line (1-based index -> offsets[i-1])."""
    out, pos = [], 0
    for line in source.splitlines(keepends=True):
        out.append(pos)
        pos += len(line)
    out.append(pos)
    return out


def _literal_segment(source: str, lines: list[int], node: ast.Constant, name: str) -> Segment | None:
    if not isinstance(node.value, str) or node.end_lineno is None or node.end_col_offset is None:
        return None

    # ast column offsets are UTF-8 byte offsets within the line
    def offset(lineno: int, col: int) -> int:
        line_start = lines[lineno - 1]
        line_text = source[line_start : lines[lineno]] if lineno < len(lines) else source[line_start:]
        return line_start + len(line_text.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    begin, finish = offset(node.lineno, node.col_offset), offset(node.end_lineno, node.end_col_offset)
    literal = source[begin:finish]
    match = re.match(r"([rRbBuU]{0,2})('''|\"\"\"|'|\")", literal)
    if not match or "f" in match.group(1).lower() or not literal.endswith(match.group(2)):
        return None
    quote = match.group(2)
    content_start = begin + match.end()
    content_end = finish - len(quote)
    content = source[content_start:content_end]
    # implicit concatenation ("a" "b") spans several literals: never splice into those
    single = content.find(quote) < 0 and (quote in ('"""', "'''") or "\n" not in content)
    editable = single and content == node.value
    line = source.count("\n", 0, content_start) + 1
    return Segment(name, node.value, content_start, content_end, line, editable)


def _module_strings(tree: ast.Module) -> dict[str, ast.Constant]:
    found: dict[str, ast.Constant] = {}
    for stmt in tree.body:
        targets: list[ast.expr] = []
        value = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            for t in targets:
                if isinstance(t, ast.Name):
                    found[t.id] = value
    return found


def _is_load_inline(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Name) and func.id == "load_inline") or (
        isinstance(func, ast.Attribute) and func.attr == "load_inline"
    )


def cuda_segments(source: str) -> list[Segment]:
    """The CUDA string literals of every ``load_inline(cuda_sources=...)`` call, in file order.

    Raises ``SyntaxError`` if the wrapper is not valid Python.
    """
    tree = ast.parse(source)
    names = _module_strings(tree)
    lines = _offsets(source)
    segments: dict[int, Segment] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _is_load_inline(node)):
            continue
        value = next((kw.value for kw in node.keywords if kw.arg == "cuda_sources"), None)
        if value is None and len(node.args) >= 3:
            value = node.args[2]  # load_inline(name, cpp_sources, cuda_sources, ...)
        items = list(value.elts) if isinstance(value, (ast.List, ast.Tuple)) else [value]
        for item in items:
            if isinstance(item, ast.Name) and item.id in names:
                seg = _literal_segment(source, lines, names[item.id], item.id)
            elif isinstance(item, ast.Constant):
                seg = _literal_segment(source, lines, item, "cuda_sources")
            else:
                seg = None
            if seg is not None:
                segments[seg.start] = seg
    return [segments[k] for k in sorted(segments)]


def cuda_text(source: str) -> str:
    """All editable CUDA segments joined (what the rules stages read tunables and kernels from)."""
    try:
        return "\n".join(s.text for s in cuda_segments(source) if s.editable)
    except SyntaxError:
        return ""


def rewrite_cuda(source: str, transform: Callable[[str], str]) -> str:
    """``source`` with ``transform`` applied to each editable CUDA segment; the Python around it and
    non-editable literals stay byte-for-byte the same."""
    out = source
    for seg in reversed(cuda_segments(source)):
        if not seg.editable:
            continue
        new = transform(seg.text)
        if "\\" in new and seg.text.count("\\") != new.count("\\"):
            continue  # a rewrite that adds backslashes could change a non-raw literal's meaning
        out = out[: seg.start] + new + out[seg.end :]
    return out


def syntax_unit(segment: Segment, shown_name: str) -> str:
    """The ``.cu`` translation unit load_inline would compile for one segment, with a ``#line``
    directive so compiler messages carry the Python file's own line numbers."""
    return f'{IMPLICIT_CUDA_HEADERS}#line {segment.line} "{shown_name}"\n{segment.text}'


@functools.lru_cache(maxsize=4)
def torch_build_info(python: str = sys.executable) -> dict[str, object]:
    """``{"include_paths": [...], "std": "c++17"|"c++20", "torch": version}`` of the torch that the
    worker (``python``) will build with; asked once in a subprocess so this process stays torch-free."""
    code = (
        "import json, inspect, torch, torch.utils.cpp_extension as c\n"
        "src = inspect.getsource(c)\n"
        "std = 'c++20' if \"'-std=c++20'\" in src else 'c++17'\n"
        "print(json.dumps({'include_paths': c.include_paths(), 'std': std, 'torch': torch.__version__}))\n"
    )
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"cannot ask torch for its include paths: {(proc.stderr or proc.stdout)[-1000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


__all__ = [
    "IMPLICIT_CUDA_HEADERS",
    "TORCH_NVCC_FLAGS",
    "Segment",
    "cuda_segments",
    "cuda_text",
    "rewrite_cuda",
    "syntax_unit",
    "torch_build_info",
    "uses_load_inline",
]

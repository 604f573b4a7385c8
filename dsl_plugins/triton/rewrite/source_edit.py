"""Splice edits into Python source by AST node positions, so untouched code keeps its comments."""

from __future__ import annotations

import ast
from dataclasses import dataclass


@dataclass(frozen=True)
class Edit:
    """Replace the text from (line, col) to (end_line, end_col) -- 1-based lines, UTF-8 byte columns."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


def replace_node(node: ast.AST, text: str) -> Edit:
    return Edit(node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0, text)


def insert_before_line(line: int, text: str) -> Edit:
    """Insert whole lines (``text`` ends with a newline) before 1-based ``line``."""
    return Edit(line, 0, line, 0, text)


def apply_edits(source: str, edits: list[Edit]) -> str:
    """Apply non-overlapping edits (applied from the end so earlier positions stay valid)."""
    lines = source.splitlines(keepends=True)
    data = [ln.encode("utf-8") for ln in lines]
    starts = [0]
    for chunk in data:
        starts.append(starts[-1] + len(chunk))
    blob = b"".join(data)

    def offset(line: int, col: int) -> int:
        return starts[line - 1] + col

    ordered = sorted(
        edits, key=lambda e: (offset(e.line, e.col), offset(e.end_line, e.end_col)), reverse=True
    )
    last_start = len(blob) + 1
    for e in ordered:
        a, b = offset(e.line, e.col), offset(e.end_line, e.end_col)
        if b > last_start:
            raise ValueError(f"overlapping edits at line {e.line}")
        blob = blob[:a] + e.text.encode("utf-8") + blob[b:]
        last_start = a
    return blob.decode("utf-8")


def indentation_of(source: str, line: int) -> str:
    text = source.splitlines()[line - 1]
    return text[: len(text) - len(text.lstrip())]

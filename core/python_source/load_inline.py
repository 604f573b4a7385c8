"""Recognise a Python kernel file that builds a CUDA extension with ``torch.utils.cpp_extension.load_inline``.

Several DSL plugins must agree on this: the CUDA plugin owns such a file, a Triton plugin must not
claim it even though it may ``import triton`` (e.g. for ``triton.testing``).
"""

from __future__ import annotations

import re

_CALL = re.compile(r"\bload_inline\s*\(")


def uses_load_inline(source: str) -> bool:
    """The file calls ``load_inline`` with ``cuda_sources`` (text search, so a file with a Python syntax
    error is still recognised and gets the parser's message from ``validate``)."""
    return bool(_CALL.search(source)) and "cuda_sources" in source

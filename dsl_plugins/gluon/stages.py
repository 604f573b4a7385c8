"""Gluon stage implementations.

Rules engine: ``dtype_fix`` only.  Automatic ``@triton.autotune`` wrapping is deliberately NOT offered
for Gluon: a Gluon kernel's layouts spell out ``warps_per_cta`` and per-thread sizes, so changing
``num_warps`` or a block size without rewriting the layouts produces an illegal or wrong kernel.
The LLM engine uses the core's generic stage with this plugin's templates (``prompts/``).
"""

from __future__ import annotations

from typing import Any

from kernelpilot.python_source.dtype_fix import DtypeFixRulesStage


def gluon_stages() -> list[Any]:
    return [DtypeFixRulesStage(dsl="gluon")]

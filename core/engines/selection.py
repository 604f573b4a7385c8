"""Pick the stage implementation each engine uses for one (dsl, stage)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.llm.prompts import find_template
from kernelpilot.pipeline.contracts import STAGE_ORDER


def stage_objects(contributions: list[Any]) -> list[Any]:
    """The ``kp_stages`` contributions that are stages of the fixed order (others are ignored)."""
    return [c for c in contributions if getattr(c, "stage", None) in STAGE_ORDER]


def select_impl(engine: str, dsl: str, stage: str, stages: list[Any], prompt_dirs: list[Path]) -> Any | None:
    """The implementation ``engine`` uses for ``stage`` (``None``: this stage cannot run)."""
    mine = [s for s in stages if getattr(s, "dsl", None) == dsl and s.stage == stage]
    rules = next((s for s in mine if s.engine == "rules"), None)
    if engine == "rules":
        return rules
    if engine == "llm":
        llm = next((s for s in mine if s.engine == "llm"), None)
        if llm is not None:
            return llm
        if find_template(prompt_dirs, stage) is not None:
            from kernelpilot.engines.llm_stage import LLMStage

            return LLMStage(dsl=dsl, stage=stage)
        return rules
    return None


def implemented_stages(engine: str, dsl: str, stages: list[Any], prompt_dirs: list[Path]) -> dict[str, Any]:
    out = {}
    for stage in STAGE_ORDER:
        impl = select_impl(engine, dsl, stage, stages, prompt_dirs)
        if impl is not None:
            out[stage] = impl
    return out

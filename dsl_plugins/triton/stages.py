"""Stage implementations of the Triton plugin (``kp_stages``).

Rules engine (no LLM, deterministic): ``autotuning`` and ``dtype_fix`` (the core's Python-source
:class:`~kernelpilot.python_source.dtype_fix.DtypeFixRulesStage`).  Each ``propose`` returns at
most one candidate per attempt and falls back to a more conservative rewrite when the pipeline tells
it (``context.attempt`` > 0, ``context.feedback``) that the previous one was rejected; when there is
nothing left to try it returns ``[]`` and the stage ends.

LLM engine: the core's generic ``LLMStage`` (``kernelpilot.engines.llm_stage``) renders this plugin's
Jinja2 templates in ``prompts/`` for every stage, so the plugin contributes templates, not objects.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kernelpilot.engines.llm_stage import LLMStage
from kernelpilot.pipeline.contracts import StageContext
from kernelpilot.python_source.dtype_fix import DtypeFixRulesStage


def _device(context: StageContext) -> str:
    return context.device if context.device in ("cuda", "xpu", "cpu") else "cuda"


@dataclass
class AutotuneRulesStage:
    """Wrap each ``@triton.jit`` kernel in ``@triton.autotune`` (see ``rewrite/autotune.py``)."""

    dsl: str = "triton"
    stage: str = "autotuning"
    engine: Literal["rules", "llm"] = "rules"

    def propose(self, context: StageContext) -> list[str]:
        from kernelpilot.dsl_plugins.triton.rewrite.autotune import TuneHints, autotune_source

        if "@triton.autotune" in context.current_source:
            return []
        hints = TuneHints.from_settings(context.settings)
        try:
            if context.attempt == 0:
                result = autotune_source(context.current_source, _device(context), hints=hints)
            elif context.attempt == 1:
                # The full search was rejected (wrong result or slower): keep the block sizes the
                # author chose and tune only num_warps / num_stages.
                result = autotune_source(
                    context.current_source, _device(context), tune_blocks=False, hints=hints
                )
            else:
                return []
        except (SyntaxError, ValueError):
            return []
        return [result.source] if result.changed else []


class AutotuneLLMStage(LLMStage):
    """The core's LLM stage plus the configs the rules engine derives for this kernel and device, so the
    model starts from the hardware-aware list instead of inventing one."""

    def __init__(self) -> None:
        super().__init__(dsl="triton", stage="autotuning")

    def extra_variables(self, context: StageContext) -> dict[str, Any]:
        from kernelpilot.dsl_plugins.triton.rewrite.autotune import TuneHints, suggested_configs

        hw_vendor = getattr(context.settings, "hw_device", None)
        device = _device(context)
        if device == "cpu" and hw_vendor:  # describe the GPU the user named, not the interpreter
            from kernelpilot.hw_models.catalogue import get_device

            device = "cuda" if get_device(hw_vendor).vendor == "nvidia" else "xpu"
        hints = TuneHints.from_settings(context.settings)
        return {"autotune_configs": suggested_configs(context.current_source, device, hints)}


def triton_stages() -> list[Any]:
    """Rules stages, and the LLM autotuning stage (its config list); every other LLM stage is the core's
    generic ``LLMStage`` rendering this plugin's templates (``prompts/stage_<stage>.md.j2``)."""
    return [AutotuneRulesStage(), DtypeFixRulesStage(), AutotuneLLMStage()]

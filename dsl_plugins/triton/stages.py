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


def triton_stages() -> list[Any]:
    """Rules stages.  The LLM engine needs no object here: the core's generic ``LLMStage`` renders this
    plugin's templates (``prompts/stage_<stage>.md.j2``, ``optimize.md.j2``, ``analysis.md.j2``)."""
    return [AutotuneRulesStage(), DtypeFixRulesStage()]

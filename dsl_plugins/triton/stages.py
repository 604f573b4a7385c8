"""Stage implementations of the Triton plugin (``kp_stages``).

Rules engine (no LLM, deterministic): ``autotuning`` and ``dtype_fix``.  Each ``propose`` returns at
most one candidate per attempt and falls back to a more conservative rewrite when the pipeline tells
it (``context.attempt`` > 0, ``context.feedback``) that the previous one was rejected; when there is
nothing left to try it returns ``[]`` and the stage ends.

LLM engine: one :class:`LLMStage` per stage of ``STAGE_ORDER``.  It renders the plugin's Jinja2
template for the stage (``stage_<stage>.md.j2`` or ``optimize.md.j2``) with the variables of
``PROMPT_VARIABLES`` and asks ``context.llm`` for a structured ``{"explanation", "code"}`` reply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from kernelpilot.pipeline.contracts import STAGE_ORDER, StageContext

STAGE_DESCRIPTIONS = {
    "algorithmic": "reduce the work: a better algorithm, fewer passes over memory, no redundant math",
    "dtype_fix": "remove wasteful precision (float64, needless upcasts) while staying within tolerance",
    "fusion": "fuse separate kernels / torch ops into fewer launches to avoid round trips to memory",
    "memory_access": "coalesced, vectorizable loads/stores; no redundant loads; 64-bit indices where needed",
    "block_pointers": "express tiles with block pointers / tensor descriptors (TMA on Hopper, 2D block IO on Xe)",
    "persistent_kernel": "persistent programs over tiles to cut launch and tail overhead",
    "device_specific": "settings for the device: warps, stages, swizzling (GROUP_SIZE_M), tensor-core friendly tiles",
    "autotuning": "@triton.autotune over block sizes, num_warps and num_stages keyed on the shape arguments",
    "discovery": "any other idea that makes the kernel faster and keeps it correct",
}


def _device(context: StageContext) -> str:
    return context.device if context.device in ("cuda", "xpu", "cpu") else "cuda"


@dataclass
class AutotuneRulesStage:
    """Wrap each ``@triton.jit`` kernel in ``@triton.autotune`` (see ``rewrite/autotune.py``)."""

    dsl: str = "triton"
    stage: str = "autotuning"
    engine: Literal["rules", "llm"] = "rules"

    def propose(self, context: StageContext) -> list[str]:
        from kernelpilot.dsl_plugins.triton.rewrite.autotune import autotune_source

        if "@triton.autotune" in context.current_source:
            return []
        try:
            if context.attempt == 0:
                result = autotune_source(context.current_source, _device(context))
            elif context.attempt == 1:
                # The full search was rejected (wrong result or slower): keep the block sizes the
                # author chose and tune only num_warps / num_stages.
                result = autotune_source(context.current_source, _device(context), tune_blocks=False)
            else:
                return []
        except (SyntaxError, ValueError):
            return []
        return [result.source] if result.changed else []


@dataclass
class DtypeFixRulesStage:
    """float64 -> float32; the oracle decides whether the kernel still computes the same thing."""

    dsl: str = "triton"
    stage: str = "dtype_fix"
    engine: Literal["rules", "llm"] = "rules"

    def propose(self, context: StageContext) -> list[str]:
        from kernelpilot.dsl_plugins.triton.rewrite.dtype_fix import float64_to_float32

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


# ------------------------------------------------------------------------------------------ LLM


def spec_summary(context: StageContext) -> str:
    """One paragraph about the variant: inputs, dims, dtype, FLOPs (for prompts)."""
    spec = context.spec
    try:
        v = spec.resolve(context.variant) if hasattr(spec, "resolve") else None
    except Exception:  # noqa: BLE001 - a summary must never break a stage
        v = None
    if v is None:
        return ""
    inputs = ", ".join(f"{i.name}{list(i.shape)} {i.dtype}" for i in v.inputs)
    flop = f"; FLOPs {v.flop:.3g}" if v.flop else ""
    return f"variant {v.name}: inputs {inputs}; dims {v.dims}; init args {list(v.init_args)}{flop}"


def _issue_dict(issue: Any) -> dict[str, Any]:
    if isinstance(issue, dict):
        return issue
    if hasattr(issue, "as_dict"):
        return issue.as_dict()
    return {"message": str(issue)}


def prompt_variables(context: StageContext) -> dict[str, Any]:
    """The variables of ``PROMPT_VARIABLES`` for one stage attempt."""

    def ms(ev: Any) -> float | None:
        return ev.timing.median_ms if ev is not None and getattr(ev, "timing", None) else None

    return {
        "dsl": context.dsl,
        "device": context.device,
        "stage": context.stage,
        "stage_description": STAGE_DESCRIPTIONS.get(context.stage, ""),
        "original_source": context.original_source,
        "current_source": context.current_source,
        "issues": [_issue_dict(i) for i in context.issues],
        "feedback": list(context.feedback),
        "knowledge": list(context.knowledge),
        "baseline_ms": ms(getattr(context, "baseline", None)),
        "current_ms": ms(getattr(context, "stage_input", None)),
        "spec_summary": spec_summary(context),
        "attempt": context.attempt,
    }


@dataclass
class LLMStage:
    """Ask the LLM for a rewritten kernel file for one stage; returns its code if it parses."""

    stage: str
    dsl: str = "triton"
    engine: Literal["rules", "llm"] = "llm"
    prompt_package: str = "kernelpilot.dsl_plugins.triton"

    def _folders(self, context: StageContext) -> list[Any]:
        from importlib.resources import files
        from pathlib import Path

        folders = [Path(p) for p in getattr(context, "prompt_dirs", []) or []]
        own = Path(str(files(self.prompt_package).joinpath("prompts")))
        device_dir = own / context.device
        return [*folders, *([device_dir] if device_dir.is_dir() else []), own]

    def render(self, context: StageContext) -> list[dict[str, str]]:
        from kernelpilot.llm.prompts import SYSTEM_PROMPT, render

        text = render(self._folders(context), self.stage, prompt_variables(context))
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]

    def propose(self, context: StageContext) -> list[str]:
        if context.llm is None:
            return []
        from pydantic import BaseModel

        class OptimizeReply(BaseModel):
            explanation: str
            code: str

        reply = context.llm.structured(self.render(context), OptimizeReply)
        code = reply.code.strip()
        if code.startswith("```"):
            code = code.split("\n", 1)[1].rsplit("```", 1)[0]
        # Code that does not parse is handed on anyway: the executor reports the syntax error, which
        # becomes feedback for the next attempt.
        return [code + "\n"] if code else []


def triton_stages() -> list[Any]:
    stages: list[Any] = [AutotuneRulesStage(), DtypeFixRulesStage()]
    stages += [LLMStage(stage=s) for s in STAGE_ORDER]
    return stages

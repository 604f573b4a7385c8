"""The core's LLM stage and LLM analysis: plugin prompt templates in, pydantic-checked replies out."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, field_validator

from kernelpilot.llm.prompts import SYSTEM_PROMPT, render
from kernelpilot.pipeline.contracts import ISSUE_CATEGORIES, Issue, StageContext

STAGE_DESCRIPTIONS = {
    "algorithmic": "a better algorithm that does less work (e.g. a matrix-multiply unit instead of broadcast-and-sum)",
    "dtype_fix": "remove needless float64 / precision upcasts while matching the reference",
    "fusion": "fuse separate kernels and PyTorch ops into one kernel",
    "memory_access": "coalesced, vectorised, non-redundant memory access; no host syncs",
    "block_pointers": "block pointers / tensor descriptors instead of raw pointer arithmetic",
    "persistent_kernel": "a persistent kernel that loops over tiles to cut launch and tail overhead",
    "device_specific": "settings for this device: warps, stages, swizzling, tensor cores",
    "autotuning": "autotune block sizes, num_warps, num_stages keyed on the problem shape",
    "discovery": "any other correct change that makes the kernel faster",
}


class OptimizeReply(BaseModel):
    explanation: str = Field(description="what you changed and why it is faster")
    code: str = Field(
        description="the COMPLETE new kernel file: same language, same entry points and interface as the input"
    )


class IssueReply(BaseModel):
    category: str = Field(description=f"one of: {', '.join(ISSUE_CATEGORIES)}")
    message: str
    line: int | None = None
    severity: str = "medium"
    suggestion: str = ""

    @field_validator("category")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in ISSUE_CATEGORIES:
            raise ValueError(f"unknown category {value!r}; allowed: {', '.join(ISSUE_CATEGORIES)}")
        return value

    @field_validator("severity")
    @classmethod
    def _severity(cls, value: str) -> str:
        if value not in ("low", "medium", "high"):
            raise ValueError("severity must be low, medium or high")
        return value


class AnalysisReply(BaseModel):
    issues: list[IssueReply]


def prompt_variables(context: StageContext) -> dict[str, Any]:
    from kernelpilot.llm import prompt_context as pc

    baseline = context.baseline.timing.median_ms if context.baseline and context.baseline.timing else None
    current = (
        context.stage_input.timing.median_ms if context.stage_input and context.stage_input.timing else None
    )
    interpreter = bool(context.baseline and context.baseline.timing and context.baseline.timing.interpreter)
    device_name = (context.baseline.extra or {}).get("device_name") if context.baseline else None
    hw = pc.hw_facts(pc.catalogue_device(context.settings, device_name))
    problem = pc.problem_facts(context.spec, context.variant, hw, baseline, interpreter)
    tuning = pc.tuning_facts(context.settings, hw.get("vendor"), context.device)
    return {
        "hw": hw,
        "device_text": pc.device_text(hw, context.device),
        "problem": problem,
        "problem_text": pc.problem_text(problem),
        "tuning": tuning,
        "tuning_text": pc.tuning_text(tuning),
        "reference_source": context.reference_source,
        "profile_summary": context.profile_summary,
        "autotune_configs": [],
        "dsl": context.dsl,
        "device": context.device,
        "stage": context.stage,
        "stage_description": STAGE_DESCRIPTIONS.get(context.stage, ""),
        "original_source": context.original_source,
        "current_source": context.current_source,
        "issues": [i.as_dict() if isinstance(i, Issue) else dict(i) for i in context.issues],
        "feedback": list(context.feedback),
        "knowledge": list(context.knowledge),
        "baseline_ms": baseline,
        "current_ms": current,
        "spec_summary": spec_summary(context.spec, context.variant),
        "attempt": context.attempt,
    }


def spec_summary(spec: Any, variant: str) -> str:
    try:
        resolved = spec.variant(variant)
    except Exception:  # a spec object we do not know: show nothing rather than guess
        return ""
    inputs = ", ".join(f"{i.name}{list(i.shape)}:{i.dtype}" for i in resolved.inputs)
    text = f"variant {resolved.name}: inputs {inputs}; dims {resolved.dims}"
    if resolved.flop:
        text += f"; {resolved.flop:.3g} FLOP per call"
    return text


def strip_fence(code: str) -> str:
    """Models often wrap the file in a ```python fence even inside JSON; the file is what is inside."""
    text = code.strip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
        text = text.rsplit("```", 1)[0] if "```" in text else text
    return text.rstrip() + "\n"


class LLMStage:
    """Generic optimize stage: renders ``stage_<stage>.md.j2`` (or ``optimize.md.j2``) and asks the model."""

    engine = "llm"

    def __init__(self, dsl: str, stage: str) -> None:
        self.dsl = dsl
        self.stage = stage

    def extra_variables(self, context: StageContext) -> dict[str, Any]:
        """Stage-specific prompt variables a DSL plugin's subclass adds (e.g. autotune configs)."""
        return {}

    def propose(self, context: StageContext) -> list[str]:
        if context.llm is None:
            raise RuntimeError("LLMStage needs an LLM client in the context")
        variables = {**prompt_variables(context), **self.extra_variables(context)}
        prompt = render(context.prompt_dirs, self.stage, variables)
        reply = context.llm.structured(
            [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}], OptimizeReply
        )
        return [strip_fence(reply.code)] if reply.code.strip() else []


def llm_analysis(context: StageContext) -> list[Issue]:
    """Ask the model for issues (``analysis.md.j2``); categories are validated against the fixed list."""
    prompt = render(context.prompt_dirs, None, prompt_variables(context))
    reply = context.llm.structured(
        [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}], AnalysisReply
    )
    return [
        Issue(i.category, i.message, line=i.line, severity=i.severity, source="llm", suggestion=i.suggestion)  # type: ignore[arg-type]
        for i in reply.issues
    ]

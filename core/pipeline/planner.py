"""Plan: which stages run, in :data:`STAGE_ORDER`, and why.

A stage runs when (a) the analysis found an issue of one of its categories, or (b) the user named it in
``--stages`` (a requested stage runs even without a detected issue -- Xe-Forge silently skipped those),
and the engine has an implementation for it.  Stages that would run but have no implementation are
listed as skipped with the reason, never dropped silently.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelpilot.errors import InputError
from kernelpilot.pipeline.contracts import STAGE_ORDER, Issue


@dataclass
class PlannedStage:
    stage: str
    reason: str
    issues: list[Issue] = field(default_factory=list)


@dataclass
class Plan:
    stages: list[PlannedStage]
    skipped: dict[str, str]  # stage -> why it does not run


def parse_stages(text: str | None) -> list[str] | None:
    """``--stages a,b`` -> validated list (``None`` = let the analysis decide; ``all`` = every stage)."""
    if text is None or not text.strip():
        return None
    from kernelpilot.migration import stage_alias

    names = [stage_alias(s.strip()) for s in text.split(",") if s.strip()]
    if names == ["all"]:
        return list(STAGE_ORDER)
    unknown = [n for n in names if n not in STAGE_ORDER]
    if unknown:
        raise InputError(
            f"unknown stage(s) {', '.join(unknown)}; allowed: {', '.join(STAGE_ORDER)} or all",
            field="--stages",
        )
    return names


def make_plan(issues: list[Issue], requested: list[str] | None, implemented: set[str]) -> Plan:
    by_stage: dict[str, list[Issue]] = {}
    for issue in issues:
        by_stage.setdefault(issue.stage, []).append(issue)
    planned: list[PlannedStage] = []
    skipped: dict[str, str] = {}
    for stage in STAGE_ORDER:
        found = by_stage.get(stage, [])
        if requested is not None and stage not in requested:
            if found:
                skipped[stage] = f"{len(found)} issue(s) but not selected by --stages"
            continue
        if not found and requested is None:
            continue
        if stage not in implemented:
            skipped[stage] = "no implementation for this DSL and engine"
            continue
        reason = f"{len(found)} issue(s)" if found else "requested with --stages (no issue detected)"
        planned.append(PlannedStage(stage, reason, found))
    return Plan(planned, skipped)

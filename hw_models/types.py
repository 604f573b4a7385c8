"""Result types shared by every target model, and the base of every tile configuration.

A check never raises for an illegal configuration: it returns :class:`CheckResult` with one
:class:`Violation` per broken rule, so a tuner can record *why* a proposal was rejected and an LLM
proposer can be told.  ``rule`` is a stable id (``xe.gemm.wg_m_divisible``, ``sm90.acc_registers``)
documented in ``docs/hw_models.md``; ``message`` carries the numbers.  Bad *input* (an unknown field,
a kind that does not exist) is different: that raises :class:`kernelpilot.errors.InputError`.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict


class Violation(BaseModel):
    """One broken rule: a stable id and a human message with the numbers."""

    model_config = ConfigDict(frozen=True)

    rule: str
    message: str


class CheckResult(BaseModel):
    """Outcome of a check: ``valid`` is False iff there is at least one violation."""

    valid: bool
    violations: list[Violation] = []
    warnings: list[Violation] = []

    @classmethod
    def of(cls, violations: list[Violation], warnings: list[Violation] | None = None) -> CheckResult:
        return cls(valid=not violations, violations=list(violations), warnings=list(warnings or []))

    def rules(self) -> list[str]:
        return [v.rule for v in self.violations]

    def experimental(self) -> list[str]:
        """Messages of the warnings that label a config experimental (a rule name containing
        ``experimental``): legal, but no build of it has run yet, so runs, plans and reports say so."""
        return [w.message for w in self.warnings if "experimental" in w.rule]

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.valid,
            "violations": [v.model_dump() for v in self.violations],
            "warnings": [w.model_dump() for w in self.warnings],
        }


class TileConfig(BaseModel):
    """Base of every target's configuration: frozen (hashable), no unknown fields.

    Subclasses define the fields; :meth:`as_dict` is the canonical JSON form (sorted keys when
    serialised) that tuners hash into cache keys and templates read, and :meth:`label` a short name.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def as_dict(self) -> dict[str, Any]:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def label(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def key(self) -> str:
        """Canonical JSON string of :meth:`as_dict` (sorted keys, no spaces)."""
        return json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))

    # Equality and hashing follow the canonical form, so a config written with a derived field left out
    # (e.g. an Xe ``sg`` the CollectiveBuilder would derive) equals the same config written out in full.
    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.key() == other.key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.key()))


class Collector:
    """Accumulates violations and warnings while a model walks its rules."""

    def __init__(self) -> None:
        self.violations: list[Violation] = []
        self.warnings: list[Violation] = []

    def fail(self, rule: str, message: str) -> None:
        self.violations.append(Violation(rule=rule, message=message))

    def warn(self, rule: str, message: str) -> None:
        self.warnings.append(Violation(rule=rule, message=message))

    def require(self, condition: bool, rule: str, message: str) -> bool:
        if not condition:
            self.fail(rule, message)
        return condition

    def result(self) -> CheckResult:
        return CheckResult.of(self.violations, self.warnings)

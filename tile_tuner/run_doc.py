"""Schema of the run document (``RUN.json``) as ``kernelpilot report`` reads it back.

Why: a hand-edited or truncated run document used to fail half-way through re-rendering, after the
CSV was already rewritten.  The report validates the whole document first (every problem listed,
each naming its place in the file) and writes nothing when it is not valid.  Unknown keys are kept
(the document grows over versions); the fields the report reads must have their types.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from kernelpilot.errors import InputError, validation_lines


def _finite_positive(value: float | None) -> float | None:
    if value is not None and (not math.isfinite(value) or value <= 0):
        raise ValueError(f"must be a finite time or rate > 0, got {value}")
    return value


Positive = Annotated[float | None, AfterValidator(_finite_positive)]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class TriedEntry(_Open):
    order: int
    label: str
    is_default: bool
    status: str
    time_ms: Positive = None
    tflops: Positive = None
    runtime: dict[str, Any] | None = None
    source: str
    reason: str = ""


class BestEntry(_Open):
    config: dict[str, Any]
    label: str
    runtime: dict[str, Any] | None = None
    time_ms: Positive = None
    tflops: Positive = None
    pct_of_peak: float | None = None


class Disagreement(_Open):
    label: str
    status: str
    reason: str


class WorkloadEntry(_Open):
    name: str
    kernel: str
    dtype: str
    dims: dict[str, Any]
    best: BestEntry | None = None
    best_trace_ms: list[float | None] = Field(default_factory=list)
    model_disagreements: list[Disagreement] = Field(default_factory=list)
    tried: list[TriedEntry] = Field(default_factory=list)
    flops: float | None = None
    min_bytes: float | None = None


class RunDocument(_Open):
    schema_version: int | None = None
    target: str | None = None
    device: str | None = None
    workloads: list[WorkloadEntry]


def validate_run_document(doc: Any, path: str) -> None:
    """Raise one :class:`InputError` listing every problem of a run document (nothing is written)."""
    from kernelpilot.tile_tuner.api import RUN_SCHEMA_VERSION

    if not isinstance(doc, dict) or "workloads" not in doc:
        raise InputError("not a kernelpilot run document (no 'workloads')", file=path, field="workloads")
    if doc.get("dry_run"):
        raise InputError(
            "this is a dry-run plan, not a run; nothing was measured", file=path, field="dry_run"
        )
    try:
        parsed = RunDocument.model_validate(doc)
    except ValidationError as exc:
        lines = validation_lines(exc)
        raise InputError(
            f"not a valid run document ({len(lines)} problem{'s' if len(lines) > 1 else ''}):\n  "
            + "\n  ".join(lines),
            file=path,
        ) from None
    if parsed.schema_version is not None and parsed.schema_version != RUN_SCHEMA_VERSION:
        raise InputError(
            f"run document schema version {parsed.schema_version} is not the supported {RUN_SCHEMA_VERSION}",
            file=path,
            field="schema_version",
        )

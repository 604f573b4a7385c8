"""The run record: one JSON file per optimize run, rewritten atomically after every stage.

Why rewrite as we go: a run that crashes or is killed still leaves a record of what it did (status
``running`` plus the stages finished so far).  Settings are stored through ``Settings.public_dict`` so
the API key never lands on disk.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot import __version__


@dataclass
class StageReport:
    stage: str
    engine: str
    reason: str
    status: str = "pending"  # improved | no_improvement | no_candidates | error | budget_exhausted
    attempts: int = 0
    nodes: list[str] = field(default_factory=list)
    accepted: str | None = None
    input_ms: float | None = None
    output_ms: float | None = None
    speedup_vs_input: float | None = None
    verdicts: dict[str, int] = field(default_factory=dict)
    rejected: dict[str, str] = field(default_factory=dict)  # node id -> why it was not kept
    notes: list[str] = field(default_factory=list)


@dataclass
class RunRecord:
    kernel: str
    spec: str
    variant: str
    dsl: str
    device: str
    engine: str
    settings: dict[str, Any]
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    status: str = "running"  # running | done | failed
    error: str | None = None
    trial_tree: str = ""
    seed: int = 0
    noise: float | None = None
    baseline: dict[str, Any] = field(default_factory=dict)
    issues: list[dict[str, Any]] = field(default_factory=list)
    plan: list[dict[str, Any]] = field(default_factory=list)
    skipped_stages: dict[str, str] = field(default_factory=dict)
    stages: list[StageReport] = field(default_factory=list)
    final: list[dict[str, Any]] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    llm_usage: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    intermediates: list[str] = field(default_factory=list)  # SAVE_INTERMEDIATE=true: candidate files
    target_reached: dict[str, Any] | None = None  # TARGET_SPEEDUP met: the stages after it did not run
    profiles: list[dict[str, Any]] = field(default_factory=list)  # --profile: counters per profiled node
    environment: dict[str, Any] = field(
        default_factory=lambda: {
            "kernelpilot": __version__,
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        }
    )

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        from kernelpilot.secrets import redact_obj

        # redacted: an endpoint or a candidate that echoes an API key must not get it stored
        tmp.write_text(json.dumps(redact_obj(asdict(self)), indent=2, default=str), encoding="utf-8")
        os.replace(tmp, path)

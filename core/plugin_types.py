"""Small value types that plugins return from hooks."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class PluginInfo:
    """What ``kernelpilot plugins`` shows about a plugin."""

    name: str
    description: str
    dsls: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    available: bool = True
    reason: str = ""


@dataclass(frozen=True)
class ResourceDir:
    """A folder of prompts or knowledge-base files for one DSL (and optionally one device)."""

    dsl: str
    path: Path
    device: str | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class DoctorCheck:
    """One line of ``kernelpilot doctor``: a named check, whether it passed, and the detail or fix."""

    plugin: str
    name: str
    ok: bool
    detail: str = ""
    data: dict = field(default_factory=dict)  # JSON-able details for ``doctor --json``

"""Hook implementations of the Gluon plugin (registered through one import line in plugin.py)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import ResourceDir


@hookimpl
def kp_executor(dsl: str, device: str, settings: Any) -> Any:
    if dsl != "gluon":
        return None
    from kernelpilot.dsl_plugins.gluon.executor import GluonExecutor

    return GluonExecutor(device=device, settings=settings)


@hookimpl
def kp_claim_file(path: Path, source: str) -> str | None:
    from kernelpilot.dsl_plugins.gluon.executor import claims_file

    return "gluon" if claims_file(path, source) else None


@hookimpl
def kp_prompt_dirs() -> list[ResourceDir]:
    return [
        ResourceDir(dsl="gluon", path=Path(str(files("kernelpilot.dsl_plugins.gluon").joinpath("prompts"))))
    ]


@hookimpl
def kp_knowledge_dirs() -> list[ResourceDir]:
    return [ResourceDir(dsl="gluon", path=Path(str(files("kernelpilot.knowledge_base").joinpath("gluon"))))]


@hookimpl
def kp_stages() -> list[Any]:
    from kernelpilot.dsl_plugins.gluon.stages import gluon_stages

    return gluon_stages()

"""Hook implementations of the Triton plugin (registered through one import line in plugin.py)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import ResourceDir


@hookimpl
def kp_executor(dsl: str, device: str, settings: Any) -> Any:
    if dsl != "triton":
        return None
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor

    return TritonExecutor(dsl="triton", device=device, settings=settings)


@hookimpl
def kp_claim_file(path: Path, source: str) -> str | None:
    from kernelpilot.dsl_plugins.triton.executor import claims_file

    return "triton" if claims_file(path, source) else None


@hookimpl
def kp_prompt_dirs() -> list[ResourceDir]:
    return [
        ResourceDir(dsl="triton", path=Path(str(files("kernelpilot.dsl_plugins.triton").joinpath("prompts"))))
    ]


@hookimpl
def kp_knowledge_dirs() -> list[ResourceDir]:
    return [ResourceDir(dsl="triton", path=Path(str(files("kernelpilot.knowledge_base").joinpath("triton"))))]


@hookimpl
def kp_stages() -> list[Any]:
    from kernelpilot.dsl_plugins.triton.stages import triton_stages

    return triton_stages()

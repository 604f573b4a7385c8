"""Optimization-pipeline hooks of the SYCL plugin (SYCL C++ source kernels, built with icpx).

Registered through one import line in ``plugin.py``; the core pipeline is the same as for every DSL.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import ResourceDir


@hookimpl
def kp_executor(dsl: str, device: str, settings: Any) -> Any:
    if dsl != "sycl":
        return None
    from kernelpilot.dsl_plugins.sycl.source_executor import SyclSourceExecutor

    return SyclSourceExecutor(device=device, settings=settings)


@hookimpl
def kp_claim_file(path: Path, source: str) -> str | None:
    from kernelpilot.dsl_plugins.sycl.source_executor import claims_file

    return "sycl" if claims_file(path, source) else None


@hookimpl
def kp_analyzers() -> list[Any]:
    from kernelpilot.dsl_plugins.sycl.pipeline_stages import SyclSourceAnalyzer

    return [SyclSourceAnalyzer()]


@hookimpl
def kp_stages() -> list[Any]:
    from kernelpilot.dsl_plugins.sycl.pipeline_stages import sycl_stages

    return sycl_stages()


@hookimpl
def kp_prompt_dirs() -> list[ResourceDir]:
    return [
        ResourceDir(dsl="sycl", path=Path(str(files("kernelpilot.dsl_plugins.sycl").joinpath("prompts"))))
    ]


@hookimpl
def kp_knowledge_dirs() -> list[ResourceDir]:
    return [ResourceDir(dsl="sycl", path=Path(str(files("kernelpilot.knowledge_base").joinpath("sycl"))))]

"""Optimization-pipeline hooks of the CUDA plugin (CUDA C++ source kernels).

Registered through one import line in ``plugin.py``.  The core pipeline is the same as for Triton; this
module hands it the CUDA executor, stages, prompt folder and knowledge-base folder.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import ResourceDir


@hookimpl
def kp_executor(dsl: str, device: str, settings: Any) -> Any:
    if dsl != "cuda":
        return None
    from kernelpilot.dsl_plugins.cuda.source_executor import CudaSourceExecutor

    return CudaSourceExecutor(device=device, settings=settings)


@hookimpl
def kp_claim_file(path: Path, source: str) -> str | None:
    from kernelpilot.dsl_plugins.cuda.source_executor import claims_file

    return "cuda" if claims_file(path, source) else None


@hookimpl
def kp_analyzers() -> list[Any]:
    from kernelpilot.dsl_plugins.cuda.pipeline_stages import CudaSourceAnalyzer

    return [CudaSourceAnalyzer()]


@hookimpl
def kp_stages() -> list[Any]:
    from kernelpilot.dsl_plugins.cuda.pipeline_stages import cuda_stages

    return cuda_stages()


@hookimpl
def kp_prompt_dirs() -> list[ResourceDir]:
    return [
        ResourceDir(dsl="cuda", path=Path(str(files("kernelpilot.dsl_plugins.cuda").joinpath("prompts"))))
    ]


@hookimpl
def kp_knowledge_dirs() -> list[ResourceDir]:
    return [ResourceDir(dsl="cuda", path=Path(str(files("kernelpilot.knowledge_base").joinpath("cuda"))))]

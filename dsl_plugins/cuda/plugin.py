"""Built-in CUDA plugin: CUTLASS C++ tile tuning on NVIDIA Hopper (sm90a) and CUDA source kernels."""

from __future__ import annotations

import shutil

from kernelpilot.dsl_plugins.cuda.pipeline_hooks import (  # noqa: F401
    kp_analyzers,
    kp_claim_file,
    kp_executor,
    kp_knowledge_dirs,
    kp_prompt_dirs,
    kp_stages,
)
from kernelpilot.dsl_plugins.cuda.targets import kp_target_models  # noqa: F401
from kernelpilot.dsl_plugins.cuda.tile_kernels import kp_tile_kernels  # noqa: F401
from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import PluginInfo


@hookimpl
def kp_plugin_info() -> PluginInfo:
    has_nvcc = shutil.which("nvcc") is not None
    return PluginInfo(
        name="cuda",
        description="CUDA / CUTLASS C++: Hopper (sm90a) tile tuning and CUDA kernels",
        dsls=("cuda",),
        capabilities=(
            "tile_kernels",
            "target_models",
            "optimize",
            "executor",
            "stages",
            "prompts",
            "knowledge_base",
        ),
        available=has_nvcc,
        reason="" if has_nvcc else "nvcc not found (install the CUDA toolkit); dry runs still work",
    )

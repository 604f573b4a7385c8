"""Built-in SYCL plugin: sycl-tla (CUTLASS SYCL) tile tuning on Intel Xe and SYCL source kernels."""

from __future__ import annotations

import shutil

from kernelpilot.dsl_plugins.sycl.doctor_hook import kp_doctor_checks  # noqa: F401
from kernelpilot.dsl_plugins.sycl.pipeline_hooks import (  # noqa: F401
    kp_analyzers,
    kp_claim_file,
    kp_executor,
    kp_knowledge_dirs,
    kp_prompt_dirs,
    kp_stages,
)
from kernelpilot.dsl_plugins.sycl.targets import kp_target_models  # noqa: F401
from kernelpilot.dsl_plugins.sycl.tile_kernels import kp_tile_kernels  # noqa: F401
from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import PluginInfo


@hookimpl
def kp_plugin_info() -> PluginInfo:
    has_icpx = shutil.which("icpx") is not None
    return PluginInfo(
        name="sycl",
        description="SYCL / sycl-tla: Intel Xe (bmg, pvc) tile tuning and SYCL kernels",
        dsls=("sycl",),
        capabilities=(
            "tile_kernels",
            "target_models",
            "optimize",
            "executor",
            "stages",
            "prompts",
            "knowledge_base",
        ),
        available=has_icpx,
        reason="" if has_icpx else "icpx not found (install Intel oneAPI DPC++); dry runs still work",
    )

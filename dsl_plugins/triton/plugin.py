"""Built-in Triton plugin: executor, prompts, knowledge base and stages for Triton kernels."""

from __future__ import annotations

import importlib.util

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import PluginInfo


@hookimpl
def kp_plugin_info() -> PluginInfo:
    missing = [m for m in ("torch", "triton") if importlib.util.find_spec(m) is None]
    return PluginInfo(
        name="triton",
        description="Triton kernels: optimization pipeline (rules and LLM engines)",
        dsls=("triton",),
        capabilities=("optimize", "executor", "prompts", "knowledge_base", "stages"),
        available=not missing,
        reason=f"{', '.join(missing)} not installed (pip install 'kernelpilot[triton]')" if missing else "",
    )


from kernelpilot.dsl_plugins.triton.hooks import (  # noqa: E402, F401
    kp_claim_file,
    kp_executor,
    kp_knowledge_dirs,
    kp_prompt_dirs,
    kp_stages,
)

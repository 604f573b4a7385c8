"""Built-in Gluon plugin: Triton's lower-level Gluon DSL; shares the Triton executor."""

from __future__ import annotations

import importlib.util

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import PluginInfo


def _gluon_missing_reason() -> str:
    if importlib.util.find_spec("triton") is None:
        return "triton not installed (pip install 'kernelpilot[triton]')"
    if importlib.util.find_spec("triton.experimental.gluon") is None:
        return "this triton has no triton.experimental.gluon"
    return ""


@hookimpl
def kp_plugin_info() -> PluginInfo:
    reason = _gluon_missing_reason()
    return PluginInfo(
        name="gluon",
        description="Gluon kernels (triton.experimental.gluon): optimization pipeline",
        dsls=("gluon",),
        capabilities=("optimize", "executor", "prompts", "knowledge_base", "stages"),
        available=not reason,
        reason=reason,
    )


from kernelpilot.dsl_plugins.gluon.hooks import (  # noqa: E402, F401
    kp_claim_file,
    kp_executor,
    kp_knowledge_dirs,
    kp_prompt_dirs,
    kp_stages,
)

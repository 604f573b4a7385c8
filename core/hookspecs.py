"""Hook specifications: everything a DSL or target plugin can hand to the core.

A plugin is a module (or object) registered under the entry-point group ``kernelpilot.plugins``.  It
implements any subset of the hooks below with ``@kernelpilot.hookspecs.hookimpl``.  The core never
imports a plugin by name; the four built-in plugins register through the same entry points a third
party uses.  Every hook returns a *list* (or ``None``) so several plugins can contribute and the core
aggregates; the exception is :func:`kp_executor`, where the first plugin that knows the DSL wins.
"""

from __future__ import annotations

from typing import Any

import pluggy

PROJECT = "kernelpilot"
ENTRY_POINT_GROUP = "kernelpilot.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def kp_plugin_info() -> Any:
    """Identity and capabilities: a :class:`kernelpilot.plugin_types.PluginInfo`.

    ``available``/``reason`` say whether the plugin can work on this machine (e.g. "icpx not found"),
    so ``kernelpilot plugins`` can tell a user what is missing without running anything.
    """


@hookspec(firstresult=True)
def kp_executor(dsl: str, device: str, settings: Any) -> Any:
    """Return an executor for ``dsl`` on ``device`` (``cuda``, ``xpu``, ``cpu``) or ``None``.

    The executor compiles, runs, verifies and times candidate kernels in a worker process.
    """


@hookspec
def kp_prompt_dirs() -> Any:
    """Folders of Jinja2 prompt templates: a list of :class:`~kernelpilot.plugin_types.ResourceDir`."""


@hookspec
def kp_knowledge_dirs() -> Any:
    """Knowledge-base folders (``knowledge_base/<dsl>/<device>/...``): a list of ``ResourceDir``."""


@hookspec
def kp_stages() -> Any:
    """Optimization stage implementations this plugin supplies (list of stage objects).

    Each object names its DSL, its stage (``autotuning``, ``dtype_fix``, ...) and its engine
    (``rules`` needs no LLM, ``llm`` does).
    """


@hookspec
def kp_tile_kernels() -> Any:
    """Tile-tunable kernels: kind, backend target family, templates, build recipe and output parser."""


@hookspec
def kp_target_models() -> Any:
    """Hardware/target constraint models (``bmg``, ``pvc``, ``sm90``, ...) this plugin supports."""


@hookspec
def kp_doctor_checks() -> Any:
    """Backend-specific checks for ``kernelpilot doctor``: a list of
    :class:`~kernelpilot.plugin_types.DoctorCheck` (what the backend needs, found or missing, and how
    to fix it).  Must be cheap and never raise."""


HOOK_NAMES = (
    "kp_plugin_info",
    "kp_executor",
    "kp_prompt_dirs",
    "kp_knowledge_dirs",
    "kp_stages",
    "kp_tile_kernels",
    "kp_target_models",
    "kp_doctor_checks",
)

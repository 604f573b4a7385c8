"""Hook specifications: everything a DSL or target plugin can hand to the core.

A plugin is a module (or object) registered under the entry-point group ``kernelpilot.plugins``.  It
implements any subset of the hooks below with ``@kernelpilot.hookspecs.hookimpl``.  The core never
imports a plugin by name; the four built-in plugins register through the same entry points a third
party uses.  Every hook returns a *list* (or ``None``) so several plugins can contribute and the core
aggregates; the exception is :func:`kp_executor`, where the first plugin that knows the DSL wins.

The types named in the signatures are the contract (``docs/plugins.md`` documents each hook; a test
keeps the two in step).  A hook implementation whose name matches no specification here is an error
(:class:`kernelpilot.plugins.PluginRegistry` reports it on the plugin's record), so a misspelled hook
is never silently ignored; mark a hook meant for a newer kernelpilot ``@hookimpl(optionalhook=True)``.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # the real types, without importing the tuner or the target models at start-up
    from kernelpilot.hw_models.base import TargetModel
    from kernelpilot.pipeline.contracts import ExecutorBase, StageImpl, StaticAnalyzer
    from kernelpilot.plugin_types import DoctorCheck, PluginInfo, ResourceDir
    from kernelpilot.settings import Settings
    from kernelpilot.tile_tuner.kernel_api import TileKernel

PROJECT = "kernelpilot"
ENTRY_POINT_GROUP = "kernelpilot.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def kp_plugin_info() -> PluginInfo | None:
    """Identity and capabilities: a :class:`kernelpilot.plugin_types.PluginInfo`.

    ``available``/``reason`` say whether the plugin can work on this machine (e.g. "icpx not found"),
    so ``kernelpilot plugins`` can tell a user what is missing without running anything.
    """


@hookspec(firstresult=True)
def kp_executor(dsl: str, device: str, settings: Settings | None) -> ExecutorBase | None:
    """Return an executor for ``dsl`` on ``device`` (``cuda``, ``xpu``, ``cpu``) or ``None``.

    The executor (a :class:`~kernelpilot.pipeline.contracts.ExecutorBase` subclass) compiles, runs,
    verifies and times candidate kernels in a worker process.
    """


@hookspec
def kp_claim_file(path: Path, source: str) -> str | None:
    """The DSL this plugin recognises the kernel file as (``"triton"``), or ``None``.

    DSL detection when ``--dsl`` is not given: exactly one DSL must claim the file.  Decided from the
    path and text alone -- no executor is built, nothing is compiled or imported.
    """


@hookspec
def kp_prompt_dirs() -> list[ResourceDir] | None:
    """Folders of Jinja2 prompt templates: a list of :class:`~kernelpilot.plugin_types.ResourceDir`."""


@hookspec
def kp_knowledge_dirs() -> list[ResourceDir] | None:
    """Knowledge-base folders (``knowledge_base/<dsl>/<device>/...``): a list of ``ResourceDir``."""


@hookspec
def kp_stages() -> list[StageImpl] | None:
    """Optimization stage implementations this plugin supplies (list of stage objects).

    Each object names its DSL, its stage (``autotuning``, ``dtype_fix``, ...) and its engine
    (``rules`` needs no LLM, ``llm`` does).
    """


@hookspec
def kp_analyzers() -> list[StaticAnalyzer] | None:
    """Static (rules) analyzers for this plugin's DSLs: objects with ``dsl`` and ``analyze(source)``
    returning :class:`~kernelpilot.pipeline.contracts.Issue` objects with line numbers."""


@hookspec
def kp_tile_kernels() -> list[TileKernel] | None:
    """Tile-tunable kernels: kind, backend target family, templates, build recipe and output parser."""


@hookspec
def kp_target_models() -> list[TargetModel] | None:
    """Hardware/target constraint models (``bmg``, ``pvc``, ``sm90``, ...) this plugin supports."""


@hookspec
def kp_doctor_checks() -> list[DoctorCheck] | None:
    """Backend-specific checks for ``kernelpilot doctor``: a list of
    :class:`~kernelpilot.plugin_types.DoctorCheck` (what the backend needs, found or missing, and how
    to fix it).  Must be cheap and never raise."""


def _hook_names() -> tuple[str, ...]:
    """Every hook specified in this module, in definition order (derived, never kept by hand)."""
    marker = f"{PROJECT}_spec"
    specs = [fn for fn in globals().values() if inspect.isfunction(fn) and hasattr(fn, marker)]
    return tuple(fn.__name__ for fn in sorted(specs, key=lambda fn: fn.__code__.co_firstlineno))


HOOK_NAMES = _hook_names()

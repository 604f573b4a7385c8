"""Wiring a run together: device and DSL detection, settings with the spec's tolerances, plugin parts.

Shared by ``kernelpilot optimize`` and ``kernelpilot skill ...`` so both resolve DSL, device,
tolerances and executors the same way.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError

DEVICES = ("cuda", "xpu", "cpu")


def detect_device(requested: str | None) -> str:
    """``--device`` if given, else the first of cuda, xpu available to torch, else cpu."""
    if requested:
        if requested not in DEVICES:
            raise InputError(f"unknown device {requested!r}; allowed: {', '.join(DEVICES)}", field="--device")
        return requested
    if importlib.util.find_spec("torch") is None:
        return "cpu"
    import torch

    if torch.cuda.is_available():
        return "cuda"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    return "cpu"


def known_dsls(registry: Any) -> list[str]:
    dsls: list[str] = []
    for record in registry.records:
        if record.loaded and record.info is not None:
            dsls += [d for d in record.info.dsls if d not in dsls]
    return dsls


def executor_for(registry: Any, dsl: str, device: str, settings: Any) -> Any:
    executor = registry.hook.kp_executor(dsl=dsl, device=device, settings=settings)
    if executor is None:
        known = ", ".join(known_dsls(registry)) or "(none)"
        raise ToolMissingError(
            f"no installed plugin provides an executor for dsl {dsl!r} on {device!r} (dsls: {known})"
        )
    return executor


def claimed_dsl(registry: Any, kernel_path: Path) -> str:
    """The one DSL whose plugin claims the file (``kp_claim_file``); nothing is built to decide."""
    source = Path(kernel_path).read_text(encoding="utf-8")
    claimed = list(dict.fromkeys(registry.collect("kp_claim_file", path=Path(kernel_path), source=source)))
    if len(claimed) == 1:
        return str(claimed[0])
    raise InputError(
        f"cannot tell the DSL of this file ({'claimed by ' + ', '.join(claimed) if claimed else 'no plugin claims it'}); "
        f"pass --dsl (installed: {', '.join(known_dsls(registry))})",
        file=str(kernel_path),
        field="--dsl",
    )


def detect_dsl(
    registry: Any, kernel_path: Path, requested: str | None, device: str, settings: Any
) -> tuple[str, Any]:
    """``--dsl`` if given, otherwise the one DSL that claims the file; and that DSL's executor."""
    if requested:
        dsls = known_dsls(registry)
        if requested not in dsls:
            raise InputError(f"unknown dsl {requested!r}; installed: {', '.join(dsls)}", field="--dsl")
        return requested, executor_for(registry, requested, device, settings)
    dsl = claimed_dsl(registry, kernel_path)
    return dsl, executor_for(registry, dsl, device, settings)


def build_settings(cli: dict[str, Any], spec: Any, variant: str, spec_file: str | None = None) -> Any:
    """Settings with CLI > spec variant (rtol/atol) > environment/.env > defaults."""
    from kernelpilot.settings import load_settings

    return load_settings(cli=cli, spec=spec.tolerance_settings(variant), spec_file=spec_file)


@dataclass
class PluginParts:
    stages: list[Any]
    analyzers: list[Any]
    prompt_dirs: list[Path]
    knowledge_dirs: list[Any]


def plugin_parts(registry: Any, dsl: str, device: str) -> PluginParts:
    from kernelpilot.engines.selection import stage_objects
    from kernelpilot.llm.prompts import prompt_dirs_for

    return PluginParts(
        stages=stage_objects(registry.collect("kp_stages")),
        analyzers=registry.collect("kp_analyzers"),
        prompt_dirs=prompt_dirs_for(registry.collect("kp_prompt_dirs"), dsl, device),
        knowledge_dirs=registry.collect("kp_knowledge_dirs"),
    )

"""Resolve one kernel + spec into settings, variant, DSL, device and a prepared executor.

``optimize`` and every ``skill`` command go through here, so the tolerance priority (CLI > spec
variant > environment > defaults), DSL detection and oracle choice are identical everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Session:
    kernel_path: Path
    spec_path: Path
    spec: Any
    variant: str
    device: str
    dsl: str
    settings: Any
    executor: Any
    registry: Any


def open_session(
    kernel_path: Path,
    spec_path: Path,
    *,
    variant: str | None,
    device: str | None,
    dsl: str | None,
    cli_settings: dict[str, Any],
    prepare: bool = True,
    registry: Any = None,
) -> Session:
    from kernelpilot.fileio import read_text
    from kernelpilot.pipeline.setup import build_settings, detect_device, detect_dsl
    from kernelpilot.plugins import get_registry
    from kernelpilot.spec import load_spec

    kernel_path = Path(kernel_path)
    read_text(kernel_path, field="--input", what="kernel file")
    spec = load_spec(spec_path)
    variant_name = spec.choose_variant(variant)
    spec.variant(variant_name)  # validate now: errors name the file and the variant
    settings = build_settings(cli_settings, spec, variant_name, spec_file=str(spec_path))
    resolved_device = detect_device(device)
    registry = registry or get_registry()
    resolved_dsl, executor = detect_dsl(registry, kernel_path, dsl, resolved_device, settings)
    if prepare:
        executor.prepare(kernel_path, spec, variant_name)
    return Session(
        kernel_path=kernel_path,
        spec_path=Path(spec_path),
        spec=spec,
        variant=variant_name,
        device=resolved_device,
        dsl=resolved_dsl,
        settings=settings,
        executor=executor,
        registry=registry,
    )

"""Resolve one kernel + spec into settings, variant, DSL, device and a prepared executor.

``optimize`` and every ``skill`` command go through here, so the tolerance priority (CLI > spec
variant > environment > defaults), DSL detection and oracle choice are identical everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError

# variants that suit a machine without a GPU, in order of preference (Xe-Forge's spec files carry them)
CPU_VARIANTS = ("bench-cpu", "ci")


def choose_variant(spec: Any, requested: str | None, device: str) -> str:
    """CLI > ``default_variant`` > (on a CPU-only run: ``bench-cpu`` > ``ci``) > ``bench-gpu`` > the only one.

    A ``bench-gpu`` variant under the CPU interpreter runs GPU-sized problems for minutes; the CPU
    preference applies only when the user named no variant and the spec names no default.
    """
    if requested is None and spec.default_variant is None and device == "cpu":
        for name in CPU_VARIANTS:
            if name in spec.variants:
                import sys

                print(
                    f"kernelpilot: no GPU: using spec variant {name!r} (pass --variant to choose another)",
                    file=sys.stderr,
                )
                return name
    return spec.choose_variant(requested)


def select_device_index(device: str, index: int) -> None:
    """XPU_DEVICE=xpu:N / cuda:N: make GPU N the only one the worker processes see.

    The variable the driver stack reads (set before any worker process starts) comes from the vendor of
    a registered target, so a plugin that adds a vendor adds its device here too."""
    import os

    from kernelpilot.targets import visible_devices_variable

    variable = visible_devices_variable(device)
    if variable is None:
        raise InputError(f"a device index ({index}) needs a GPU device, not {device!r}", field="XPU_DEVICE")
    current = os.environ.get(variable)
    if current is not None and current != str(index):
        raise InputError(
            f"XPU_DEVICE asks for GPU {index} but {variable}={current} is already set; keep one of them",
            field="XPU_DEVICE",
        )
    os.environ[variable] = str(index)


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
    from kernelpilot.settings import load_settings
    from kernelpilot.spec import load_spec

    kernel_path = Path(kernel_path)
    read_text(kernel_path, field="--input", what="kernel file")
    spec = load_spec(spec_path)
    # settings without the spec's tolerances first: DEVICE_TYPE / XPU_DEVICE decide the device,
    # and the device decides the default variant
    plain = load_settings(cli=cli_settings)
    env_device, index = plain.device_and_index()
    resolved_device = detect_device(device or env_device)
    if index is not None and resolved_device != "cpu" and (device is None or device == env_device):
        select_device_index(resolved_device, index)  # a --device of another kind overrides XPU_DEVICE
    variant_name = choose_variant(spec, variant, resolved_device)
    spec.variant(variant_name)  # validate now: errors name the file and the variant
    settings = build_settings(cli_settings, spec, variant_name, spec_file=str(spec_path))
    registry = registry or get_registry()
    resolved_dsl, executor = detect_dsl(registry, kernel_path, dsl or settings.dsl, resolved_device, settings)
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

"""Target-model lookup through the plugin registry.

The core never imports a backend by name: the ``sycl`` plugin contributes the Xe models (``bmg``,
``pvc`` ...), the ``cuda`` plugin the Hopper model (``sm90``), and a third-party plugin can add more
through the same ``kp_target_models`` hook.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.errors import InputError


def list_target_models() -> dict[str, Any]:
    """All registered target models by name (first registration of a name wins)."""
    from kernelpilot.plugins import get_registry

    models: dict[str, Any] = {}
    for model in get_registry().collect("kp_target_models"):
        name = getattr(model, "name", None)
        if name and name not in models:
            models[name] = model
    return models


def get_target_model(name: str) -> Any:
    """The target model called ``name``; an unknown name is an :class:`InputError` listing the known ones."""
    models = list_target_models()
    if name not in models:
        known = ", ".join(sorted(models)) or "(none: no plugin provides target models)"
        raise InputError(f"unknown target {name!r}; available targets: {known}", field="target")
    return models[name]


def target_family(name: str | None) -> str | None:
    """The family of the target called ``name`` (``xe`` for ``bmg``/``pvc``/..., ``sm90``), or None when no
    installed plugin provides it: a run document of such a target still renders, without the family's
    extras.  Generic code asks this instead of keeping its own list of target names."""
    if not name:
        return None
    model = list_target_models().get(name)
    return getattr(model, "family", None) or None


def visible_devices_variable(torch_device: str) -> str | None:
    """The variable that pins processes to one GPU of PyTorch device type ``torch_device`` (``cuda``,
    ``xpu``), from the vendor of a registered target; None when no installed target's vendor runs such
    GPUs.  The optimize pipeline asks this instead of keeping its own vendor table."""
    for model in list_target_models().values():
        vendor = getattr(model, "vendor", None)
        if vendor is not None and vendor.torch_device == torch_device and vendor.visible_devices_env:
            return str(vendor.visible_devices_env)
    return None

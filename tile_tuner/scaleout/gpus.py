"""Which GPUs ``--gpus`` means, and the environment that pins a benchmark process to one of them.

Why environment variables: a benchmark program is a separate process that takes "device 0"; pinning
it with the vendor's visibility variable (``CUDA_VISIBLE_DEVICES`` for NVIDIA, ``ZE_AFFINITY_MASK`` +
``ONEAPI_DEVICE_SELECTOR`` for Intel Level Zero / SYCL) makes device 0 the GPU we chose without touching
the program.  Which variable, and how GPUs are listed, is the vendor's business
(:class:`kernelpilot.hw_models.base.GpuVendor`, named by each target model); this module only resolves.  ``--gpus`` indices
are indices into the GPUs this process can see: with ``CUDA_VISIBLE_DEVICES=2,3`` already set,
``--gpus 1`` pins to physical GPU 3, so a job scheduler's allocation is respected.
"""

from __future__ import annotations

import os
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.hw_models.base import GpuVendor
from kernelpilot.targets import list_target_models


def gpu_vendor(name: str) -> GpuVendor:
    """The GPU vendor called ``name`` (a ``TileKernel.backend``), as the registered target models name it."""
    vendors = {m.vendor.name: m.vendor for m in list_target_models().values() if m.vendor.name}
    if name not in vendors:
        raise InputError(
            f"no target model runs on {name!r} GPUs; known: {', '.join(sorted(vendors)) or 'none'}",
            field="--gpus",
        )
    return vendors[name]


def vendor_of(groups: list[Any]) -> str:
    """``cuda`` or ``sycl`` from the batch's kernels (``TileKernel.backend``); ``cuda`` if unknown."""
    backends: set[str] = {
        b for g in groups if (b := getattr(getattr(g, "kernel", None), "backend", None)) is not None
    }
    if len(backends) > 1:
        raise InputError(
            f"one batch mixes backends {sorted(backends)}; --gpus pins one vendor", field="--gpus"
        )
    return backends.pop() if backends else "cuda"


def pin_env(vendor: str, device: str) -> dict[str, str]:
    """Environment that makes ``device`` (a physical id or UUID) the only GPU a process sees."""
    return gpu_vendor(vendor).pin_env(device)


def visible_gpus(vendor: str) -> list[str]:
    """Physical ids of the GPUs this process may use (the pinning variable if set, else probed)."""
    gv = gpu_vendor(vendor)
    preset = os.environ.get(gv.visible_devices_env)
    if preset is not None and preset.strip() != "":
        return [p.strip() for p in preset.split(",") if p.strip()]
    return gv.probe_gpus()


def parse_gpus(spec: str) -> list[int] | None:
    """``all`` -> None (every visible GPU); ``0,1,3`` -> [0, 1, 3].  Anything else is an InputError."""
    text = spec.strip().lower()
    if text == "all":
        return None
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise InputError(
                f"{spec!r}: expected 'all' or comma-separated GPU indices such as 0,1 (bad entry {part!r})",
                field="--gpus",
            )
        if int(part) in out:
            raise InputError(f"{spec!r}: GPU {part} listed twice", field="--gpus")
        out.append(int(part))
    return out


def resolve_gpus(spec: str, vendor: str, *, replay: bool = False) -> list[str]:
    """Physical device ids for ``--gpus``.

    With ``--replay`` nothing runs on a GPU, so explicit indices are accepted as pool slots even on a
    machine without GPUs (that is how the scale-out is tested on CPUs); ``all`` still needs GPUs.
    """
    wanted = parse_gpus(spec)
    visible = visible_gpus(vendor)
    if wanted is None:
        if not visible:
            hint = " (with --replay, give indices such as --gpus 0,1 to size the pool)" if replay else ""
            raise ToolMissingError(f"--gpus all: no {vendor} GPU is visible{hint}")
        return visible
    if replay and not visible:
        return [str(i) for i in wanted]
    if not visible:
        raise ToolMissingError(f"--gpus {spec}: no {vendor} GPU is visible")
    bad = [i for i in wanted if i >= len(visible)]
    if bad:
        raise InputError(
            f"{spec!r}: GPU index {bad[0]} is not visible; allowed: 0..{len(visible) - 1} ({len(visible)} visible)",
            field="--gpus",
        )
    return [visible[i] for i in wanted]

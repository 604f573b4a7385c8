"""Tile kernels by kind and target, from every plugin's ``kp_tile_kernels``.

A module of its own so the tuning API and the scale-out workers (which resolve a kernel by name when a
task does not carry one) both look kernels up without importing each other.
"""

from __future__ import annotations

from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.plugins import get_registry


def get_tile_kernel(kind: str, target: str) -> Any:
    """The registered TileKernel of ``kind`` serving ``target`` (from every plugin's kp_tile_kernels)."""
    kernels = get_registry().collect("kp_tile_kernels")
    for k in kernels:
        if k.kind == kind and target in k.targets:
            return k
    have = sorted({f"{k.kind} ({', '.join(k.targets)})" for k in kernels})
    raise InputError(
        f"no tile kernel {kind!r} for target {target!r}; registered: {', '.join(have) or 'none'}",
        field="kernel",
    )

"""``kp_tile_kernels`` hook of the sycl plugin: the five sycl-tla kernels for the Xe targets (bmg, pvc)."""

from __future__ import annotations

from typing import Any

from kernelpilot.hookspecs import hookimpl


@hookimpl
def kp_tile_kernels() -> list[Any]:
    from kernelpilot.dsl_plugins.sycl.kernels import all_kernels

    return list(all_kernels())

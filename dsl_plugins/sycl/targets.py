"""SYCL plugin: contributes the Intel Xe (sycl-tla) constraint models ``bmg``, ``pvc`` and ``xe2_igpu``."""

from __future__ import annotations

from typing import Any

from kernelpilot.hookspecs import hookimpl


@hookimpl
def kp_target_models() -> list[Any]:
    from kernelpilot.hw_models.xe.model import xe_models

    return list(xe_models())

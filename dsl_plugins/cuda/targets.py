"""CUDA plugin: contributes the Hopper (sm90a) CUTLASS constraint model."""

from __future__ import annotations

from typing import Any

from kernelpilot.hookspecs import hookimpl


@hookimpl
def kp_target_models() -> list[Any]:
    from kernelpilot.hw_models.sm90.model import Sm90Model

    return [Sm90Model()]

"""Calibrating a cost model against measurements.

The analytical models rank configurations; their absolute numbers rest on a few constants.  Once the
tuner has measured some configs on a device, :func:`fit_scales` learns one multiplicative correction per
group of configs (by default per schedule: a cooperative kernel and a ping-pong kernel miss the model
in different ways) as the geometric mean of measured/estimated times, and :class:`CalibratedModel`
applies it.  Groups never measured keep the global correction, so the ranking inside a group is the
model's and across groups it follows the measurements.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from kernelpilot.hw_models.catalogue import Device
from kernelpilot.hw_models.types import TileConfig

GLOBAL = "*"


def default_group(config: TileConfig) -> str:
    d = config.as_dict()
    return f"{d.get('kernel', '')}/{d.get('schedule', '')}"


def fit_scales(
    model: Any,
    records: Iterable[tuple[TileConfig, dict[str, Any], float]],
    device: Device | str | None = None,
    group: Callable[[TileConfig], str] = default_group,
) -> dict[str, float]:
    """``{group: scale}`` with ``measured ≈ scale * estimate``; ``"*"`` is the fit over all records.

    Records are ``(config, problem, measured_seconds)``; non-positive or non-finite times are skipped
    (a failed run is not a measurement).
    """
    logs: dict[str, list[float]] = {}
    for cfg, problem, measured in records:
        if not (measured > 0 and math.isfinite(measured)):
            continue
        est = model.estimate_time_s(cfg, problem, device)
        if not (est > 0 and math.isfinite(est)):
            continue
        ratio = math.log(measured / est)
        logs.setdefault(group(cfg), []).append(ratio)
        logs.setdefault(GLOBAL, []).append(ratio)
    return {key: math.exp(sum(vals) / len(vals)) for key, vals in logs.items()}


class CalibratedModel:
    """A target model whose ``estimate_time_s`` is scaled by fitted corrections; everything else delegates."""

    def __init__(
        self, model: Any, scales: dict[str, float], group: Callable[[TileConfig], str] = default_group
    ) -> None:
        self._model = model
        self.scales = dict(scales)
        self._group = group

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def estimate_time_s(
        self, config: TileConfig, problem: dict[str, Any], device: Device | str | None = None
    ) -> float:
        base = self._model.estimate_time_s(config, problem, device)
        scale = self.scales.get(self._group(config), self.scales.get(GLOBAL, 1.0))
        return base * scale

"""Search axes: how a target's configs look to the generic search strategies and space filters.

A config is a few fields (``tile``, ``schedule``, ``stages`` ...), some of them tuples of extents.  A
search strategy that learns from measurements (optuna TPE) needs to know which fields are unordered
choices and which are numbers, and that a tile ``[256, 128, 32]`` is three numbers rather than one
opaque name: a TPE that sees ``wg = "[256, 128, 32]"`` as a category cannot tell that a 256-wide tile
resembles a 128-wide one more than a 32-wide one.  Each target declares its axes
(:meth:`~kernelpilot.hw_models.base.TargetModel.search_axes`), so the tuner never names a target's field.

A field a target does not declare is one categorical axis: exactly what the search saw before targets
declared anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

#: ``categorical``: unordered choices (schedules, booleans); ``ordinal``: ordered numbers whose *rank*
#: matters more than their difference (power-of-two extents: 64 -> 128 is the step 128 -> 256 is);
#: ``int``: plain integers whose difference matters (pipeline stages)
AxisKind = Literal["categorical", "ordinal", "int"]
AXIS_KINDS: tuple[str, ...] = ("categorical", "ordinal", "int")


@dataclass(frozen=True)
class SearchAxis:
    """One config field as a search dimension.

    ``parts`` splits a tuple-valued field into one dimension per element, named ``<field>_<part>``
    (``tile`` with parts ``m, n, k`` -> ``tile_m``, ``tile_n``, ``tile_k``); ``kind`` applies to each
    part.  A value shorter than ``parts`` (a 2-element output tile next to 3-element ones) simply has
    fewer dimensions; the search treats the missing ones as absent.
    """

    field: str
    kind: AxisKind = "categorical"
    parts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in AXIS_KINDS:
            raise ValueError(
                f"search axis {self.field!r}: kind {self.kind!r}; allowed: {', '.join(AXIS_KINDS)}"
            )

    def names(self) -> tuple[str, ...]:
        """The dimension names this axis contributes (its parts, or the field itself)."""
        return tuple(f"{self.field}_{p}" for p in self.parts) if self.parts else (self.field,)


def config_fields(config: Any) -> dict[str, Any]:
    """The config's canonical fields (``as_dict()``) plus the fields ``as_dict`` leaves out at their
    default (``swap_ab: false`` on sm90), read from the config, so every config of a space has every
    field: a field present in only some configs would otherwise be invisible to a search that compares
    configs field by field."""
    d = config.as_dict() if hasattr(config, "as_dict") else dict(config)
    for name in getattr(type(config), "model_fields", {}):
        if name not in d:
            d[name] = getattr(config, name)
    return d


def axis_values(config: Any, axes: Iterable[SearchAxis]) -> dict[str, tuple[AxisKind, Any]]:
    """Dimension name -> (kind, value) of ``config`` in field order, tuple fields split by their axis."""
    by_field = {a.field: a for a in axes}
    out: dict[str, tuple[AxisKind, Any]] = {}
    for name, value in config_fields(config).items():
        axis = by_field.get(name)
        if axis is not None and axis.parts and isinstance(value, list | tuple):
            for part, v in zip(axis.parts, value, strict=False):  # a shorter value has fewer extents
                out[f"{name}_{part}"] = (axis.kind, v)
        else:
            out[name] = (axis.kind if axis is not None else "categorical", value)
    return out


def part_names(axes: Iterable[SearchAxis]) -> list[str]:
    """The names of every split dimension (``tile_m`` ...), in declaration order."""
    return [n for a in axes if a.parts for n in a.names()]

"""The proposer interface: every search strategy is one small class behind :func:`make_proposer`.

A proposer sees the workload's :class:`~kernelpilot.tile_tuner.space.SearchSpace` and the history of
measurements (a config key -> time in ms, or ``None`` for a config that failed) and returns the next
configs to measure.  It never builds or runs anything, so every proposer is testable on recorded
data (``--replay``) and comparable over many seeds for free.

``speculative`` proposers (exhaustive, random) do not need the last batch's results, so the engine
may build their next batch while the current one is being benchmarked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.tile_tuner.space import SearchSpace, config_key


@dataclass
class Observation:
    key: str
    config: Any
    time_ms: float | None  # None: failed (build, run, verification) -- never "best"
    status: str = "ok"


@dataclass
class History:
    observations: list[Observation] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)  # proposed, not measured yet
    invalid: list[dict[str, Any]] = field(default_factory=list)  # illegal proposals (llm)

    def keys(self) -> set[str]:
        return {o.key for o in self.observations} | self.pending

    def ok(self) -> list[Observation]:
        return [o for o in self.observations if o.time_ms is not None and math.isfinite(o.time_ms)]

    def best(self, n: int = 1) -> list[Observation]:
        return sorted(self.ok(), key=lambda o: o.time_ms)[:n]  # type: ignore[arg-type, return-value]


class Proposer:
    """Base class: subclasses implement :meth:`_propose`."""

    name = "base"
    speculative = False

    def __init__(self, space: SearchSpace, seed: int = 0, **options: Any) -> None:
        self.space = space
        self.seed = seed
        self.options = options

    def propose(self, n: int, history: History) -> list[Any]:
        """Up to ``n`` configs not yet measured or pending; [] when the proposer has nothing left."""
        taken = history.keys()
        out: list[Any] = []
        for cfg in self._propose(n, history):
            key = config_key(cfg)
            if key in taken:
                continue
            taken.add(key)
            out.append(cfg)
            if len(out) >= n:
                break
        return out

    def _propose(self, n: int, history: History) -> list[Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def unmeasured(self, history: History) -> list[Any]:
        taken = history.keys()
        return [c for c in self.space.configs if config_key(c) not in taken]

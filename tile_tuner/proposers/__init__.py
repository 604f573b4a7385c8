"""Proposers: exhaustive, random, model (default), bayes (optuna TPE), llm (litellm), hybrid, and any
registered under the ``kernelpilot.proposers`` entry-point group (:mod:`.registry`)."""

from __future__ import annotations

from typing import Any

from kernelpilot.tile_tuner.proposers.base import History, Observation, Proposer
from kernelpilot.tile_tuner.proposers.registry import proposer_class, registered

PROPOSERS = tuple(registered())


def make_proposer(name: str, space: Any, seed: int = 0, **options: Any) -> Proposer:
    """The proposer called ``name`` for ``space`` (its module imported only when chosen)."""
    return proposer_class(name)(space, seed, **options)


__all__ = ["PROPOSERS", "History", "Observation", "Proposer", "make_proposer"]

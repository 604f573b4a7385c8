"""Proposers: exhaustive, random, model (default), bayes (optuna TPE), llm (litellm), hybrid."""

from __future__ import annotations

from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.proposers.base import History, Observation, Proposer

PROPOSERS = ("model", "exhaustive", "random", "bayes", "llm", "hybrid")


def make_proposer(name: str, space: Any, seed: int = 0, **options: Any) -> Proposer:
    """The proposer called ``name`` for ``space`` (heavy libraries imported only when chosen)."""
    if name == "exhaustive":
        from kernelpilot.tile_tuner.proposers.simple import ExhaustiveProposer as cls
    elif name == "random":
        from kernelpilot.tile_tuner.proposers.simple import RandomProposer as cls
    elif name == "model":
        from kernelpilot.tile_tuner.proposers.simple import ModelProposer as cls
    elif name == "bayes":
        from kernelpilot.tile_tuner.proposers.bayes import BayesProposer as cls
    elif name == "llm":
        from kernelpilot.tile_tuner.proposers.llm import LLMProposer as cls
    elif name == "hybrid":
        from kernelpilot.tile_tuner.proposers.llm import HybridProposer as cls
    else:
        raise InputError(f"unknown proposer {name!r}; allowed: {', '.join(PROPOSERS)}", field="proposer")
    return cls(space, seed, **options)


__all__ = ["PROPOSERS", "History", "Observation", "Proposer", "make_proposer"]

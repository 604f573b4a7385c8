"""Exhaustive, random and cost-model-guided proposers."""

from __future__ import annotations

import random
from typing import Any

from kernelpilot.tile_tuner.proposers.base import History, Proposer
from kernelpilot.tile_tuner.space import SearchSpace, config_key


class ExhaustiveProposer(Proposer):
    """Every legal config, in the model's enumeration order.

    The order is the same for every problem on purpose: workloads tuned together then propose the
    same configs in the same round, so each round builds one set of binaries that all shapes share.
    """

    name = "exhaustive"
    speculative = True

    def _propose(self, n: int, history: History) -> list[Any]:
        taken = history.keys()
        return [c for c in self.space.configs if config_key(c) not in taken]


class RandomProposer(Proposer):
    """Uniform random order over the legal space (seeded): the baseline every proposer must beat."""

    name = "random"
    speculative = True

    def __init__(self, space: SearchSpace, seed: int = 0, *, device: Any = None, **options: Any) -> None:
        super().__init__(space, seed, device=device, **options)
        self._order = list(space.configs)
        random.Random(seed).shuffle(self._order)

    def _propose(self, n: int, history: History) -> list[Any]:
        taken = history.keys()
        return [c for c in self._order if config_key(c) not in taken]


class ModelProposer(Proposer):
    """Cost-model guided (the default).

    First batch: the configs the analytical model ranks best.  Later batches: half refinement (legal
    neighbours of the best measured configs, ranked by the model) and half the next configs of the
    model's ranking, so a wrong model is corrected by measurements and a right one is exploited.
    """

    name = "model"

    def _propose(self, n: int, history: History) -> list[Any]:
        taken = history.keys()
        ranked = [c for c in self.space.ranked() if config_key(c) not in taken]
        best = history.best(3)
        if not best:
            return ranked
        refine: list[Any] = []
        seen: set[str] = set()
        for obs in best:
            for nb in self.space.neighbours(obs.config):
                key = config_key(nb)
                if key not in taken and key not in seen:
                    seen.add(key)
                    refine.append(nb)
        refine.sort(key=self.space.estimate)
        n_refine = max(1, n // 2) if refine else 0
        out = refine[:n_refine]
        chosen = {config_key(c) for c in out}
        out += [c for c in ranked if config_key(c) not in chosen]
        return out

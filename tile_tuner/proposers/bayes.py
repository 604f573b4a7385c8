"""Bayesian optimisation over the legal space with optuna's TPE sampler.

Each config field with more than one value in the space becomes a categorical parameter (the tile
is split into tile_m / tile_n / tile_k).  TPE samples parameter combinations; a combination that is
illegal or already measured is mapped onto the nearest unmeasured legal config (most equal fields,
ties broken by the cost model), and the *measured* config -- not the sampled one -- is what optuna
learns from (``add_trial``), so the model never learns from configs that were not run.
"""

from __future__ import annotations

import math
from typing import Any

from kernelpilot.tile_tuner.proposers.base import History, Proposer
from kernelpilot.tile_tuner.space import config_key


def _params(cfg: Any) -> dict[str, str]:
    d = cfg.as_dict() if hasattr(cfg, "as_dict") else dict(cfg)
    out: dict[str, str] = {}
    for name, value in d.items():
        if name == "tile" and isinstance(value, list | tuple):
            out.update({f"tile_{'mnk'[i]}": str(v) for i, v in enumerate(value[:3])})
        else:
            out[name] = value if isinstance(value, str) else str(value)
    return out


class BayesProposer(Proposer):
    name = "bayes"

    def __init__(self, space, seed: int = 0, **options: Any) -> None:
        super().__init__(space, seed, **options)
        import optuna  # lazy: optional at CLI start-up

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self._params = {config_key(c): _params(c) for c in space.configs}
        values: dict[str, set[str]] = {}
        for p in self._params.values():
            for k, v in p.items():
                values.setdefault(k, set()).add(v)
        self._dists = {
            k: optuna.distributions.CategoricalDistribution(sorted(v))
            for k, v in values.items()
            if len(v) > 1
        }
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=int(options.get("startup", 4)), multivariate=True, constant_liar=True
        )
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._told: set[str] = set()

    def _sync(self, history: History) -> None:
        ok = [o.time_ms for o in history.ok()]
        worst = max(ok) if ok else 1.0
        for obs in history.observations:
            if obs.key in self._told or obs.key not in self._params:
                continue
            self._told.add(obs.key)
            value = obs.time_ms if obs.time_ms is not None and math.isfinite(obs.time_ms) else 3.0 * worst
            params = {k: v for k, v in self._params[obs.key].items() if k in self._dists}
            self._study.add_trial(
                self._optuna.trial.create_trial(
                    params=params, distributions=self._dists, value=math.log(value)
                )
            )

    def _propose(self, n: int, history: History) -> list[Any]:
        self._sync(history)
        taken = set(history.keys())
        out: list[Any] = []
        free = [c for c in self.space.configs if config_key(c) not in taken]
        for _ in range(n):
            if not free:
                break
            trial = self._study.ask(self._dists)
            want = trial.params

            def score(c: Any, want: dict[str, Any] = want) -> tuple[int, float]:
                p = self._params[config_key(c)]
                return (-sum(p.get(k) == v for k, v in want.items()), self.space.estimate(c))

            pick = min(free, key=score)
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
            free.remove(pick)
            out.append(pick)
        return out

"""Bayesian optimisation over the legal space with optuna's TPE sampler.

The target declares how its configs look as search dimensions (``TargetModel.search_axes``): a tile
splits into one dimension per extent, and each dimension is categorical, ordinal (TPE samples the rank
among the space's values) or int (TPE samples the value).  Only dimensions with more than one value in
the space become optuna parameters.  TPE samples parameter combinations; a combination that is illegal
or already measured is mapped onto the nearest unmeasured legal config (smallest total distance: a
categorical mismatch counts 1, a numeric one its share of the dimension's range; ties broken by the
cost model), and the *measured* config -- not the sampled one -- is what optuna learns from
(``add_trial``), so the model never learns from configs that were not run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from kernelpilot.hw_models.axes import axis_values
from kernelpilot.tile_tuner.proposers.base import History, Proposer, ProposerOptions
from kernelpilot.tile_tuner.space import SearchSpace, config_key


@dataclass(frozen=True)
class Dimension:
    """One optuna parameter: its kind and, for ``ordinal``, the sorted values it ranks."""

    kind: str
    levels: tuple[Any, ...]

    def encode(self, value: Any) -> Any:
        """The parameter value optuna sees for a config's ``value``."""
        if self.kind == "ordinal":
            return self.levels.index(value)
        if self.kind == "int":
            return value
        return _label(value)

    def distance(self, a: Any, b: Any) -> float:
        """0 for equal encoded values, up to 1 for the farthest apart (1 for any categorical mismatch)."""
        if self.kind == "categorical" or a is None or b is None:
            return 0.0 if a == b else 1.0
        span = len(self.levels) - 1 if self.kind == "ordinal" else self.levels[-1] - self.levels[0]
        return abs(a - b) / span if span else 0.0


def _label(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def dimensions(space: SearchSpace) -> tuple[dict[str, Dimension], dict[str, dict[str, Any]]]:
    """The space's dimensions with more than one value, and every config's encoded values (by key).

    A numeric dimension that some config lacks or holds a non-integer in is categorical instead:
    rank and distance are undefined there.
    """
    axes = space.model.search_axes(space.kernel)
    raw = {config_key(c): axis_values(c, axes) for c in space.configs}
    kinds: dict[str, str] = {}
    values: dict[str, set[Any]] = {}
    for fields in raw.values():
        for name, (axis_kind, value) in fields.items():
            kinds.setdefault(name, axis_kind)
            values.setdefault(name, set()).add(value if axis_kind != "categorical" else _label(value))
    dims: dict[str, Dimension] = {}
    for name, kind in kinds.items():
        present = all(name in fields for fields in raw.values())
        vals = values[name]
        if kind != "categorical" and not (present and all(_is_int(v) for v in vals)):
            kind, vals = "categorical", {_label(v) for v in vals} | ({"None"} if not present else set())
        elif kind == "categorical" and not present:
            vals = vals | {"None"}
        if len(vals) > 1:
            dims[name] = Dimension(kind, tuple(sorted(vals)))
    encoded = {
        key: {name: dim.encode(fields[name][1] if name in fields else None) for name, dim in dims.items()}
        for key, fields in raw.items()
    }
    return dims, encoded


class BayesOptions(ProposerOptions):
    startup: int = Field(4, ge=1, description="random proposals before TPE models the measurements")


class BayesProposer(Proposer):
    name = "bayes"
    Options = BayesOptions
    options: BayesOptions

    def __init__(self, space: SearchSpace, seed: int = 0, *, device: Any = None, **options: Any) -> None:
        super().__init__(space, seed, device=device, **options)
        import optuna  # lazy: optional at CLI start-up

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self._dims, self._params = dimensions(space)
        self._dists: dict[str, Any] = {}
        for k, dim in self._dims.items():
            if dim.kind == "categorical":
                self._dists[k] = optuna.distributions.CategoricalDistribution(list(dim.levels))
            elif dim.kind == "ordinal":
                self._dists[k] = optuna.distributions.IntDistribution(0, len(dim.levels) - 1)
            else:
                self._dists[k] = optuna.distributions.IntDistribution(dim.levels[0], dim.levels[-1])
        sampler = optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=self.options.startup, multivariate=True, constant_liar=True
        )
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._told: set[str] = set()

    def _sync(self, history: History) -> None:
        ok = [o.time_ms for o in history.ok() if o.time_ms is not None]  # ok() has times only
        worst = max(ok) if ok else 1.0
        for obs in history.observations:
            if obs.key in self._told or obs.key not in self._params:
                continue
            self._told.add(obs.key)
            value = obs.time_ms if obs.time_ms is not None and math.isfinite(obs.time_ms) else 3.0 * worst
            self._study.add_trial(
                self._optuna.trial.create_trial(
                    params=self._params[obs.key], distributions=self._dists, value=math.log(value)
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

            def score(c: Any, want: dict[str, Any] = want) -> tuple[float, float]:
                p = self._params[config_key(c)]
                return (sum(self._dims[k].distance(p[k], v) for k, v in want.items()), self.space.estimate(c))

            pick = min(free, key=score)
            self._study.tell(trial, state=self._optuna.trial.TrialState.FAIL)
            free.remove(pick)
            out.append(pick)
        return out

"""The proposer interface: every search strategy is one small class behind :func:`make_proposer`.

A proposer sees the workload's :class:`~kernelpilot.tile_tuner.space.SearchSpace` and the history of
measurements (a config key -> time in ms, or ``None`` for a config that failed) and returns the next
configs to measure.  It never builds or runs anything, so every proposer is testable on recorded
data (``--replay``) and comparable over many seeds for free.

``speculative`` proposers (exhaustive, random) do not need the last batch's results, so the engine
may build their next batch while the current one is being benchmarked.

Each proposer declares the options a user may set (``proposer_options:`` in a batch file,
``--proposer-options``) as a pydantic model, :attr:`Proposer.Options`: an unknown option or a bad value
is an input error naming the option and what is allowed, never silently ignored.  What the tuner hands
every proposer at run time (the modelled ``device``) is a keyword of its own, not an option.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError

from kernelpilot.errors import InputError
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


class ProposerOptions(BaseModel):
    """Options of a proposer that takes none; subclasses add fields (with defaults) for their own."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def parse_options(
    name: str, model: type[ProposerOptions], raw: dict[str, Any], where: str = ""
) -> ProposerOptions:
    """``raw`` validated against proposer ``name``'s options model; an :class:`InputError` naming
    ``where`` (file and workload), the option (``proposer_options.<option>``) and the allowed options
    or values otherwise."""
    prefix = f"{where}: " if where else ""
    if not isinstance(raw, dict):
        raise InputError(
            f"{prefix}proposer {name!r}: options must be a mapping of option -> value, got {raw!r}",
            field="proposer_options",
        )
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        option = ".".join(str(p) for p in err["loc"]) or "(options)"
        allowed = describe_options(model)
        if err["type"] == "extra_forbidden":
            message = f"{prefix}proposer {name!r}: unknown option {option!r}; allowed: {allowed}"
        else:
            message = (
                f"{prefix}proposer {name!r}: option {option!r}: {err['msg']} (got {err.get('input')!r}); "
                f"allowed: {allowed}"
            )
        raise InputError(message, field=f"proposer_options.{option}") from None


def describe_options(model: type[ProposerOptions]) -> str:
    """``startup (int, default 4: ...)`` for each option, or ``none (this proposer takes no options)``."""
    parts = []
    for option, info in model.model_fields.items():
        kind = getattr(info.annotation, "__name__", str(info.annotation))
        bounds = "".join(
            f", {op} {getattr(m, attr)}"
            for m in info.metadata
            for attr, op in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
            if getattr(m, attr, None) is not None
        )
        about = f": {info.description}" if info.description else ""
        parts.append(f"{option} ({kind}{bounds}, default {info.default!r}{about})")
    return "; ".join(parts) if parts else "none (this proposer takes no options)"


class Proposer:
    """Base class: subclasses implement :meth:`_propose` and declare their :attr:`Options`."""

    name = "base"
    speculative = False
    #: the options a user may set; the default: none
    Options: ClassVar[type[ProposerOptions]] = ProposerOptions

    def __init__(self, space: SearchSpace, seed: int = 0, *, device: Any = None, **options: Any) -> None:
        self.space = space
        self.seed = seed
        self.device = device  # the modelled device (catalogue entry), when the tuner knows it
        self.options = parse_options(self.name, self.Options, options)

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

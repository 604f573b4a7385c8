"""The legal search space of one workload, as the proposers see it.

The target model (``hw_models``) decides legality, the default config and the cost estimate; this
module only materializes the space once per workload (enumeration is fast: well under a second),
applies an optional user filter (``space:`` in the batch YAML / ``--space-filter``), and gives each
config a canonical key (sorted-key JSON of ``as_dict()``) used by the store and the build cache.

Stream-K twins: for a target whose cooperative GEMM also accepts ``tile_scheduler: streamk`` (sm90),
the stream-K build is a superset of the persistent one at run time (its data-parallel mode is the
persistent schedule; split-K / stream-K are extra run-time variants), so with ``streamk_twins`` the
space swaps each cooperative-persistent config for its stream-K twin when the model accepts it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.errors import InputError, NoLibraryDefaultError
from kernelpilot.hw_models.axes import SearchAxis, axis_values, config_fields, part_names


def config_key(config: Any) -> str:
    d = config.as_dict() if hasattr(config, "as_dict") else dict(config)
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


def config_label(config: Any) -> str:
    if hasattr(config, "label"):
        return str(config.label())
    return config_key(config)


def _norm(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_norm(v) for v in value]
    return value


def matches_filter(
    config: Any, space_filter: dict[str, list[Any]] | None, axes: Sequence[SearchAxis] = ()
) -> bool:
    """``space_filter``: field -> allowed values, compared with ``as_dict()``; the dimensions of a split
    field (``axes``: the target's search axes, e.g. tile_m/tile_n/tile_k on sm90, wg_m ... on Xe) address
    one extent; lists such as ``cluster: [[1, 1], [2, 1]]`` compare element-wise."""
    if not space_filter:
        return True
    fields = config_fields(config)  # fields as_dict leaves out at their default are read from the config
    parts = part_names(axes)
    values = {name: value for name, (_, value) in axis_values(config, axes).items() if name in parts}
    for name, allowed in space_filter.items():
        if name in parts:
            value = values.get(name)
        elif name in fields:
            value = fields[name]
        else:
            raise InputError(
                f"space filter field {name!r} is not a config field; allowed: "
                + ", ".join([*parts, *sorted(fields)]),
                field=f"space.{name}",
            )
        if _norm(value) not in [_norm(a) for a in allowed]:
            return False
    return True


def filter_value(config: Any, name: str, axes: Sequence[SearchAxis] = ()) -> Any:
    """The value a space filter's field ``name`` compares for ``config`` (a split extent or a field)."""
    if name in part_names(axes):
        return _norm(axis_values(config, axes)[name][1])
    return _norm(config_fields(config).get(name))


def empty_filter_message(
    space_filter: dict[str, list[Any]], legal: Sequence[Any], axes: Sequence[SearchAxis] = ()
) -> str:
    """Why a filter left no config: per field, the values the workload's legal space holds, so a typo
    (``schedule: [pingping]``) or a value no config of this problem can take (``streams: [3]``) reads
    as what to write instead."""
    lines = []
    for name, allowed in space_filter.items():
        seen: list[Any] = []
        for cfg in legal:
            value = filter_value(cfg, name, axes)
            if value not in seen:
                seen.append(value)
        shown = ", ".join(json.dumps(v) for v in sorted(seen, key=json.dumps))
        lines.append(f"{name}: {json.dumps(_norm(allowed))} (legal here: {shown})")
    return "the space filter leaves no legal config of this workload; " + "; ".join(lines)


@dataclass
class SearchSpace:
    """Legal configs of one workload (after the filter), with model estimates."""

    model: Any
    kernel: str
    dtype: Any
    problem: dict[str, Any]
    device: Any = None
    space_filter: dict[str, list[Any]] | None = None
    streamk_twins: bool = True
    #: where the workload comes from (``file: workload 'name' (workloads[i])``), named in filter errors
    source: str = ""
    #: where the filter was given when not in the workload's own ``space:`` (``--space-filter``)
    filter_field: str = ""
    configs: list[Any] = field(default_factory=list)
    by_key: dict[str, Any] = field(default_factory=dict)
    _estimates: dict[str, float] = field(default_factory=dict)
    #: where default() came from: "library" (the library's untuned default) or "model_best" (no library
    #: default exists for this problem; the cost model's best legal config stands in), with the reason
    default_source: str = "library"
    default_note: str = ""

    def __post_init__(self) -> None:
        seen: dict[str, Any] = {}
        legal: list[Any] = []
        axes = self.model.search_axes(self.kernel)
        for cfg in self.model.enumerate(self.kernel, self.dtype, self.problem):
            cfg = self._twin(cfg)
            legal.append(cfg)
            try:
                if not matches_filter(cfg, self.space_filter, axes):
                    continue
            except InputError as exc:
                raise self._located(exc) from None
            seen.setdefault(config_key(cfg), cfg)
        if self.space_filter and legal and not seen:
            # a filter that keeps nothing would tune the default alone: the user asked for something else
            raise self._located(
                InputError(empty_filter_message(self.space_filter, legal, axes), field="space")
            )
        self.by_key = seen
        self.configs = list(seen.values())

    def _located(self, exc: InputError) -> InputError:
        """``exc`` with the workload's source in front of its field, as the batch loader names fields; a
        filter given on the command line is named by its flag, and the message names the workload."""
        if self.filter_field:
            message = f"{self.source}: {exc.message}" if self.source else exc.message
            return InputError(message, file=exc.file, field=self.filter_field)
        if not self.source:
            return exc
        return InputError(exc.message, file=exc.file, field=f"{self.source}.{exc.field or 'space'}")

    @classmethod
    def for_workload(
        cls, model: Any, workload: Any, problem: dict[str, Any], device: Any, streamk_twins: bool
    ) -> SearchSpace:
        """The space of one batch workload (its kernel, space filter and source), as the dry run, the
        pre-run validation and the engine all build it."""
        return cls(
            model,
            workload.kernel,
            problem["dtype"],
            problem,
            device,
            workload.space_filter,
            streamk_twins,
            source=workload.source or workload.name,
            filter_field=workload.space_field,
        )

    def _twin(self, cfg: Any) -> Any:
        if not self.streamk_twins or not hasattr(cfg, "model_copy"):
            return cfg
        d = cfg.as_dict()
        if d.get("schedule") == "cooperative" and d.get("tile_scheduler") == "persistent":
            twin = cfg.model_copy(update={"tile_scheduler": "streamk"})
            if self.model.check(twin, self.problem).valid:
                return twin
        return cfg

    def __len__(self) -> int:
        return len(self.configs)

    def default(self) -> Any:
        """The baseline every tuned config is compared with: the library default, or -- when the library
        has none for this problem -- the model's best legal config (``default_source`` says which)."""
        try:
            return self.model.default_config(self.kernel, self.dtype, self.problem)
        except NoLibraryDefaultError as exc:
            ranked = self.ranked()
            if not ranked:
                raise
            self.default_source = "model_best"
            self.default_note = (
                f"{exc}; baseline is the model's best legal config {config_label(ranked[0])} instead"
            )
            return ranked[0]

    def experimental_notes(self) -> list[str]:
        """Why the baseline config of this problem is experimental (the model's ``experimental`` warnings;
        for the Xe models an element-type combination no icpx build has run yet), or nothing."""
        try:
            check = self.model.check(self.default(), self.problem)
        except Exception:  # noqa: BLE001 - no default at all: nothing to label
            return []
        experimental = getattr(check, "experimental", None)
        return list(experimental()) if callable(experimental) else []

    def estimate(self, cfg: Any) -> float:
        key = config_key(cfg)
        if key not in self._estimates:
            try:
                self._estimates[key] = float(self.model.estimate_time_s(cfg, self.problem, self.device))
            except Exception:  # noqa: BLE001 - a model that cannot estimate ranks the config last
                self._estimates[key] = float("inf")
        return self._estimates[key]

    def ranked(self) -> list[Any]:
        return sorted(self.configs, key=lambda c: (self.estimate(c), config_key(c)))

    def neighbours(self, cfg: Any) -> list[Any]:
        """Legal neighbours that are inside this (filtered) space."""
        out = []
        for n in self.model.neighbours(cfg):
            n = self._twin(n)
            key = config_key(n)
            if key in self.by_key:
                out.append(self.by_key[key])
        return out

    def check(self, cfg: Any) -> Any:
        return self.model.check(cfg, self.problem)

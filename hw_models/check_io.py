"""Reading config lists for ``kernelpilot check-tiles`` and checking them one by one.

The input is a YAML or JSON list of config mappings (or a mapping with ``configs:`` and an optional
shared ``problem:``).  An entry may carry its own ``problem:`` (dims for the problem-level rules such
as alignment).  Every entry is parsed before anything is checked, so an unknown field or kind in
entry 7 is reported as an input error naming the file, the entry and the field (exit 2) instead of a
half-printed report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from kernelpilot.errors import InputError
from kernelpilot.hw_models.types import TileConfig


def load_entries(path: str | Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Return the raw entries and the shared problem (if any) of a check-tiles input file."""
    p = Path(path)
    from kernelpilot.fileio import read_text

    text = read_text(p, field="--input", what="tile list")
    try:
        data = json.loads(text) if p.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise InputError(
            f"not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'}: {exc}", file=str(p)
        ) from exc
    shared = None
    if isinstance(data, dict):
        unknown = sorted(set(data) - {"configs", "problem"})
        if unknown:
            raise InputError(
                f"unknown top-level key {unknown[0]!r}; allowed: configs, problem",
                file=str(p),
                field=unknown[0],
            )
        shared = data.get("problem")
        data = data.get("configs")
    if not isinstance(data, list):
        raise InputError("expected a list of configs (or a mapping with 'configs:')", file=str(p))
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise InputError(f"entry {i} is not a mapping", file=str(p), field=f"[{i}]")
    if shared is not None and not isinstance(shared, dict):
        raise InputError("problem must be a mapping of dims", file=str(p), field="problem")
    return data, shared


def parse_entries(
    model: Any, entries: list[dict[str, Any]], file: str
) -> list[tuple[TileConfig, dict[str, Any] | None]]:
    parsed: list[tuple[TileConfig, dict[str, Any] | None]] = []
    for i, entry in enumerate(entries):
        raw = dict(entry)
        problem = raw.pop("problem", None)
        if problem is not None and not isinstance(problem, dict):
            raise InputError(f"entry {i}: problem must be a mapping", file=file, field="problem")
        parsed.append((model.parse_config(raw, where=f"{file}: entry {i}"), problem))
    return parsed


def check_file(model: Any, path: str | Path) -> list[dict[str, Any]]:
    """Check every entry; returns ``[{index, label, config, valid, violations, warnings}]``."""
    entries, shared = load_entries(path)
    results = []
    for i, (cfg, problem) in enumerate(parse_entries(model, entries, str(path))):
        prob = problem if problem is not None else shared
        if prob is not None and "dtype" not in prob:
            prob = {**prob, "dtype": cfg.as_dict().get("dtype")}
        try:
            res = model.check(cfg, prob)
        except InputError as exc:
            raise InputError(f"entry {i}: {exc}", file=str(path), field="problem") from exc
        results.append({"index": i, "label": cfg.label(), "config": cfg.as_dict(), **res.as_dict()})
    return results

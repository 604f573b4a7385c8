"""Batch YAML files for ``kernelpilot tune``: the native schema and Xe-Forge's format.

Native schema (validated with pydantic, unknown keys are errors)::

    target: sm90                 # or bmg, pvc (any registered target model)
    defaults:                    # every field optional; per-workload values override these
      kernel: gemm               # gemm | grouped_gemm | moe_gemm | fa_prefill | fa_decode
      dtype: bf16
      layout: rr                 # merged into dims for GEMM-like kernels
      proposer: model            # model | exhaustive | random | bayes | llm | hybrid | a registered one
      proposer_options: {}       # the proposer's own options, e.g. bayes {startup: 8}
      budget_configs: 16         # compile configs measured per workload, the default included
      patience: null             # stop after this many configs without a 0.5 % gain
      seed: 0
      space: {tile_k: [64]}      # optional filter of the legal space (field -> allowed values)
    workloads:
      - name: llama3_qkv
        dims: {M: 8192, N: 6144, K: 4096}
        proposer: exhaustive     # any defaults field may be overridden here

Xe-Forge format (``mode: gemm|fa|fa2|moe|grouped_gemm``, ``dtype``, ``max_rounds``, ``output``, FA-only
``causal``/``fa_mode``/``persistent``, and a ``tune-xpu:`` / ``tune-gpu:`` / ``tune:`` list of
``{name, dims}``).  ``fa``/``fa2`` map to ``fa_prefill`` or ``fa_decode`` by ``fa_mode``; ``moe`` to
``moe_gemm``; ``max_rounds`` R becomes a budget of 1 + 5R configs (Xe-Forge measured up to 5 proposals
per round after one seed); with the ``llm`` proposer each round is one LLM call asking for 5 configs, so
R is the number of LLM rounds, as in Xe-Forge.  ``output`` is written in Xe-Forge's results schema
(:func:`kernelpilot.tile_tuner.report.xeforge_results`); the full run document goes to ``--out``.  An unknown mode is an error, never a silent fallback.

Every error names the file, the workload and the field, and is raised before anything is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kernelpilot.errors import InputError
from kernelpilot.tile_tuner.proposers import PROPOSERS
from kernelpilot.tile_tuner.proposers.registry import check_options
from kernelpilot.tile_tuner.workload import Workload

XEFORGE_PROPOSALS_PER_ROUND = 5
KERNELS = ("gemm", "grouped_gemm", "moe_gemm", "fa_prefill", "fa_decode")
XEFORGE_MODES = {"gemm": "gemm", "fa": "fa", "fa2": "fa", "moe": "moe_gemm", "grouped_gemm": "grouped_gemm"}
KernelName = Literal["gemm", "grouped_gemm", "moe_gemm", "fa_prefill", "fa_decode"]


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kernel: KernelName | None = None
    dtype: str | None = None
    layout: str | None = None
    proposer: str | None = None  # a registered proposer (checked against the registry when merged)
    proposer_options: dict[str, Any] | None = None  # checked by the proposer's options model
    budget_configs: int | None = Field(default=None, ge=1, le=100000)
    patience: int | None = Field(default=None, ge=1)
    seed: int | None = Field(default=None, ge=0, le=2**32 - 1)  # numpy and optuna seeds are 32-bit
    space: dict[str, list[Any]] | None = None


class WorkloadSpec(Settings):
    name: str = Field(min_length=1)
    dims: dict[str, Any]


class BatchFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: str | None = None
    defaults: Settings = Field(default_factory=Settings)
    workloads: list[WorkloadSpec] = Field(min_length=1)


class XeForgeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    dims: dict[str, Any]


class XeForgeFile(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    mode: str
    dtype: str = "bf16"
    max_rounds: int = Field(5, ge=1)
    output: str | None = None
    causal: bool | None = None
    fa_mode: Literal["prefill", "decode"] | None = None
    persistent: bool | None = None
    tune_xpu: list[XeForgeEntry] | None = Field(None, alias="tune-xpu")
    tune_gpu: list[XeForgeEntry] | None = Field(None, alias="tune-gpu")
    tune: list[XeForgeEntry] | None = None


BUILTIN_DEFAULTS = {
    "kernel": "gemm",
    "dtype": "bf16",
    "layout": None,
    "proposer": "model",
    "proposer_options": None,
    "budget_configs": 16,
    "patience": None,
    "seed": 0,
    "space": None,
}


def _where_from_loc(data: dict[str, Any], loc: tuple[Any, ...]) -> tuple[str, str]:
    """(workload description, field path) from a pydantic error location."""
    parts = [str(p) for p in loc]
    workload = ""
    if (
        len(loc) >= 2
        and loc[0] in ("workloads", "tune-xpu", "tune-gpu", "tune", "tune_xpu", "tune_gpu")
        and isinstance(loc[1], int)
    ):
        key = loc[0]
        items = data.get(key if key in data else key.replace("_", "-")) or []
        name = items[loc[1]].get("name") if loc[1] < len(items) and isinstance(items[loc[1]], dict) else None
        workload = f"workload {name!r} ({key}[{loc[1]}])" if name else f"workload {key}[{loc[1]}]"
        parts = parts[2:]
    return workload, ".".join(parts) or "(top level)"


def _raise_validation(path: Path, data: dict[str, Any], exc: ValidationError) -> None:
    """One InputError listing every problem pydantic found (a typo key is reported as itself)."""
    problems: list[tuple[str, str]] = []  # (message, field)
    for err in exc.errors():
        workload, fld = _where_from_loc(data, tuple(err["loc"]))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            allowed = _allowed_keys(tuple(err["loc"]))
            msg = "unknown key" + (f" (allowed: {', '.join(allowed)})" if allowed else "")
        if err["type"] == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        problems.append((f"{workload}: {msg}" if workload else msg, fld))
    if len(problems) == 1:
        raise InputError(problems[0][0], file=str(path), field=problems[0][1])
    lines = "\n  ".join(f"{fld}: {msg}" for msg, fld in problems)
    raise InputError(f"{len(problems)} problems:\n  {lines}", file=str(path))


def _allowed_keys(loc: tuple[Any, ...]) -> list[str]:
    """The keys allowed where an unknown key was found (so the message can suggest the right one)."""
    if len(loc) == 1:
        return [*BatchFile.model_fields] if loc[0] not in XeForgeFile.model_fields else []
    if loc[0] == "defaults":
        return [*Settings.model_fields]
    if loc[0] == "workloads":
        return [*WorkloadSpec.model_fields]
    if loc[0] in ("tune-xpu", "tune-gpu", "tune", "tune_xpu", "tune_gpu"):
        return [*XeForgeEntry.model_fields]
    return []


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    from kernelpilot.fileio import read_text

    text = read_text(path, what="batch file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=str(path)) from exc
    if not isinstance(data, dict):
        raise InputError("the top level must be a mapping", file=str(path))
    return data


def load_batch(
    path: Path, cli_overrides: dict[str, Any] | None = None, cli_target: str | None = None
) -> tuple[str, list[Workload], dict[str, Any]]:
    """Parse a batch file into (target, workloads, extras).  CLI flags override the file."""
    data = read_yaml(path)
    overrides = {k: v for k, v in (cli_overrides or {}).items() if v is not None}
    extras: dict[str, Any] = {"format": "native"}
    if "mode" in data or any(k in data for k in ("tune-xpu", "tune-gpu", "tune")):
        return _load_xeforge(path, data, overrides, cli_target, extras)
    try:
        batch = BatchFile.model_validate(data)
    except ValidationError as exc:
        _raise_validation(path, data, exc)
        raise  # unreachable
    target = cli_target or batch.target
    if not target:
        raise InputError(
            "no target: set `target:` in the file or pass --target", file=str(path), field="target"
        )
    names: set[str] = set()
    workloads: list[Workload] = []
    for i, spec in enumerate(batch.workloads):
        where = f"{path}: workload {spec.name!r} (workloads[{i}])"
        if spec.name in names:
            raise InputError(
                f"workload {spec.name!r}: duplicate name", file=str(path), field=f"workloads[{i}].name"
            )
        names.add(spec.name)
        merged = dict(BUILTIN_DEFAULTS)
        merged.update({k: v for k, v in batch.defaults.model_dump().items() if v is not None})
        merged.update(
            {k: v for k, v in spec.model_dump().items() if v is not None and k not in ("name", "dims")}
        )
        merged.update(overrides)
        workloads.append(_workload(spec.name, spec.dims, merged, target, where))
    return target, workloads, extras


def _workload(name: str, dims: dict[str, Any], merged: dict[str, Any], target: str, where: str) -> Workload:
    dims = dict(dims)
    if merged.get("layout") is not None and merged["kernel"] in ("gemm", "grouped_gemm", "moe_gemm"):
        dims.setdefault("layout", merged["layout"])
    if merged["proposer"] not in PROPOSERS:
        raise InputError(
            f"{where}: proposer {merged['proposer']!r} not in {', '.join(PROPOSERS)}", field="proposer"
        )
    options = merged.get("proposer_options") or {}
    if options:
        check_options(merged["proposer"], options, where)
    return Workload(
        name=name,
        kernel=merged["kernel"],
        dtype=merged["dtype"],
        dims=dims,
        target=target,
        proposer=merged["proposer"],
        proposer_options=dict(options),
        budget_configs=int(merged["budget_configs"]),
        patience=merged.get("patience"),
        space_filter=merged.get("space"),
        seed=int(merged.get("seed") or 0),
        source=where,
    )


def _load_xeforge(
    path: Path,
    data: dict[str, Any],
    overrides: dict[str, Any],
    cli_target: str | None,
    extras: dict[str, Any],
) -> tuple[str, list[Workload], dict[str, Any]]:
    extras["format"] = "xe-forge"
    mode = data.get("mode")
    if mode not in XEFORGE_MODES:
        raise InputError(
            f"unknown mode {mode!r}; allowed: {', '.join(XEFORGE_MODES)}", file=str(path), field="mode"
        )
    try:
        spec = XeForgeFile.model_validate(data)
    except ValidationError as exc:
        _raise_validation(path, data, exc)
        raise
    given = [
        k
        for k, v in (("tune-xpu", spec.tune_xpu), ("tune-gpu", spec.tune_gpu), ("tune", spec.tune))
        if v is not None
    ]
    if len(given) > 1:
        raise InputError(
            f"both {' and '.join(given)} are present; keep one workload list (the others would be ignored)",
            file=str(path),
            field=given[1],
        )
    entries = (
        spec.tune_xpu
        if spec.tune_xpu is not None
        else spec.tune_gpu
        if spec.tune_gpu is not None
        else spec.tune
    )
    if not entries:
        raise InputError(
            "no workloads: expected a `tune-xpu:` list of {name, dims}", file=str(path), field="tune-xpu"
        )
    kernel = XEFORGE_MODES[mode]
    if kernel == "fa":
        kernel = "fa_decode" if spec.fa_mode == "decode" else "fa_prefill"
    target = cli_target or "bmg"
    merged = dict(BUILTIN_DEFAULTS)
    merged.update({"kernel": kernel, "dtype": spec.dtype, "budget_configs": 1 + 5 * spec.max_rounds})
    merged.update(overrides)
    if spec.output:
        extras["output"] = spec.output
    workloads = []
    key = "tune-xpu" if spec.tune_xpu is not None else "tune-gpu" if spec.tune_gpu is not None else "tune"
    names: set[str] = set()
    for i, entry in enumerate(entries):
        if entry.name in names:
            raise InputError(
                f"workload {entry.name!r}: duplicate name", file=str(path), field=f"{key}[{i}].name"
            )
        names.add(entry.name)
        dims = dict(entry.dims)
        if kernel.startswith("fa_"):
            for flag in ("causal", "persistent"):
                value = getattr(spec, flag)
                if value is not None:
                    dims.setdefault(flag, value)
        where = f"{path}: workload {entry.name!r} ({key}[{i}])"
        workload = _workload(entry.name, dims, merged, target, where)
        if workload.proposer == "llm":
            # Xe-Forge's max_rounds counts LLM calls of up to 5 proposals each, after the default
            workload.batch_size = XEFORGE_PROPOSALS_PER_ROUND
        workloads.append(workload)
    return target, workloads, extras


def parse_dims(text: str) -> dict[str, Any]:
    """``M=8192,N=4096,K=4096`` -> {'M': 8192, ...}; integers where possible, true/false booleans."""
    dims: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise InputError(f"--dims entry {part!r} is not NAME=VALUE", field="--dims")
        k, v = (s.strip() for s in part.split("=", 1))
        if not k:
            raise InputError(f"--dims entry {part!r} has no name", field="--dims")
        if k in dims:
            raise InputError(f"--dims gives {k} twice ({text!r}); give each dimension once", field="--dims")
        if v.lower() in ("true", "false"):
            dims[k] = v.lower() == "true"
        else:
            try:
                dims[k] = int(v)
            except ValueError:
                dims[k] = v
    if not dims:
        raise InputError("--dims is empty", field="--dims")
    return dims

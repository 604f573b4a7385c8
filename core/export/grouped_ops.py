"""The grouped GEMM part of an sm90 export: ``grouped_mm`` (kind ``grouped_gemm``) and ``moe_gemm``.

Both kinds run the tuner's ptr-array grouped GEMM (``cuda/grouped_gemm_sm90_kernel.j2``), so one
compiled kernel serves every tuned problem of a (config, dtype), whichever op it came from.  A row is
keyed by what an operator call knows without reading the GPU: the group count G, the weight shape
N x K and the total row count M.  The split of M over the groups (the offsets) lives on the GPU; the
row's time is for the split it was tuned on (kept in ``dispatch.json``).  A tuned problem whose groups
differ in N or K cannot be called through ``grouped_mm(a, b, offs)`` (one weight shape for all groups):
it is left out and reported, never silently dropped.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.export.routing import DEFAULT_MIN_VENDOR_RATIO, RoutedRow, route_fields, vendor_reason
from kernelpilot.export.runs import TunedEntry
from kernelpilot.export.writer import write_kind_files

KINDS = ("grouped_gemm", "moe_gemm")
OPS = {"grouped_gemm": "grouped_mm", "moe_gemm": "moe_gemm"}
PROBE = 4096
ALIGN_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class GroupedKernel:
    """One compiled grouped GEMM kernel: a config instantiated for one dtype (layout rc)."""

    index: int
    dtype: str
    config: dict[str, Any]  # the tuner's normalized config (tile, cluster, schedule, epilogue, stages)
    label: str
    align: dict[str, int]  # N and K multiples the hardware model requires

    @property
    def symbol(self) -> str:
        return f"g{self.index:03d}"


@dataclass
class GroupedRow(RoutedRow):
    entry: TunedEntry
    op: str  # grouped_mm | moe_gemm
    kernel: GroupedKernel | None  # None: the vendor op serves this problem (``vendor_reason`` says why)
    knobs: dict[str, Any]  # raster (M/N), swizzle
    groups: int
    n: int
    k: int
    total_m: int
    label: str = ""
    vendor_reason: str | None = None
    config: dict[str, Any] = field(default_factory=dict)  # the tuned (normalized) config


@dataclass
class GroupedTable:
    kernels: list[GroupedKernel] = field(default_factory=list)
    rows: list[GroupedRow] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)


def where_of(e: TunedEntry) -> str:
    return f"{e.origin.get('run') or e.origin.get('store')}: {e.origin.get('workload') or e.kind}"


def problem_of(e: TunedEntry) -> tuple[int, int, int, int] | str:
    """(G, N, K, M) of a tuned grouped problem, or why the operator cannot express it."""
    groups = e.dims.get("groups")
    if not isinstance(groups, list) or not groups:
        raise InputError(
            f"{where_of(e)}: a {e.kind} workload needs dims.groups [[M, N, K], ...]", field="dims.groups"
        )
    shapes = {(int(g[1]), int(g[2])) for g in groups}
    if len(shapes) != 1:
        return f"its groups have {len(shapes)} different (N, K) weight shapes; {OPS[e.kind]} takes one"
    ((n, k),) = shapes
    count = len(groups) + int(e.dims.get("empty_groups", 0) or 0)
    if e.kind == "moe_gemm" and isinstance(e.dims.get("num_experts"), int):
        count = int(e.dims["num_experts"])
    return count, n, k, sum(int(g[0]) for g in groups)


def knobs_of(runtime: dict[str, Any], where: str) -> dict[str, Any]:
    raster = str(runtime.get("raster", "M"))
    swizzle = int(runtime.get("swizzle", 1))
    if raster not in ("M", "N", "along_m", "along_n"):
        raise InputError(f"{where}: raster {raster!r} not in M, N", field="runtime.raster")
    if swizzle not in (1, 2, 4, 8):
        raise InputError(f"{where}: swizzle {swizzle} not in 1, 2, 4, 8", field="runtime.swizzle")
    return {"raster": "N" if raster in ("N", "along_n") else "M", "swizzle": swizzle}


def alignment_of(model: Any, parsed: Any, dtype: Any) -> dict[str, int]:
    """Per dim (N, K), the smallest multiple the hardware model accepts (the others at a legal probe)."""

    def ok(n: int, k: int) -> bool:
        return model.check(parsed, {"groups": [[PROBE, n, k]], "dtype": dtype, "layout": "rc"}).valid

    if not ok(PROBE, PROBE):
        raise InputError(
            f"the {model.name} model rejects grouped config {parsed} at N = K = {PROBE}", field="best.config"
        )
    align = {}
    for dim in ("N", "K"):
        for a in ALIGN_CANDIDATES:
            if ok(PROBE + a, PROBE) if dim == "N" else ok(PROBE, PROBE + a):
                align[dim] = a
                break
        else:
            align[dim] = PROBE
    return align


def build(
    entries: list[TunedEntry], model: Any, min_vendor_ratio: float = DEFAULT_MIN_VENDOR_RATIO
) -> GroupedTable:
    """Kernels (one per distinct config and dtype, shared by both ops) and one row per tuned problem; a
    problem the run confirmed slower than the vendor op is served by it (``routing.vendor_reason``)."""
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import config_label, normalize_dtype, normalize_gemm_config

    table = GroupedTable()
    kernels: dict[str, GroupedKernel] = {}
    for e in entries:
        where = where_of(e)
        problem = problem_of(e)
        if isinstance(problem, str):
            table.skipped.append({"workload": e.origin.get("workload"), "kind": e.kind, "run": e.origin.get("run"),
                                  "reason": problem})  # fmt: skip
            continue
        if e.layout not in ("rc", "tn"):
            raise InputError(
                f"{where}: layout {e.layout!r}; the grouped kernels take rc", field="dims.layout"
            )
        dtype = normalize_dtype(e.model_dtype, where)
        try:
            cfg = normalize_gemm_config(e.config)
        except ValueError as exc:
            raise InputError(f"{where}: {exc}", field="best.config") from exc
        parsed = model.parse_config({"kernel": e.kind, "dtype": e.model_dtype, **e.config}, where=where)
        res = model.check(parsed, {**e.dims, "dtype": e.model_dtype, "layout": "rc"})
        if not res.valid:
            raise InputError(
                f"{where}: the {model.name} model rejects the tuned config for its own problem: "
                + "; ".join(v.message for v in res.violations),
                field="best.config",
            )
        key = json.dumps([dtype, cfg], sort_keys=True)
        reason = vendor_reason(e, min_vendor_ratio)
        launch = cfg.get("launch", "grouped")
        if reason is None and launch != "grouped":
            # the exported operator is one ptr-array launch; the ptr-array kernel of the same tile is not what
            # the run measured, so the vendor op serves the shape and the table says why
            how = {"per_group": "launches the dense kernel once per group",
                   "fused": "runs the dense kernel's body over every group in one launch"}[launch]  # fmt: skip
            reason = (
                f"the tuned config {config_label(cfg)} {how} "
                f"(launch: {launch}), which the exported grouped operator does not implement"
            )
        if reason is None and cfg.get("extra_tile_n"):
            reason = (
                f"the tuned config {config_label(cfg)} runs its groups with mixed token-side widths "
                "(extra_tile_n: one launch per width), which the exported grouped operator does not implement"
            )
        if key not in kernels and reason is None:
            probe = model.parse_config(
                {"kernel": "grouped_gemm", "dtype": e.model_dtype, **e.config}, where=where
            )
            kernels[key] = GroupedKernel(index=len(kernels), dtype=dtype, config=cfg, label=config_label(cfg),
                                         align=alignment_of(model, probe, e.model_dtype))  # fmt: skip
        groups, n, k, total_m = problem
        table.rows.append(GroupedRow(entry=e, op=OPS[e.kind], kernel=None if reason else kernels[key],
                                     knobs=knobs_of(e.runtime, where), groups=groups, n=n, k=k, total_m=total_m,
                                     label=config_label(cfg), vendor_reason=reason, config=cfg))  # fmt: skip
    table.kernels = list(kernels.values())
    return table


def render_kernel(kernel: GroupedKernel, name: str, env: Any) -> str:
    """One kernel's translation unit: the tuner's kernel types and arguments, no benchmark main."""
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import kernel_context

    ctx = kernel_context(kernel.config, kernel.dtype)
    tpl = env.get_template("export/cuda/grouped_kernel.cu.j2")
    return tpl.render(**ctx, name=name, symbol=kernel.symbol, label=kernel.label)


def document(table: GroupedTable) -> dict[str, Any]:
    """The grouped section of ``dispatch.json``."""
    return {
        "kernels": [
            {
                "id": k.symbol,
                "dtype": k.dtype,
                "layout": "rc",
                "label": k.label,
                "config": k.config,
                "alignment": k.align,
            }
            for k in table.kernels
        ],
        "entries": [
            {
                "op": r.op,
                "kind": r.entry.kind,
                "dtype": r.entry.dtype,
                "key": {"groups": r.groups, "N": r.n, "K": r.k, "M": r.total_m},
                "tuned_group_rows": [int(g[0]) for g in r.entry.dims["groups"]],
                "empty_groups": int(r.entry.dims.get("empty_groups", 0) or 0),
                **route_fields(r.kernel, r.label, r.vendor_reason, r.config),
                "runtime": r.entry.runtime,
                "knobs": r.knobs,
                **r.entry.provenance(),
            }
            for r in table.rows
        ],
        "skipped": table.skipped,
    }


def write(out: Any, table: GroupedTable, ctx: dict[str, Any], env: Any, name: str) -> list[str]:
    """Render the grouped headers, kernels, table and operators into ``out``; returns relative paths."""
    return write_kind_files(
        out,
        env,
        name=name,
        kind="grouped",
        context={**ctx, "kernels": table.kernels, "rows": table.rows},
        kernels=table.kernels,
        render_kernel=lambda kernel: render_kernel(kernel, name, env),
    )

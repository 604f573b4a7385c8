"""The dispatch table of an export: tuned shapes -> compiled kernels, plus each kernel's legality.

Every distinct (config, dtype, layout) is one compiled kernel; every tuned shape is one row pointing
at a kernel with its tuned run-time knobs.  The exported package cannot import kernelpilot, so what
the hardware model says about a kernel and a *problem* is decided here and written into the table:
for each kernel the alignment (in elements) that M, N and K must have, found by asking the target
model's ``check(config, problem)`` on probe problems.  The generated ``select`` (C++) uses it for the
``nearest`` fallback: the closest tuned shape whose kernel is legal for the problem.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.export.routing import DEFAULT_MIN_VENDOR_RATIO, RoutedRow, route_fields, vendor_reason
from kernelpilot.export.runs import DECOMP_CODES, RASTER_CODES, ExportSource, TunedEntry

FALLBACKS = ("vendor", "nearest", "error")
PROBE = 4096  # a probe dimension every sm90 tile divides; PROBE + a is divisible by a, not by 2a
ALIGN_CANDIDATES = (1, 2, 4, 8, 16, 32, 64, 128)


@dataclass
class Kernel:
    """One compiled kernel: a config instantiated for one dtype and layout."""

    index: int
    kind: str
    dtype: str
    layout: str
    config: dict[str, Any]
    label: str
    align: dict[str, int]  # dim -> the multiple it must be (hardware model, decided at export time)

    @property
    def symbol(self) -> str:
        return f"k{self.index:03d}"


@dataclass
class Row(RoutedRow):
    """One tuned shape of the table."""

    entry: TunedEntry
    kernel: Kernel | None  # None: the vendor library serves this shape (``vendor_reason`` says why)
    knobs: dict[str, Any]  # raster (H/M/N), swizzle, decomp (H/D/S/K), splits
    label: str  # the tuned config's label (also for a vendor-served row)
    vendor_reason: str | None = None


@dataclass
class Table:
    target: str
    kernels: list[Kernel]
    rows: list[Row]
    fallback: str
    min_vendor_ratio: float = DEFAULT_MIN_VENDOR_RATIO


def knobs_of(runtime: dict[str, Any], where: str) -> dict[str, Any]:
    """The tuned run-time knobs in the kernels' one-letter form (unknown names are an input error)."""
    raster = str(runtime.get("raster", "heuristic"))
    decomp = str(runtime.get("decomposition", runtime.get("decomp", "heuristic")))
    if raster not in RASTER_CODES:
        raise InputError(f"{where}: raster {raster!r} not in {sorted(RASTER_CODES)}", field="runtime.raster")
    if decomp not in DECOMP_CODES:
        raise InputError(
            f"{where}: decomposition {decomp!r} not in {sorted(DECOMP_CODES)}", field="runtime.decomposition"
        )
    swizzle, splits = int(runtime.get("swizzle", 1)), int(runtime.get("splits", 1))
    if swizzle not in (1, 2, 4, 8) or not 1 <= splits <= 64:
        raise InputError(f"{where}: swizzle {swizzle} / splits {splits} out of range", field="runtime")
    return {
        "raster": RASTER_CODES[raster],
        "swizzle": swizzle,
        "decomp": DECOMP_CODES[decomp],
        "splits": splits,
    }


def alignment_of(model: Any, config: dict[str, Any], kind: str, dtype: Any, layout: str) -> dict[str, int]:
    """Per dim, the smallest multiple the hardware model accepts (others at a legal probe size)."""
    cfg = model.parse_config({"kernel": kind, "dtype": dtype, **config}, where="export")
    base = {"M": PROBE, "N": PROBE, "K": PROBE}
    res = model.check(cfg, {**base, "dtype": dtype, "layout": layout})
    if not res.valid:
        raise InputError(
            f"the {model.name} model rejects tuned config {config} for {dtype}/{layout}: "
            + "; ".join(v.message for v in res.violations),
            field="best.config",
        )
    align = {}
    for dim in base:
        for a in ALIGN_CANDIDATES:
            if model.check(cfg, {**base, dim: PROBE + a, "dtype": dtype, "layout": layout}).valid:
                align[dim] = a
                break
        else:
            align[dim] = PROBE
    return align


def build_table(
    source: ExportSource,
    fallback: str,
    model: Any,
    knobs: Callable[[dict[str, Any], str], dict[str, Any]] = knobs_of,
    min_vendor_ratio: float = DEFAULT_MIN_VENDOR_RATIO,
) -> Table:
    """Kernels (one per distinct config, dtype and layout) and rows (one per tuned shape); ``knobs``
    turns a run's ``runtime`` into the row's run-time knobs (the backends name them differently).
    A row the run confirmed slower than the vendor library (``routing.vendor_reason``) is served by the
    vendor library: its config is still validated, but compiled only if another row uses it."""
    if fallback not in FALLBACKS:
        raise InputError(f"fallback {fallback!r} not in {', '.join(FALLBACKS)}", field="--fallback")
    kernels: dict[str, Kernel] = {}
    rows: list[Row] = []
    for e in source.entries:
        where = f"{e.origin.get('run') or e.origin.get('store')}: {e.origin.get('workload') or e.dims}"
        key = json.dumps([e.kind, e.dtype, e.layout, e.config], sort_keys=True)
        parsed = model.parse_config({"kernel": e.kind, "dtype": e.model_dtype, **e.config}, where=where)
        label = parsed.label() if hasattr(parsed, "label") else e.label
        reason = vendor_reason(e, min_vendor_ratio)
        if key not in kernels and reason is None:
            kernels[key] = Kernel(
                index=len(kernels),
                kind=e.kind,
                dtype=e.dtype,
                layout=e.layout,
                config=e.config,
                label=label,
                align=alignment_of(model, e.config, e.kind, e.model_dtype, e.layout),
            )
        problem = {**e.dims, "dtype": e.model_dtype, "layout": e.layout}
        res = model.check(parsed, problem)
        if not res.valid:
            raise InputError(
                f"{where}: the {model.name} model rejects the tuned config for its own shape: "
                + "; ".join(v.message for v in res.violations),
                field="best.config",
            )
        kernel = None if reason else kernels[key]
        rows.append(
            Row(entry=e, kernel=kernel, knobs=knobs(e.runtime, where), label=label, vendor_reason=reason)
        )
    return Table(target=source.target, kernels=list(kernels.values()), rows=rows, fallback=fallback,
                 min_vendor_ratio=min_vendor_ratio)  # fmt: skip


def dispatch_document(
    table: Table, source: ExportSource, name: str, timed_rows: Sequence[Any] | None = None
) -> dict[str, Any]:
    """``dispatch.json``: every row with where it came from and which time it was exported with.

    ``timed_rows``: every exported row whose time the ``times`` line describes, where the project has
    more tables than the GEMM one (the sm90 grouped and attention rows); default: the GEMM rows."""
    rows = table.rows if timed_rows is None else timed_rows
    search_only = all(r.entry.time_source == "search" for r in rows)
    return {
        "name": name,
        "target": table.target,
        "device": source.device,
        "fallback": table.fallback,
        "min_vendor_ratio": table.min_vendor_ratio,
        "inputs": source.inputs,
        "times": (
            "search-time medians: no input confirmed its winners against the vendor library"
            if search_only
            else "confirmed medians where an entry says time_source=confirmed, search-time medians otherwise"
        ),
        "kernels": [
            {
                "id": k.symbol,
                "kind": k.kind,
                "dtype": k.dtype,
                "layout": k.layout,
                "label": k.label,
                "config": k.config,
                "alignment": k.align,
            }
            for k in table.kernels
        ],  # fmt: skip
        "entries": [
            {
                "kind": r.entry.kind,
                "dtype": r.entry.dtype,
                "layout": r.entry.layout,
                "dims": r.entry.dims,
                **route_fields(r.kernel, r.label, r.vendor_reason, r.entry.config),
                "runtime": r.entry.runtime,
                "knobs": r.knobs,
                **r.entry.provenance(),
            }
            for r in table.rows
        ],  # fmt: skip
    }

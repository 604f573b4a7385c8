"""The Intel Xe export: the dispatch as a plain C++ header, a CMake target against sycl-tla and
``tile_shapes.json`` (the ``SYCL_TLA_ADDITIONAL_TILE_SHAPES`` entries of the tuned configs).

Layout of the folder (rendered from ``cpp_templates/export/xe``)::

    CMakeLists.txt        NAME::dispatch (INTERFACE: the header, sycl-tla's include folders when
                          SYCL_TLA_DIR is given); with icpx also NAME_table, a SYCL program printing it
    include/NAME/dispatch.hpp, examples/table.cpp, tile_shapes.json, dispatch.json, README.md

The tuned sycl-tla kernels themselves are not compiled into the export: a caller instantiates the
config a row names (work-group and sub-group tiles, stages, schedule) in its own sycl-tla build.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError
from kernelpilot.export.dispatch import Table
from kernelpilot.export.dispatch import build_table as build_generic
from kernelpilot.export.dispatch import dispatch_document as document_generic
from kernelpilot.export.routing import DEFAULT_MIN_VENDOR_RATIO
from kernelpilot.export.runs import ExportSource

EXPORTABLE_KINDS = ("gemm",)
MODES = ("default", "dp", "streamk", "splitk")


def xe_knobs(runtime: dict[str, Any], where: str) -> dict[str, Any]:
    """Xe GEMM run-time knobs: the stream-K / split-K mode and the split count."""
    mode = str(runtime.get("mode", "default"))
    if mode not in MODES:
        raise InputError(f"{where}: runtime mode {mode!r} not in {', '.join(MODES)}", field="runtime.mode")
    splits = int(runtime.get("splits", 1))
    if not 1 <= splits <= 64:
        raise InputError(f"{where}: runtime splits {splits} not in 1..64", field="runtime.splits")
    return {"mode": mode, "splits": splits}


def build_table(
    source: ExportSource, fallback: str, min_vendor_ratio: float = DEFAULT_MIN_VENDOR_RATIO
) -> Table:
    from kernelpilot.targets import get_target_model

    other = sorted({e.kind for e in source.entries} - set(EXPORTABLE_KINDS))
    if other:
        raise InputError(
            f"kernel kind(s) {other} cannot be exported for {source.target} yet "
            f"(exportable: {', '.join(EXPORTABLE_KINDS)})",
            field="workloads[].kernel",
        )
    return build_generic(
        source, fallback, get_target_model(source.target), knobs=xe_knobs, min_vendor_ratio=min_vendor_ratio
    )


def tile_shapes(table: Table) -> list[dict[str, Any]]:
    """``SYCL_TLA_ADDITIONAL_TILE_SHAPES`` entries of the exported configs (as ``kernelpilot tune`` writes)."""
    out: list[dict[str, Any]] = []
    for k in table.kernels:
        entry: dict[str, Any] = {"wg": list(k.config["wg"])}
        if k.config.get("sg"):
            entry["sg"] = list(k.config["sg"])
        if entry not in out:
            out.append(entry)
    return out


def dispatch_document(table: Table, source: ExportSource, name: str) -> dict[str, Any]:
    doc = document_generic(table, source, name)
    doc["tile_shapes"] = tile_shapes(table)
    return doc


def _c_str(value: Any) -> str:
    """A C++ string literal of ``value`` (JSON text for non-strings)."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return json.dumps(text)  # JSON string escaping is valid C++ for this ASCII text


def write_project(out: Path, table: Table, doc: dict[str, Any], *, name: str) -> list[str]:
    from kernelpilot.dsl_plugins.cuda.gemm import template_env

    env = template_env()
    kernels = [
        {"symbol": k.symbol, "label": k.label, "dtype": k.dtype, "layout": k.layout, "align": k.align,
         "wg": list(k.config["wg"]), "sg": list(k.config.get("sg") or [0, 0, 0]), "stages": int(k.config.get("stages", 0)),
         "schedule": str(k.config.get("schedule", "default")), "config_json": _c_str(k.config)}
        for k in table.kernels
    ]  # fmt: skip
    ctx = {"name": name, "target": table.target, "fallback": table.fallback, "kernels": kernels, "rows": table.rows,
           "device": doc.get("device"), "entries": doc["entries"]}  # fmt: skip
    files = {
        f"include/{name}/dispatch.hpp": "dispatch.hpp.j2",
        "CMakeLists.txt": "CMakeLists.txt.j2",
        "examples/table.cpp": "table.cpp.j2",
        "README.md": "README.md.j2",
    }
    written = []
    for rel, tpl in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(f"export/xe/{tpl}").render(**ctx))
        written.append(rel)
    (out / "tile_shapes.json").write_text(json.dumps(doc["tile_shapes"], indent=1))
    (out / "dispatch.json").write_text(json.dumps(doc, indent=1))
    return [*written, "tile_shapes.json", "dispatch.json"]

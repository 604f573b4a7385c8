"""The Intel Xe export: the dispatch as a plain C++ header, the tuned sycl-tla kernels as a CMake library,
PyTorch XPU operators over them, and ``tile_shapes.json`` (the ``SYCL_TLA_ADDITIONAL_TILE_SHAPES``
entries of the tuned configs).

Layout of the folder (rendered from ``cpp_templates/export/xe``)::

    CMakeLists.txt        NAME::dispatch (INTERFACE: the header, sycl-tla's include folders when
                          SYCL_TLA_DIR is given) with any compiler; with icpx also NAME_kernels (the
                          kernels, the tuning programs' flags, AOT for the target), NAME_table and, where
                          torch with XPU support is found, the operator library _C
    pyproject.toml + build_backend.py   pip: checks icpx / SYCL_TLA_DIR first, then CMake + Ninja
    include/NAME/dispatch.hpp   plain C++17 dispatch table (kernels' legality decided at export time)
    include/NAME/kernels.hpp    GemmCall, status codes, gemm_workspace_bytes / gemm_run over the index
    src/kernels/kNNN.cpp        one tuned config each: the tuning program's kernel part
                                (cpp_templates/sycl/gemm_kernel.j2, imported by the program too), no main
    src/kernels_table.cpp, csrc/ops.cpp (TORCH_LIBRARY, XPU and CPU impls)
    python/NAME/__init__.py     loads the operators, register_fake for torch.compile
    examples/table.cpp, tile_shapes.json, dispatch.json, README.md

Why the kernel part is shared rather than re-written: the export must run the kernel that was measured;
one template for the type chain and the argument construction makes a divergence impossible.  Why the
icpx gate: the kernels are SYCL device code (DPAS, block-2D loads) that only icpx compiles; without it
the header target keeps working and ``pip install`` stops before CMake, naming icpx and the target.
CI without icpx checks the kernel sources with the same g++ host-side compile against the real sycl-tla
and SYCL headers that checks the tuning programs (tests/plugins/sycl/test_sycl_host_syntax.py).

What is not exported: sycl-tla itself (pass SYCL_TLA_DIR); a run's non-default output type (out_dtype
is not recorded in the export's rows: kernels write the default output type of their dtype).
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
from kernelpilot.export.writer import write_files

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


def _model_dtypes(table: Table) -> dict[int, Any]:
    """Each kernel's dtype as the target model parses it (a dict for mixed pairs), from its first row."""
    out: dict[int, Any] = {}
    for r in table.rows:
        if r.kernel is not None and r.kernel.index not in out:
            out[r.kernel.index] = r.entry.model_dtype
    return out


def kernel_context(kernel: Any, target: str, model_dtype: Any) -> dict[str, Any]:
    """The tuning program's render context for one exported kernel (element types, layouts, tiles,
    schedule): the same function renders the program."""
    from kernelpilot.dsl_plugins.sycl import programs

    problem = {"dtype": model_dtype, "layout": kernel.layout}
    return programs.render_context("gemm", kernel.config, problem, target, "export")


def render_kernel(kernel: Any, name: str, context: dict[str, Any]) -> str:
    """The translation unit of one tuned config (``context``: its :func:`kernel_context`): the tuning
    program's kernel part without its main."""
    tpl = _env().get_template("export/xe/gemm_kernel.cpp.j2")
    return tpl.render(**context, name=name, symbol=kernel.symbol, label=kernel.label)


def _env() -> Any:
    from kernelpilot.dsl_plugins.cuda.gemm import template_env

    return template_env()


def build_flags(target: str, aot: str) -> dict[str, str]:
    """The tuner's compile and link flags for ``target``'s GEMM programs as CMake lists; ``aot`` stands
    for ocloc's device in the link flags (the export passes a CMake variable, so a build can pick a die)."""
    from kernelpilot.dsl_plugins.sycl import sycl_tla
    from kernelpilot.tile_tuner.builder import _cmake_list

    compile_flags = [f for f in sycl_tla.compile_flags() if not f.startswith("-std=")]  # CMAKE_CXX_STANDARD
    before = sycl_tla.SPIRV_FULL_SINCE[0], sycl_tla.SPIRV_FULL_SINCE[1] - 1

    def link(release: tuple[int, int] | None) -> str:
        return _cmake_list(list(sycl_tla.link_flags(aot, release, "gemm")))

    return {
        # what `kernelpilot tune` builds for the target (bmg: both Battlemage dies), no environment override
        "aot_device": sycl_tla.TARGET_AOT_DEFAULT.get(target) or sycl_tla.aot_device(target, {}),
        "compile_flags": _cmake_list(compile_flags),
        "link_flags": link(None),
        "link_flags_before_2025_2": link(before),
    }


def write_project(
    out: Path, table: Table, doc: dict[str, Any], *, name: str, version: str = "0.0.0"
) -> list[str]:
    env = _env()
    model_dtypes = _model_dtypes(table)
    contexts = {k.index: kernel_context(k, table.target, model_dtypes[k.index]) for k in table.kernels}
    kernels = [
        {"symbol": k.symbol, "index": k.index, "label": k.label, "dtype": k.dtype, "layout": k.layout,
         "align": k.align, "wg": list(k.config["wg"]), "sg": list(k.config.get("sg") or [0, 0, 0]),
         "stages": int(k.config.get("stages", 0)), "schedule": str(k.config.get("schedule", "default")),
         "config_json": _c_str(k.config), "out_dtype": contexts[k.index]["out_dtype"]}
        for k in table.kernels
    ]  # fmt: skip
    flags = build_flags(table.target, "${" + name.upper() + "_AOT_DEVICE}")
    ctx = {"name": name, "target": table.target, "fallback": table.fallback, "kernels": kernels, "rows": table.rows,
           "device": doc.get("device"), "entries": doc["entries"], "version": version,
           "description": f"sycl-tla kernels for {table.target} tuned by kernelpilot ({len(table.rows)} shapes)",
           **flags}  # fmt: skip
    files = {
        f"include/{name}/dispatch.hpp": "dispatch.hpp.j2",
        f"include/{name}/kernels.hpp": "kernels.hpp.j2",
        "src/kernels_table.cpp": "kernels_table.cpp.j2",
        "csrc/ops.cpp": "ops.cpp.j2",
        f"python/{name}/__init__.py": "__init__.py.j2",
        "CMakeLists.txt": "CMakeLists.txt.j2",
        "pyproject.toml": "pyproject.toml.j2",
        "build_backend.py": "build_backend.py.j2",
        "examples/table.cpp": "table.cpp.j2",
        "README.md": "README.md.j2",
    }
    texts = {rel: env.get_template(f"export/xe/{tpl}").render(**ctx) for rel, tpl in files.items()}
    texts.update(
        {f"src/kernels/{k.symbol}.cpp": render_kernel(k, name, contexts[k.index]) for k in table.kernels}
    )
    text = json.dumps(doc, indent=1)
    texts.update({"tile_shapes.json": json.dumps(doc["tile_shapes"], indent=1), "dispatch.json": text,
                  f"python/{name}/dispatch.json": text})  # fmt: skip
    return write_files(out, texts)

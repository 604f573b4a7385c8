"""The sm90 export: a CMake project of the tuned CUTLASS kernels plus PyTorch operators over them.

Layout of the folder (all rendered from ``cpp_templates/export/cuda``)::

    CMakeLists.txt, pyproject.toml + build_backend.py (pip: CMake + Ninja, no setuptools), README.md, dispatch.json
    include/NAME/dispatch.h      plain C++ dispatch table (kernels' legality decided at export time)
    include/NAME/kernels.h       the kernels' C++ entry points (CUDA runtime API)
    csrc/kernels/kNNN.cu         one tuned config each: the tuning program's kernel part, no main
    csrc/kernels_table.cu, csrc/ops.cpp
    python/NAME/__init__.py      loads the operators, register_fake for torch.compile
    third_party/cutlass/         the CUTLASS headers (unless --no-bundle-cutlass)
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.export.dispatch import Table

EXPORTABLE_KINDS = ("gemm",)  # sm90 kinds with an exported operator


def check_kinds(table: Table) -> None:
    """Kinds without an exported operator are an input error naming the workloads (never dropped silently)."""
    other = sorted({(r.entry.kind, str(r.entry.origin.get("workload") or r.entry.dims)) for r in table.rows
                    if r.entry.kind not in EXPORTABLE_KINDS})  # fmt: skip
    if other:
        names = ", ".join(f"{w} ({k})" for k, w in other[:6])
        raise InputError(
            f"kernel kind(s) {sorted({k for k, _ in other})} cannot be exported for sm90 yet "
            f"(exportable: {', '.join(EXPORTABLE_KINDS)}); workloads: {names}",
            field="workloads[].kernel",
        )
    layouts = {r.entry.layout for r in table.rows}
    if not layouts <= {"rr", "rc"}:
        raise InputError(f"layouts {sorted(layouts - {'rr', 'rc'})} not in rr, rc", field="dims.layout")


def _env() -> Any:
    from kernelpilot.dsl_plugins.cuda.gemm import template_env

    return template_env()


def render_kernel(kernel: Any, name: str) -> str:
    """The translation unit of one tuned config: the tuning program's kernel part without its main."""
    from kernelpilot.dsl_plugins.cuda import gemm

    # the benchmark's own context (tile, cluster, schedule, element, layouts, swap_ab, ...)
    ctx = gemm.render_context(kernel.config, kernel.dtype, kernel.layout)
    tpl = _env().get_template("export/cuda/gemm_kernel.cu.j2")
    return tpl.render(**ctx, name=name, symbol=kernel.symbol, label=kernel.label)


def bundle_cutlass(dest: Path, cutlass_dir: str | None) -> str:
    """Copy CUTLASS's include/ and tools/util/include/ into ``dest``; returns the version."""
    from kernelpilot import toolchain

    tree = toolchain.find_headers("cutlass", cutlass_dir)
    if tree is None:
        raise ToolMissingError(
            "CUTLASS headers not found (set CUTLASS_DIR or --cutlass-dir), or export with "
            "--no-bundle-cutlass and pass -DCUTLASS_DIR when building"
        )
    ignore = shutil.ignore_patterns("__pycache__", "*.py", "*.pyc")
    shutil.copytree(tree.include, dest / "include", ignore=ignore)
    util = tree.include.parent / "tools" / "util" / "include"
    if util.is_dir():
        shutil.copytree(util, dest / "tools" / "util" / "include", ignore=ignore)
    return tree.version


def write_project(
    out: Path,
    table: Table,
    doc: dict[str, Any],
    *,
    name: str,
    version: str,
    cutlass: bool,
    cutlass_dir: str | None,
) -> list[str]:
    """Render every file of the project into ``out`` (an empty folder); returns their relative paths."""
    from kernelpilot.dsl_plugins.cuda.gemm import NVCC_FLAGS

    check_kinds(table)
    env = _env()
    ctx = {
        "name": name,
        "target": table.target,
        "device": doc.get("device"),
        "fallback": table.fallback,
        "kernels": table.kernels,
        "rows": table.rows,
        "version": version,
        "description": f"CUTLASS sm90a kernels tuned by kernelpilot ({len(table.rows)} shapes)",
        # the tuning program's flags, less the register report
        "nvcc_flags": [f for f in NVCC_FLAGS if not f.startswith("-Xptxas")],
    }
    files: dict[str, str] = {
        "CMakeLists.txt": "CMakeLists.txt.j2",
        "build_backend.py": "build_backend.py.j2",
        "pyproject.toml": "pyproject.toml.j2",
        f"include/{name}/dispatch.h": "dispatch.h.j2",
        f"include/{name}/kernels.h": "kernels.h.j2",
        "csrc/kernels_table.cu": "kernels_table.cu.j2",
        "csrc/ops.cpp": "ops.cpp.j2",
        f"python/{name}/__init__.py": "__init__.py.j2",
        "README.md": "README.md.j2",
    }
    written = []
    for rel, tpl in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(env.get_template(f"export/cuda/{tpl}").render(**ctx, entries=doc["entries"]))
        written.append(rel)
    for k in table.kernels:
        rel = f"csrc/kernels/{k.symbol}.cu"
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(render_kernel(k, name))
        written.append(rel)
    if cutlass:
        doc["cutlass"] = bundle_cutlass(out / "third_party" / "cutlass", cutlass_dir)
    text = json.dumps(doc, indent=1)
    (out / "dispatch.json").write_text(text)
    (out / "python" / name / "dispatch.json").write_text(text)
    written += ["dispatch.json", f"python/{name}/dispatch.json"]
    return written

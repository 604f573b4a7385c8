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
from kernelpilot.export.writer import write_files

EXPORTABLE_KINDS = ("gemm", "grouped_gemm", "moe_gemm", "fa_prefill", "fa_decode")  # with an operator


def check_kinds(table: Table) -> None:
    """Kinds without an exported operator are an input error naming the workloads (never dropped silently);
    ``table`` holds the GEMM rows (the other kinds have their own tables)."""
    other = sorted({(r.entry.kind, str(r.entry.origin.get("workload") or r.entry.dims)) for r in table.rows
                    if r.entry.kind != "gemm"})  # fmt: skip
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


def bundle_cutlass(dest: Path, cutlass_dir: str | None, fmha: bool = False) -> str:
    """Copy CUTLASS's include/ and tools/util/include/ (and, for attention kernels, the Hopper FMHA
    collective of examples/88_hopper_fmha) into ``dest``; returns the version."""
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
    if fmha:
        from kernelpilot.dsl_plugins.cuda.fmha import fmha_include_dir

        (folder,) = fmha_include_dir(cutlass_dir)
        for sub in ("collective", "device", "kernel"):
            shutil.copytree(folder / sub, dest / FMHA_INCLUDE / sub, ignore=ignore)
    return tree.version


FMHA_INCLUDE = "examples/88_hopper_fmha"  # under the CUTLASS tree, as in a checkout


def kind_parts(grouped: Any, attention: Any, name: str) -> list[dict[str, Any]]:
    """The CMake and Python pieces of the kinds other than GEMM present in the export."""
    from kernelpilot.dsl_plugins.cuda.fmha import FMHA_NVCC_FLAGS
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import NVCC_FLAGS as GROUPED_FLAGS

    def flags(program_flags: tuple[str, ...]) -> list[str]:
        """The kind's tuning-program flags, less the register report."""
        return [f for f in program_flags if not f.startswith("-Xptxas") and f != "-v"]

    parts = []
    if grouped is not None and grouped.rows:  # rows but no kernels: every problem is vendor-served
        parts.append({"key": "grouped", "title": "grouped GEMM", "ops": "grouped_mm, moe_gemm",
                      "sources": [f"csrc/grouped/{k.symbol}.cu" for k in grouped.kernels] + ["csrc/grouped_table.cu"],
                      "extra_includes": [], "nvcc_flags": flags(GROUPED_FLAGS), "op_source": "csrc/grouped_ops.cpp",
                      "python": "export/cuda/grouped_py.j2"})  # fmt: skip
    if attention is not None and attention.rows:
        parts.append({"key": "attention", "title": "attention (Hopper FMHA)", "ops": "attention",
                      "sources": [f"csrc/attention/{k.symbol}.cu" for k in attention.kernels]
                      + ["csrc/attention_table.cu"],
                      "extra_includes": [FMHA_INCLUDE], "nvcc_flags": flags(FMHA_NVCC_FLAGS),
                      "op_source": "csrc/attention_ops.cpp",
                      "python": "export/cuda/attention_py.j2"})  # fmt: skip
    return parts


def write_project(
    out: Path,
    table: Table,
    doc: dict[str, Any],
    *,
    name: str,
    version: str,
    cutlass: bool,
    cutlass_dir: str | None,
    grouped: Any = None,
    attention: Any = None,
) -> list[str]:
    """Render every file of the project into ``out`` (an empty folder); returns their relative paths.
    ``table`` holds the GEMM rows; ``grouped`` and ``attention`` the other kinds' tables (or None)."""
    from kernelpilot.dsl_plugins.cuda.gemm import NVCC_FLAGS
    from kernelpilot.export import attention_ops, grouped_ops

    check_kinds(table)
    env = _env()
    parts = kind_parts(grouped, attention, name)
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
        "cmake_parts": [f"cmake/{p['key']}.cmake" for p in parts],
        "python_parts": [p["python"] for p in parts],
    }
    files: dict[str, str] = {
        "CMakeLists.txt": "CMakeLists.txt.j2",
        "build_backend.py": "build_backend.py.j2",
        "pyproject.toml": "pyproject.toml.j2",
        f"include/{name}/dispatch.h": "dispatch.h.j2",
        f"include/{name}/policy.h": "policy.h.j2",
        f"include/{name}/kernels.h": "kernels.h.j2",
        "csrc/kernels_table.cu": "kernels_table.cu.j2",
        "csrc/ops.cpp": "ops.cpp.j2",
        f"python/{name}/__init__.py": "__init__.py.j2",
        "README.md": "README.md.j2",
    }
    texts = {rel: env.get_template(f"export/cuda/{tpl}").render(**ctx, entries=doc["entries"])
             for rel, tpl in files.items()}  # fmt: skip
    texts.update({f"csrc/kernels/{k.symbol}.cu": render_kernel(k, name) for k in table.kernels})
    texts.update({f"cmake/{part['key']}.cmake": env.get_template("export/cuda/kind.cmake.j2").render(name=name, part=part)
                  for part in parts})  # fmt: skip
    written = write_files(out, texts)
    if grouped is not None and grouped.rows:
        written += grouped_ops.write(out, grouped, ctx, env, name)
    if attention is not None and attention.rows:
        written += attention_ops.write(out, attention, ctx, env, name)
    if cutlass:
        doc["cutlass"] = bundle_cutlass(
            out / "third_party" / "cutlass",
            cutlass_dir,
            fmha=attention is not None and bool(attention.rows),
        )
    text = json.dumps(doc, indent=1)
    (out / "dispatch.json").write_text(text)
    (out / "python" / name / "dispatch.json").write_text(text)
    written += ["dispatch.json", f"python/{name}/dispatch.json"]
    return written

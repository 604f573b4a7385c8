"""nvcc command lines for CUDA source kernels: syntax-only checks and shared-library builds.

Kept free of torch imports: the executor's ``validate`` and the worker's compile step both use it, and
compile errors must be reportable on a machine without a GPU.  The build cache and log cleaning are the
core's (:mod:`kernelpilot.cpp_source.build`).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kernelpilot.cpp_source import abi
from kernelpilot.cpp_source.build import CompileResult, cached_build, clean_log, run_tool
from kernelpilot.dsl_plugins.cuda.source_abi import include_dir
from kernelpilot.errors import ToolMissingError

DEFAULT_ARCH = "sm_90a"
_ARCH = re.compile(r"^sm_(\d+)([af]?)$")


def find_nvcc(explicit: str | None = None) -> str:
    """``explicit`` > ``$NVCC`` > ``nvcc`` on PATH > ``$CUDA_HOME/bin/nvcc``; raises if none exists."""
    for candidate in (explicit, os.environ.get("NVCC")):
        if candidate:
            return candidate
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and Path(home, "bin", "nvcc").is_file():
        return str(Path(home, "bin", "nvcc"))
    raise ToolMissingError("nvcc not found (install the CUDA toolkit, or set NVCC / CUDA_HOME)")


def arch_flags(arch: str) -> list[str]:
    """``sm_90a`` -> ``-gencode=arch=compute_90a,code=sm_90a`` (real code for exactly that GPU)."""
    match = _ARCH.match(arch)
    if not match:
        raise ValueError(f"CUDA arch {arch!r} is not of the form sm_90a / sm_80 / sm_100a")
    return [f"-gencode=arch=compute_{match.group(1)}{match.group(2)},code={arch}"]


def arch_for_capability(major: int, minor: int) -> str:
    """Hopper and later get the architecture-specific ``a`` target (wgmma / TMA need it)."""
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


@dataclass
class BuildOptions:
    arch: str = DEFAULT_ARCH
    nvcc: str | None = None
    defines: dict[str, str] = field(default_factory=dict)
    extra_flags: list[str] = field(default_factory=list)
    include_dirs: list[Path] = field(default_factory=list)
    timeout_s: float = 300.0
    std: str = "c++17"
    front_flags: list[str] = field(default_factory=list)  # front end and build (e.g. torch's nvcc flags)


def _common(options: BuildOptions, kernel_dir: Path | None) -> list[str]:
    flags = [f"-std={options.std}", *arch_flags(options.arch), *options.front_flags]
    flags += ["-I", str(include_dir()), "-I", str(abi.include_dir())]
    if kernel_dir is not None:
        flags += ["-I", str(kernel_dir)]
    for folder in options.include_dirs:
        flags += ["-I", str(folder)]
    flags += [f"-D{k}={v}" for k, v in sorted(options.defines.items())]
    return flags


def syntax_command(source: Path, options: BuildOptions, kernel_dir: Path | None = None) -> list[str]:
    """Front-end only (no code generation): ``-fdevice-syntax-only`` for device code and the host
    compiler's ``-fsyntax-only`` for host code.  nvcc has no plain ``-fsyntax-only``."""
    return [
        find_nvcc(options.nvcc),
        *_common(options, kernel_dir),
        "-fdevice-syntax-only",
        "-Xcompiler",
        "-fsyntax-only",
        "-c",
        str(source),
        "-o",
        str(source.with_suffix(".syntax.o")),
    ]


def build_command(
    source: Path, output: Path, options: BuildOptions, kernel_dir: Path | None = None
) -> list[str]:
    """A shared library exporting ``kp_forward``; cudart linked statically (nvcc's default), so it
    needs no CUDA runtime on the library path -- the driver shares one context with PyTorch."""
    return [
        find_nvcc(options.nvcc),
        *_common(options, kernel_dir),
        "-O3",
        "-lineinfo",
        "-Xptxas=-v",  # registers, shared memory and spills per kernel: useful feedback
        "-Xcompiler",
        "-fPIC",
        "-shared",
        *options.extra_flags,
        str(source),
        "-o",
        str(output),
    ]


def check_syntax(source_text: str, workdir: Path, options: BuildOptions) -> list[str]:
    """Problems nvcc's front end finds (empty list: it parses and type-checks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(source_text.encode()).hexdigest()[:16]
    path = workdir / f"syntax_{digest}.cu"
    path.write_text(source_text, encoding="utf-8")
    code, log = run_tool(syntax_command(path, options), options.timeout_s, "nvcc")
    path.with_suffix(".syntax.o").unlink(missing_ok=True)
    if code == 0:
        return []
    return [f"nvcc syntax check failed (exit {code}):\n{clean_log(log, path)}"]


def compile_library(
    source_text: str, cache_dir: Path, options: BuildOptions, kernel_dir: Path | None = None
) -> CompileResult:
    """Build ``source_text`` into ``<cache>/<sha>.so`` unless that exact build already exists."""
    return cached_build(
        source_text,
        cache_dir,
        lambda source, output: build_command(source, output, options, kernel_dir),
        source_suffix=".cu",
        output_suffix=".so",
        probe_output="kernel.so",
        tmp_suffix=".tmp.so",
        tool="nvcc",
        timeout_s=options.timeout_s,
    )

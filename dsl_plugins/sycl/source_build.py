"""icpx command lines for SYCL source kernels: syntax-only check and the runner program build.

Gated on icpx: :func:`find_icpx` raises :class:`ToolMissingError` with what to install, so a machine
without oneAPI gets one clear error instead of a failing candidate per attempt.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from kernelpilot.cpp_source import abi
from kernelpilot.cpp_source.build import CompileResult, cached_build, clean_log
from kernelpilot.errors import ToolMissingError

# AOT device names (ocloc ``-device``) for the Xe GPUs kernelpilot models; sycl-tla builds with these
AOT_DEVICES = ("bmg-g21", "bmg-g31", "pvc", "lnl-m", "acm-g10")
# SPIR-V extensions sycl-tla enables so 2D block I/O, DPAS and split barriers reach the backend
SPIRV_EXTENSIONS = (
    "+SPV_INTEL_split_barrier,+SPV_INTEL_2d_block_io,+SPV_INTEL_subgroup_matrix_multiply_accumulate"
)


def include_dir() -> Path:
    return Path(str(files("kernelpilot.dsl_plugins.sycl.source_include")))


def runner_source() -> Path:
    return include_dir() / "kernelpilot_sycl_runner.cpp"


def find_icpx(explicit: str | None = None) -> str:
    for candidate in (explicit, os.environ.get("ICPX")):
        if candidate:
            return candidate
    found = shutil.which("icpx")
    if found:
        return found
    raise ToolMissingError(
        "icpx not found: SYCL source kernels are built with Intel oneAPI DPC++ (icpx -fsycl); "
        "install the oneAPI Base Toolkit and `source /opt/intel/oneapi/setvars.sh`, or set ICPX"
    )


@dataclass
class SyclBuildOptions:
    icpx: str | None = None
    aot_device: str | None = None  # e.g. "bmg": ahead-of-time code for that GPU; None: JIT (spir64)
    grf_mode: str | None = None  # "large": 256 GRF per hardware thread (see build_env / run_env)
    defines: dict[str, str] = field(default_factory=dict)
    extra_flags: list[str] = field(default_factory=list)
    timeout_s: float = 600.0


def _common(options: SyclBuildOptions, kernel_dir: Path | None) -> list[str]:
    flags = ["-fsycl", "-std=c++17", "-I", str(include_dir()), "-I", str(abi.include_dir())]
    if kernel_dir is not None:
        flags += ["-I", str(kernel_dir)]
    flags += [f"-D{k}={v}" for k, v in sorted(options.defines.items())]
    return flags


def target_flags(options: SyclBuildOptions) -> list[str]:
    """JIT (spir64, compiled for the GPU at first run) or AOT for one Xe device, as sycl-tla builds."""
    flags = ["-fno-sycl-instrument-device-code"]
    if options.aot_device is not None:
        if options.aot_device not in AOT_DEVICES:
            raise ValueError(f"AOT device {options.aot_device!r}; allowed: {', '.join(AOT_DEVICES)}")
        flags += [
            "-fsycl-targets=spir64_gen",
            "-Xsycl-target-backend=spir64_gen",
            f"-device {options.aot_device}",
        ]
    flags += ["-Xspirv-translator", f"-spirv-ext={SPIRV_EXTENSIONS}"]
    return flags


def build_env(options: SyclBuildOptions) -> dict[str, str]:
    """Large-GRF mode (256 registers per hardware thread) for AOT builds: ocloc reads it at link time."""
    if options.grf_mode == "large" and options.aot_device is not None:
        return {"IGC_ExtraOCLOptions": "-cl-intel-256-GRF-per-thread"}
    return {}


def run_env(options: SyclBuildOptions) -> dict[str, str]:
    """Large-GRF mode for JIT builds: the SYCL runtime passes it to the GPU compiler at first launch."""
    if options.grf_mode == "large" and options.aot_device is None:
        return {"SYCL_PROGRAM_COMPILE_OPTIONS": "-ze-opt-large-register-file"}
    return {}


def syntax_command(source: Path, options: SyclBuildOptions, kernel_dir: Path | None = None) -> list[str]:
    return [find_icpx(options.icpx), *_common(options, kernel_dir), "-fsyntax-only", str(source)]


def build_command(
    source: Path, output: Path, options: SyclBuildOptions, kernel_dir: Path | None = None
) -> list[str]:
    """One program = the runner (kp_io contract, timing) + the kernel file's kp_forward."""
    return [
        find_icpx(options.icpx),
        *_common(options, kernel_dir),
        "-O3",
        *target_flags(options),
        *options.extra_flags,
        str(runner_source()),
        str(source),
        "-o",
        str(output),
    ]


def check_syntax(source_text: str, workdir: Path, options: SyclBuildOptions) -> list[str]:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"syntax_{hashlib.sha256(source_text.encode()).hexdigest()[:16]}.cpp"
    path.write_text(source_text, encoding="utf-8")
    command = syntax_command(path, options)
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=options.timeout_s)
    except subprocess.TimeoutExpired:
        return [f"icpx syntax check did not finish within {options.timeout_s:.0f} s"]
    if proc.returncode == 0:
        return []
    return [
        f"icpx syntax check failed (exit {proc.returncode}):\n{clean_log(proc.stderr + proc.stdout, path, 'kernel.cpp')}"
    ]


def compile_program(
    source_text: str, cache_dir: Path, options: SyclBuildOptions, kernel_dir: Path | None = None
) -> CompileResult:
    """Build the runner + ``source_text`` into ``<cache>/<sha>.bin`` unless that exact build exists."""
    return cached_build(
        source_text,
        cache_dir,
        lambda source, output: build_command(source, output, options, kernel_dir),
        source_suffix=".cpp",
        output_suffix=".bin",
        probe_output="prog",
        tmp_suffix=".tmp",
        tool="icpx",
        timeout_s=options.timeout_s,
        env={**os.environ, **build_env(options)},
    )

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
from kernelpilot.dsl_plugins.sycl import sycl_tla
from kernelpilot.errors import ToolMissingError

# AOT device names (ocloc ``-device``) for the Xe GPUs kernelpilot models; sycl-tla builds with these
AOT_DEVICES = ("bmg-g21", "bmg-g31", "pvc", "lnl-m", "acm-g10")


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
    grf_mode: str | None = None  # "large": 256 GRF per hardware thread (link line for AOT, run_env for JIT)
    # oneAPI release of icpx, which gates the SPIR-V extension list; None: ask the compiler (--version)
    icpx_release: tuple[int, int] | None = None
    defines: dict[str, str] = field(default_factory=dict)
    extra_flags: list[str] = field(default_factory=list)
    timeout_s: float = 600.0


def _common(options: SyclBuildOptions, kernel_dir: Path | None) -> list[str]:
    flags = ["-fsycl", "-std=c++17", "-I", str(include_dir()), "-I", str(abi.include_dir())]
    if kernel_dir is not None:
        flags += ["-I", str(kernel_dir)]
    flags += [f"-D{k}={v}" for k, v in sorted(options.defines.items())]
    return flags


def target_flags(options: SyclBuildOptions, icpx_release: tuple[int, int] | None = None) -> list[str]:
    """JIT (spir64, compiled for the GPU at first run) or AOT for one Xe device, as sycl-tla builds: for
    AOT the 256-GRF mode and IGC's performance model go to ocloc on this command line (no environment),
    and the SPIR-V extensions follow the icpx release exactly as in the tile tuner's programs."""
    flags = ["-fno-sycl-instrument-device-code"]
    if options.aot_device is not None:
        if options.aot_device not in AOT_DEVICES:
            raise ValueError(f"AOT device {options.aot_device!r}; allowed: {', '.join(AOT_DEVICES)}")
        flags += [
            "-fsycl-targets=spir64_gen",
            "-Xsycl-target-backend=spir64_gen",
            sycl_tla.backend_argument(options.aot_device, None, large_grf=options.grf_mode == "large"),
        ]
    flags += sycl_tla.spirv_flags(icpx_release)
    return flags


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
    icpx = find_icpx(options.icpx)
    release = options.icpx_release or sycl_tla.release_of(icpx)
    return [
        icpx,
        *_common(options, kernel_dir),
        "-O3",
        *target_flags(options, release),
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
        env=dict(os.environ),
    )

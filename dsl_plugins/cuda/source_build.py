"""nvcc command lines for CUDA source kernels: syntax-only checks and shared-library builds.

Kept free of torch imports: the executor's ``validate`` and the worker's compile step both use it, and
compile errors must be reportable on a machine without a GPU.  Builds are cached by the SHA-256 of the
command line and the source, so a candidate evaluated twice (or the baseline across repeats) compiles
once.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelpilot.dsl_plugins.cuda.source_abi import include_dir
from kernelpilot.errors import ToolMissingError

DEFAULT_ARCH = "sm_90a"
_ARCH = re.compile(r"^sm_(\d+)([af]?)$")
MAX_LOG_CHARS = 4000


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
    flags = [f"-std={options.std}", *arch_flags(options.arch), *options.front_flags, "-I", str(include_dir())]
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


@dataclass
class CompileResult:
    ok: bool
    log: str
    command: list[str]
    output: Path | None = None
    cached: bool = False
    seconds: float = 0.0


def clean_log(text: str, source: Path, shown_name: str = "kernel.cu") -> str:
    """Compiler output with the temporary path replaced by a stable name (prompts stay cacheable)."""
    text = text.replace(str(source), shown_name).replace(source.name, shown_name)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    out = "\n".join(lines)
    return out if len(out) <= MAX_LOG_CHARS else out[:MAX_LOG_CHARS] + "\n... (truncated)"


def run_tool(
    command: list[str], timeout_s: float, tool: str = "nvcc", env: dict[str, str] | None = None
) -> tuple[int, str]:
    """(exit code, stderr + stdout); a timeout is exit 124 with a sentence naming ``tool``."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return 124, f"{tool} did not finish within {timeout_s:.0f} s"
    return proc.returncode, (proc.stderr or "") + (proc.stdout or "")


def check_syntax(source_text: str, workdir: Path, options: BuildOptions) -> list[str]:
    """Problems nvcc's front end finds (empty list: it parses and type-checks)."""
    workdir.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(source_text.encode()).hexdigest()[:16]
    path = workdir / f"syntax_{digest}.cu"
    path.write_text(source_text, encoding="utf-8")
    code, log = run_tool(syntax_command(path, options), options.timeout_s)
    path.with_suffix(".syntax.o").unlink(missing_ok=True)
    if code == 0:
        return []
    return [f"nvcc syntax check failed (exit {code}):\n{clean_log(log, path)}"]


def cached_build(
    source_text: str,
    cache_dir: Path,
    command_for: Callable[[Path, Path], list[str]],
    *,
    source_suffix: str,
    output_suffix: str,
    probe_output: str,
    tmp_suffix: str,
    tool: str,
    timeout_s: float,
    env: dict[str, str] | None = None,
) -> CompileResult:
    """Build ``source_text`` into ``<cache>/k_<sha><output_suffix>`` unless that exact build exists.

    Shared by the nvcc library and the icpx program builds.  The key hashes the command line built
    for the fixed names ``kernel<source_suffix>`` / ``probe_output`` plus the source, so it does not
    depend on where the cache lives.  The compiler writes ``<output>.<pid><tmp_suffix>`` first and
    the result is renamed into place: a concurrent reader never sees a half-written file.
    """
    shown_name = f"kernel{source_suffix}"
    cache_dir.mkdir(parents=True, exist_ok=True)
    probe = command_for(Path(shown_name), Path(probe_output))
    digest = hashlib.sha256(("\0".join(probe) + "\0" + source_text).encode()).hexdigest()[:24]
    source = cache_dir / f"k_{digest}{source_suffix}"
    output = cache_dir / f"k_{digest}{output_suffix}"
    command = command_for(source, output)
    if output.is_file():
        return CompileResult(True, "", command, output, cached=True)
    source.write_text(source_text, encoding="utf-8")
    tmp_output = output.with_suffix(f".{os.getpid()}{tmp_suffix}")
    start = time.perf_counter()
    code, log = run_tool(command_for(source, tmp_output), timeout_s, tool, env)
    seconds = time.perf_counter() - start
    if code != 0 or not tmp_output.is_file():
        tmp_output.unlink(missing_ok=True)
        return CompileResult(False, clean_log(log, source, shown_name), command, None, seconds=seconds)
    os.replace(tmp_output, output)
    return CompileResult(True, clean_log(log, source, shown_name), command, output, seconds=seconds)


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

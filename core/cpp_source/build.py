"""Cached compiler runs for C++ source kernels, shared by every C++ DSL (nvcc, icpx, ...).

Builds are cached by the SHA-256 of the command line and the source, so a candidate evaluated twice
(or the baseline across repeats) compiles once; compiler logs are cleaned of temporary paths so
prompts that quote them stay cacheable.  No torch import: the parent process validates with it and
compile errors must be reportable on a machine without a GPU.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_LOG_CHARS = 4000


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
    command: list[str], timeout_s: float, tool: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """(exit code, stderr + stdout); a timeout is exit 124 with a sentence naming ``tool``."""
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return 124, f"{tool} did not finish within {timeout_s:.0f} s"
    return proc.returncode, (proc.stderr or "") + (proc.stdout or "")


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

    Shared by every C++ DSL's builds (nvcc libraries, icpx programs).  The key hashes the command line built
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

"""Run a profiler on one kernel source and return its counters (:class:`ProfileReport`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from kernelpilot.errors import InputError, KernelpilotError, ToolMissingError
from kernelpilot.profiling import ncu, vtune
from kernelpilot.profiling.schema import ProfileReport

TOOLS = ("ncu", "vtune")
TOOL_DEVICE = {"ncu": "cuda", "vtune": "xpu"}


def check_tool(tool: str, device: str, settings: Any) -> str:
    """The profiler's executable, or a clear error (exit 2 for a wrong pairing, 1 for a missing tool)."""
    if tool not in TOOLS:
        raise InputError(f"unknown profiler {tool!r}; allowed: {', '.join(TOOLS)}", field="--profiler")
    if TOOL_DEVICE[tool] != device:
        raise InputError(
            f"{tool} profiles {TOOL_DEVICE[tool]} kernels; this run's device is {device}", field="--profiler"
        )
    binary = settings.ncu_bin if tool == "ncu" else settings.vtune_bin
    found = shutil.which(binary)
    if found is None:
        setting = "NCU_BIN" if tool == "ncu" else "VTUNE_BIN (--vtune-bin)"
        raise ToolMissingError(f"{binary!r} not found on PATH; install it or point {setting} at it")
    return found


def profile(
    source: str,
    *,
    original_path: Path,
    variant: Any,
    device: str,
    tool: str,
    settings: Any,
    warmup: int | None = None,
    iters: int | None = None,
    timeout_s: float = 600.0,
    suffix: str = ".py",
) -> ProfileReport:
    """Profile ``source`` (a kernel file's text) on the spec variant's inputs with ``tool``."""
    binary = check_tool(tool, device, settings)
    warmup = settings.vtune_warmup if warmup is None else warmup
    # ncu replays every launch many times; a few measured calls are enough there
    iters = (settings.vtune_iters if tool == "vtune" else 1) if iters is None else iters
    with tempfile.TemporaryDirectory(prefix="kp_profile_") as tmp:
        folder = Path(tmp)
        kernel_file = folder / f"candidate{suffix}"
        kernel_file.write_text(source, encoding="utf-8")
        job = {
            "kernel_path": str(kernel_file),
            "original_path": str(original_path),
            "variant": variant.as_dict(),
            "device": device,
            "warmup": warmup,
            "iters": iters,
            "tool": tool,
            "vtune_bin": binary,
            "result_dir": str(folder / "vtune_result"),
            "seed": 0,
        }
        (folder / "job.json").write_text(json.dumps(job), encoding="utf-8")
        target = [sys.executable, "-m", "kernelpilot.profiling.target", str(folder / "job.json")]
        if tool == "ncu":
            cmd = ncu.command(binary, target)
            done = _run(cmd, timeout_s)
            report = ncu.parse_raw_csv(done.stdout)
        else:
            cmd = vtune.collect_command(binary, job["result_dir"], target)
            _run(cmd, timeout_s)
            done = _run(vtune.report_command(binary, job["result_dir"]), 120)
            report = vtune.parse_hotspots_csv(done.stdout)
        report.command = cmd
        if not report.kernels:
            tail = (done.stderr or done.stdout)[-1500:]
            raise KernelpilotError(f"{tool} captured no kernel: {'; '.join(report.warnings)}\n{tail}")
        return report


def _run(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    from kernelpilot.proc import communicate_or_kill

    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    stdout, stderr, timed_out = communicate_or_kill(proc, timeout_s)
    if timed_out:
        raise KernelpilotError(f"{cmd[0]} did not finish within {timeout_s:.0f} s")
    done = subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)
    if proc.returncode != 0:
        raise KernelpilotError(f"`{' '.join(cmd[:3])} ...` failed (exit {proc.returncode}): {stderr[-1500:]}")
    return done

"""Run one benchmark binary with a timeout and turn whatever happens into a :class:`RunOutcome`.

Benchmarks run serially per GPU (the caller owns the GPU); a hung binary is killed after
``timeout_s`` and recorded as ``timeout``, a crash (signal, no JSON line) as ``crashed``; neither stops
the batch.  Exit codes follow ``kernel_api``: 0 ok, 3 cannot run, 4 wrong result.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelpilot.proc import communicate_or_kill, spawn, stopping
from kernelpilot.tile_tuner.kernel_api import (
    EXIT_CANNOT_RUN,
    EXIT_OK,
    EXIT_WRONG_RESULT,
    ProgramResult,
    implausible,
    parse_result_line,
)


@dataclass
class RunOutcome:
    status: str  # ok | wrong_result | cannot_run | timeout | crashed | invalid_timing
    result: ProgramResult | None
    seconds: float
    message: str = ""
    raw: dict[str, Any] = field(default_factory=dict)


def run_program(
    argv: list[str], env: dict[str, str] | None, timeout_s: float, cwd: Path | None = None
) -> RunOutcome:
    full_env = dict(os.environ)
    full_env.update(env or {})
    t0 = time.time()
    try:
        # own session, killed with this process (even by kill -9) and on Ctrl-C: kernelpilot.proc
        proc = spawn(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env, cwd=cwd)
    except OSError as exc:
        return RunOutcome("crashed", None, time.time() - t0, f"could not start: {exc}")
    stdout, stderr, timed_out = communicate_or_kill(proc, timeout_s)
    if stopping():  # killed because the run is being interrupted: not a result of this config
        raise KeyboardInterrupt("benchmark stopped by an interrupt")
    if timed_out:
        return RunOutcome("timeout", None, time.time() - t0, f"killed after {timeout_s:.0f} s")
    seconds = time.time() - t0
    try:
        result = parse_result_line(stdout)
    except ValueError as exc:
        tail = (stderr or stdout or "").strip()[-400:]
        return RunOutcome("crashed", None, seconds, f"exit {proc.returncode}, {exc}: {tail}")
    except Exception as exc:  # noqa: BLE001 - malformed JSON from a broken program
        return RunOutcome("crashed", None, seconds, f"exit {proc.returncode}, unparsable result line: {exc}")
    raw = result.model_dump()
    code = proc.returncode
    expected = {"ok": EXIT_OK, "cannot_run": EXIT_CANNOT_RUN, "wrong_result": EXIT_WRONG_RESULT}[
        result.status
    ]
    if code != expected:
        return RunOutcome(
            "crashed",
            result,
            seconds,
            f"exit code {code} does not match reported status {result.status}",
            raw,
        )
    if result.status == "ok":
        bad = implausible(raw)
        if bad is not None:
            return RunOutcome(bad[0], result, seconds, bad[1], raw)
    return RunOutcome(result.status, result, seconds, result.message, raw)

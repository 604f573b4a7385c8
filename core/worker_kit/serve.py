"""Worker entry point shared by every DSL: read the job, run it, always write a verdict.

Run in its own process because candidate code is untrusted: a hang, a segfault or an ``os._exit``
there costs one evaluation, never the pipeline.  The parent (:class:`kernelpilot.execution.JobExecutor`)
enforces the timeout and treats a missing result file as a crash.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

JobRunner = Callable[[dict[str, Any]], dict[str, Any]]


def classify_error(exc: BaseException) -> str:
    """``compile_error`` for compiler/parser exceptions (by class name: no DSL import), else ``runtime_error``."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {
        "CompilationError",
        "CompileTimeAssertionFailure",
        "SyntaxError",
        "UnsupportedLanguageConstruct",
    }:
        return "compile_error"
    return "runtime_error"


def error_text(exc: BaseException) -> str:
    """The exception line plus the candidate file's line it came from (feedback for the next attempt)."""
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    tb = traceback.extract_tb(exc.__traceback__)
    frames = [
        f for f in tb if "candidate" in f.filename or f.filename.endswith(".py") and "kp_job" in f.filename
    ]
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return (text + where)[-4000:]


def serve_job(argv: list[str], run_job: JobRunner, run_side_by_side: JobRunner) -> int:
    """Worker entry shared by every DSL's worker: read the job file, run it, always write a verdict.

    Whatever happens inside (import error, compile failure, CUDA error), the parent gets a result file,
    so a broken candidate is a verdict, never a hang or a lost evaluation.
    """
    job = json.loads(Path(argv[0]).read_text())
    try:
        result = run_side_by_side(job) if job.get("mode") == "side_by_side" else run_job(job)
    except BaseException as exc:  # noqa: BLE001 - the parent must always get a verdict
        result = {"verdict": "runtime_error", "message": "worker error: " + error_text(exc), "extra": {}}
    Path(job["result_path"]).write_text(json.dumps(result, default=float))
    return 0


def exit_without_teardown(code: int) -> None:
    """End a worker process once its result file is written, skipping interpreter teardown: some GPU
    runtimes hang or crash at exit, which would turn a finished evaluation into a timeout."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

"""Worker process for Triton kernel files: the core's ``Model`` protocol plus Triton's CPU interpreter.

Run as ``python -m kernelpilot.dsl_plugins.triton.worker JOB.json``; it writes the result JSON named in
the job.  Inputs, the oracle, poisoning, comparison and timing are the core worker kit's
(:mod:`kernelpilot.worker_kit.model_worker`), so every DSL is judged the same way.  What is Triton's:
under ``TRITON_INTERPRET=1`` (device ``cpu``) ``@triton.autotune`` has no GPU to benchmark with, so it
gets a wall-clock timer (:func:`interpreter_autotune_timer`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from kernelpilot.worker_kit import model_worker
from kernelpilot.worker_kit.serve import exit_without_teardown, serve_job


def interpreter_autotune_timer() -> None:
    """Under ``TRITON_INTERPRET=1`` there is no GPU driver for ``@triton.autotune`` to benchmark with;
    give it a wall-clock timer so autotuned kernels still run (every config once) on the CPU."""
    import triton.runtime.autotuner as autotuner

    def wall_clock_bench(fn: Any, quantiles: Any = None, **_: Any) -> Any:
        t0 = time.perf_counter()
        fn()
        ms = (time.perf_counter() - t0) * 1e3
        return [ms] * len(quantiles) if quantiles else ms

    autotuner.Autotuner.do_bench = property(lambda self: wall_clock_bench)  # type: ignore[method-assign,assignment]


def _before_run(device: str) -> None:
    if device == "cpu":
        interpreter_autotune_timer()


HOOKS = model_worker.ModelWorkerHooks(before_run=_before_run)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    return model_worker.run_job(job, HOOKS)


def run_side_by_side(job: dict[str, Any]) -> dict[str, Any]:
    return model_worker.run_side_by_side(job, HOOKS)


def main(argv: list[str] | None = None) -> int:
    return serve_job(sys.argv[1:] if argv is None else argv, run_job, run_side_by_side)


if __name__ == "__main__":
    sys.stdout.flush()
    exit_without_teardown(main())

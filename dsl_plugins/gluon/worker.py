"""Worker process for Gluon kernel files: the core's ``Model`` protocol unchanged.

Run as ``python -m kernelpilot.dsl_plugins.gluon.worker JOB.json``.  Gluon has no interpreter mode, so
the executor never sends a ``cpu`` job here; on a GPU the protocol (oracle, poisoning, comparison,
``do_bench`` timing, interleaved side-by-side rounds) is :mod:`kernelpilot.worker_kit.model_worker`.
"""

from __future__ import annotations

import sys
from typing import Any

from kernelpilot.worker_kit import model_worker
from kernelpilot.worker_kit.serve import exit_without_teardown, serve_job


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    return model_worker.run_job(job)


def run_side_by_side(job: dict[str, Any]) -> dict[str, Any]:
    return model_worker.run_side_by_side(job)


def main(argv: list[str] | None = None) -> int:
    return serve_job(sys.argv[1:] if argv is None else argv, run_job, run_side_by_side)


if __name__ == "__main__":
    sys.stdout.flush()
    exit_without_teardown(main())

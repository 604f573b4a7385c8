"""Synthetic ``kernelpilot tune`` run documents for an Intel Xe (bmg) target, as the export reads them.

No Xe hardware measured anything in them: times are placeholders, and the tests that use them check
the export's bookkeeping (what it writes from the winners), never a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def bmg_gemm_workload(
    i: int,
    mnk: tuple[int, int, int],
    layout: str,
    dtype: str,
    config: dict[str, Any],
    label: str,
    runtime: dict,
) -> dict[str, Any]:
    """Workload ``w{i}`` of a bmg GEMM run whose best config is ``config`` (time 1 + i ms)."""
    m, n, k = mnk
    return {
        "name": f"w{i}",
        "kernel": "gemm",
        "dims": {"M": m, "N": n, "K": k, "layout": layout},
        "dtype": dtype,
        "target": "bmg",
        "best": {"config": config, "label": label, "time_ms": 1.0 + i, "runtime": runtime},
    }


def write_bmg_run(tmp: Path, workloads: list[dict[str, Any]]) -> Path:
    """The run document ``tmp/xe_run.json`` holding ``workloads``."""
    path = tmp / "xe_run.json"
    path.write_text(
        json.dumps({"target": "bmg", "device": "bmg", "run_id": "synthetic", "workloads": workloads})
    )
    return path

"""Rebuild a device call's ``summary.json`` from the files of it that came back, on any machine.

Why: the device tool returns at most 8 files from a call; a call that writes more (a probe beside a
``kinds_default_h200.sh`` run) can lose the driver's summary while its run document (``run_kinds.json``)
and driver log come back.  The verdict (``kinds_verdict.py``) reads the summary's per-workload tables, and
those are a pure function of the run document: this rebuilds them with the driver's own ``table()`` and
``confirmation_cost()``, takes the phase lines the driver printed from its log, and says in a
``reconstructed`` field that it is a rebuild and from what::

    python benchmarks/summary_from_run.py --runs R/run_kinds.json --driver-log R/driver.log \\
        --gpu "NVIDIA H200, 580.159.04, 700.00 W" --torch 2.11.0+cu130 --cudnn 91900 \\
        --nvcc "Build cuda_13.0.r13.0/compiler.36424714_0" --command "..." --wall-s 262 --out R/summary.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from confirm_h200 import confirmation_cost, table


def driver_phases(log_text: str) -> dict[str, Any]:
    """The phase lines the driver printed last (its final ``phases`` JSON, tables left out)."""
    start = log_text.find("{\n")
    if start < 0:
        raise ValueError("the driver log holds no phases JSON (a multi-line object after the plan line)")
    return json.loads(log_text[start:])


def rebuild(runs: dict[str, Any], phases: dict[str, Any], versions: dict[str, Any], command: str,
            wall_s: float) -> dict[str, Any]:  # fmt: skip
    """The summary the driver would have written: each tuned phase's table from its run document."""
    phases = {k: dict(v) if isinstance(v, dict) else v for k, v in phases.items()}
    for name, run in runs.items():
        if name not in phases:
            raise ValueError(f"the run document has phase {name!r}, the driver log does not")
        phases[name]["table"] = table(run)
    gpu = str(versions.get("gpu", "")).split(",")[0] or "an unknown GPU"
    first = next(iter(runs.values()), {})
    summary: dict[str, Any] = {
        "what": f"confirmed tuning winners and vendor baselines on {gpu} (kernelpilot tune, confirmation on)",
        "date": first.get("started"),
        "command": command,
        "versions": versions,
        "phases": phases,
        "skipped": [],
        "reconstructed": "rebuilt by benchmarks/summary_from_run.py from the call's run document and driver "
        "log (the call's own summary.json did not come back): tables by confirm_h200.table(), "
        "confirmation_cost() as the driver computes it; versions as given on the command line",
        "wall_s": wall_s,
    }
    summary["confirmation_cost"] = confirmation_cost(summary)
    return summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", required=True, type=Path, help="the call's run_kinds.json")
    ap.add_argument("--driver-log", required=True, type=Path, help="the call's driver.log")
    ap.add_argument("--gpu", required=True, help="nvidia-smi's name, driver, power limit")
    ap.add_argument("--torch", required=True)
    ap.add_argument("--cudnn", type=int, required=True)
    ap.add_argument("--nvcc", required=True)
    ap.add_argument("--cutlass", default="4.2.0")
    ap.add_argument("--command", required=True, help="the device call's command")
    ap.add_argument("--wall-s", type=float, required=True, help="the driver's wall time")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    versions = {"nvcc": args.nvcc, "gpu": args.gpu, "torch": args.torch, "cudnn": args.cudnn,
                "cutlass": args.cutlass}  # fmt: skip
    summary = rebuild(json.loads(args.runs.read_text()), driver_phases(args.driver_log.read_text()), versions,
                      args.command, args.wall_s)  # fmt: skip
    args.out.write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()

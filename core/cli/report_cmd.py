"""Re-render a tuning run's outputs (table, CSV, tile_shapes, plots) from its RUN.json."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_json", help="run.json written by `kernelpilot tune`")
    parser.add_argument("--out", help="folder for the re-rendered files (default: next to RUN.json)")
    parser.add_argument("--no-plots", action="store_true", help="skip PNG plots")


def run(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from kernelpilot.errors import InputError
    from kernelpilot.tile_tuner import report

    path = Path(args.run_json)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", file=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc}", file=str(path)) from exc
    if not isinstance(doc, dict) or "workloads" not in doc:
        raise InputError("not a kernelpilot run document (no 'workloads')", file=str(path), field="workloads")
    if doc.get("dry_run"):
        raise InputError(
            "this is a dry-run plan, not a run; nothing was measured", file=str(path), field="dry_run"
        )
    out = Path(args.out) if args.out else path.parent
    paths = report.write_all(doc, out, plots=not args.no_plots, basename=path.stem if args.out else "report")
    report.console(doc)
    print("outputs: " + ", ".join(f"{k}={v}" for k, v in paths.items()))
    return 0

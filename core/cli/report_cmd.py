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
    from kernelpilot.fileio import check_output_dir, read_text
    from kernelpilot.tile_tuner import report
    from kernelpilot.tile_tuner.run_doc import validate_run_document

    path = Path(args.run_json)
    try:
        doc = json.loads(read_text(path, what="run document"))
    except json.JSONDecodeError as exc:
        raise InputError(f"not JSON: {exc}", file=str(path)) from exc
    validate_run_document(doc, str(path))  # before anything is written
    out = Path(args.out) if args.out else path.parent
    check_output_dir(out, field="--out")
    paths = report.write_all(doc, out, plots=not args.no_plots, basename=path.stem if args.out else "report")
    report.console(doc)
    print("outputs: " + ", ".join(f"{k}={v}" for k, v in paths.items()))
    return 0

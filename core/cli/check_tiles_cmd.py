"""Check tile configurations against a target's constraint model before anything is compiled.

Input: a YAML or JSON list of configs (see docs/hw_models.md for the fields per target), or a
mapping ``{configs: [...], problem: {M: .., N: .., K: ..}}`` to include the problem-level rules.
Exit 0 when the check ran (invalid configs are results, not errors; ``--fail-on-invalid`` exits 1 if
any config is invalid), 2 on bad input (an unknown field or kind names the entry and the field).
"""

from __future__ import annotations

import argparse
import json


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", required=True, help="target model name: bmg, pvc, xe2_igpu, sm90 ...")
    parser.add_argument("--input", required=True, metavar="FILE", help="YAML or JSON list of tile configs")
    parser.add_argument("--json", action="store_true", help="print one JSON list of results")
    parser.add_argument(
        "--fail-on-invalid", action="store_true", help="exit with code 1 when any config is invalid"
    )


def run(args: argparse.Namespace) -> int:
    from kernelpilot.hw_models.check_io import check_file
    from kernelpilot.targets import get_target_model

    model = get_target_model(args.target)
    results = check_file(model, args.input)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "index": r["index"],
                        "label": r["label"],
                        "valid": r["valid"],
                        "violations": r["violations"],
                        "warnings": r["warnings"],
                    }
                    for r in results
                ],
                indent=2,
            )
        )
    else:
        from rich.console import Console
        from rich.markup import escape

        console = Console(highlight=False)
        for r in results:
            status = "[green]valid[/green]" if r["valid"] else "[red]INVALID[/red]"
            console.print(f"#{r['index']} {escape(r['label'])}: {status}")
            for v in r["violations"]:
                console.print(f"    [red]{v['rule']}[/red]: {escape(v['message'])}")
            for w in r["warnings"]:
                console.print(f"    [yellow]warning {w['rule']}[/yellow]: {escape(w['message'])}")
        bad = sum(1 for r in results if not r["valid"])
        console.print(
            f"{len(results)} config(s) checked for {args.target}: {len(results) - bad} valid, {bad} invalid"
        )
    if args.fail_on_invalid and any(not r["valid"] for r in results):
        return 1
    return 0

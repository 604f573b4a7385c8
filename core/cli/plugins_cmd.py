"""List discovered plugins (entry-point group ``kernelpilot.plugins``), their hooks and availability."""

from __future__ import annotations

import argparse
import json


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def run(args: argparse.Namespace) -> int:
    from kernelpilot.plugins import get_registry

    records = get_registry().records
    if args.json:
        print(json.dumps([r.as_dict() for r in records], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kernelpilot plugins")
    for column in ("name", "distribution", "version", "hooks", "available", "reason"):
        table.add_column(column)
    for r in records:
        table.add_row(
            r.name,
            r.distribution or "-",
            r.version or "-",
            ", ".join(h.removeprefix("kp_") for h in r.hooks),
            "yes" if r.available else "no",
            r.reason,
        )
    Console().print(table)
    return 0

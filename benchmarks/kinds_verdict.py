"""The attention / decode / grouped / MoE yardstick of one device call, from its records.

Why: the question a kinds call answers is "is every workload at least as fast as the best PyTorch path,
as the run's own confirmation measured it, and does decode move the KV cache at >= 90 % of the
device-to-device copy bandwidth measured in the same call?".  This reads the call's ``summary.json``
(benchmarks/confirm_h200.py: confirmed winner, confirmed ms and the vendor's ms per workload),
``run_kinds.json`` (the problems) and ``hbm_copy.json`` (benchmarks/hbm_copy_h200.py) and writes one
JSON document plus a Markdown table; nothing is re-measured.  Decode traffic is
:func:`kernelpilot.dsl_plugins.cuda.fmha.fa_min_bytes` (Q, K/V once per K/V head, O; 16-bit)::

    python benchmarks/kinds_verdict.py --summary benchmarks/results/kinds_h200_summary.json \\
        --runs benchmarks/results/kinds_h200_run_kinds.json --copy benchmarks/results/kinds_h200_hbm_copy.json \\
        --out benchmarks/results/kinds_h200_verdict.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from kernelpilot.dsl_plugins.cuda.fmha import fa_min_bytes

KINDS = ("fa_prefill", "fa_decode", "moe_gemm", "grouped_gemm")
DECODE_SHARE = 0.90  # decode must reach this share of the copy bandwidth


def problems_by_workload(runs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """workload name -> its validated dims, from the run documents of the call."""
    return {w["name"]: w["dims"] for run in runs.values() for w in run["workloads"]}


def verdict_rows(
    summary: dict[str, Any], runs: dict[str, Any], copy_tbps: float | None
) -> list[dict[str, Any]]:
    """One row per workload: confirmed winner against the vendor, and decode's share of the copy."""
    dims = problems_by_workload(runs)
    rows = []
    for kind in KINDS:
        for r in summary["phases"].get(kind, {}).get("table", []):
            row = {
                "kind": kind,
                "workload": r["workload"],
                "winner": r["confirmed_best"],
                "confirmed_ms": r["confirmed_ms"],
                "vendor": r["vendor"],
                "vendor_ms": r["vendor_ms"],
                "vs_vendor": r["vs_vendor"],
                "at_least_vendor": r["vs_vendor"] is not None and r["vs_vendor"] >= 1.0,
            }
            if kind == "fa_decode" and copy_tbps:
                tbps = fa_min_bytes(dims[r["workload"]]) / (r["confirmed_ms"] * 1e-3) / 1e12
                row.update(
                    tbps=tbps, share_of_copy=tbps / copy_tbps, copy_ok=tbps / copy_tbps >= DECODE_SHARE
                )
            rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], copy_tbps: float | None) -> str:
    lines = [
        "| kind | workload | confirmed winner | ms | vendor | vendor ms | vs vendor | decode TB/s (share of copy) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        bw = f"{r['tbps']:.2f} ({100 * r['share_of_copy']:.0f} %)" if "tbps" in r else "—"
        lines.append(
            f"| {r['kind']} | `{r['workload']}` | `{r['winner']}` | {r['confirmed_ms']:.4f} | {r['vendor']} | "
            f"{r['vendor_ms']:.4f} | **{r['vs_vendor']:.3f}** | {bw} |"
        )
    if copy_tbps:
        lines.append(f"\ncopy bandwidth in the same call: {copy_tbps:.2f} TB/s")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--summary", required=True, type=Path, nargs="+", help="summary.json of each call")
    ap.add_argument(
        "--runs", required=True, type=Path, nargs="+", help="run_kinds.json of each call, same order"
    )
    ap.add_argument(
        "--copy",
        type=Path,
        nargs="*",
        default=[],
        help="hbm_copy.json of each call (needed for decode's share)",
    )
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    if len(args.runs) != len(args.summary) or (args.copy and len(args.copy) != len(args.summary)):
        ap.error("give one --runs (and one --copy, if any) per --summary, in the same order")
    summaries = [json.loads(p.read_text()) for p in args.summary]
    copies = [json.loads(p.read_text())["tbps"] for p in args.copy] or [None] * len(summaries)
    rows = []
    for summary, runs, copy in zip(summaries, args.runs, copies, strict=True):
        # decode rows are judged against the copy bandwidth of the call that measured them
        rows += verdict_rows(summary, json.loads(runs.read_text()), copy)
    ratios = [r["vs_vendor"] for r in rows]
    copy_tbps = copies[0] if len(copies) == 1 else copies
    doc = {
        "what": "per workload: confirmed winner vs the best PyTorch path (the run's vendor comparison); "
        "decode's K/V traffic over time against the device-to-device copy of the same call",
        "command": "python benchmarks/kinds_verdict.py "
        + " ".join(
            f"--{k} {' '.join(str(p) for p in v)}"
            for k, v in (("summary", args.summary), ("runs", args.runs), ("copy", args.copy))
            if v
        ),
        "source_date": summaries[0].get("date"),
        "versions": summaries[0].get("versions"),
        "copy_tbps": copy_tbps,
        "at_least_vendor": sum(r["at_least_vendor"] for r in rows),
        "workloads": len(rows),
        "geomean_vs_vendor": math.exp(sum(math.log(x) for x in ratios) / len(ratios)) if ratios else None,
        "decode_copy_ok": all(r["copy_ok"] for r in rows if "copy_ok" in r) if any(copies) else None,
        "rows": rows,
    }
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(markdown(rows, copies[0] if len(copies) == 1 else None))
    print(
        f"\n{doc['at_least_vendor']}/{doc['workloads']} at >= 1.00x; geomean {doc['geomean_vs_vendor']:.3f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

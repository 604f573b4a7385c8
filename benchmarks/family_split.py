"""Within one tuning run: the fastest measured config with a boolean config field set against the fastest
without it, per workload (e.g. the swap-AB grouped family against the rest of the space).

Both sides are search-time medians of the same run (same GPU, same minutes), so the ratio says which
family the search found faster; it is not a confirmed ratio (the best of several noisy measurements is
biased upward on both sides, more so on the side with more configs measured).  The confirmed comparison
with the vendor is ``kinds_verdict.py``.

    python benchmarks/family_split.py --runs benchmarks/results/kinds_swap_h100_moe_run_kinds.json \
        --field swap_ab --out benchmarks/results/kinds_swap_h100_family_split.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def fmt_ms(ms: float | None) -> str:
    """A side's best time for the console table; a side with no measured config shows a dash, not 0."""
    return f"{ms:.4f}" if ms else f"{'-':>6s}"


def split_workload(workload: dict[str, Any], field: str) -> dict[str, Any]:
    """The fastest measured config with ``field`` true and the fastest without, and how many of each."""
    ok = [t for t in workload["tried"] if t.get("status") == "ok" and t.get("time_ms")]
    sides = {
        "with": [t for t in ok if t["config"].get(field)],
        "without": [t for t in ok if not t["config"].get(field)],
    }
    row: dict[str, Any] = {"workload": workload["name"], "measured": len(ok)}
    for side, tried in sides.items():
        best = min(tried, key=lambda t: t["time_ms"]) if tried else None
        row[side] = {
            "measured": len(tried),
            "best": best["label"] if best else None,
            "best_ms": best["time_ms"] if best else None,
        }
    if row["with"]["best_ms"] and row["without"]["best_ms"]:
        row["without_over_with"] = row["without"]["best_ms"] / row["with"]["best_ms"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", nargs="+", required=True, help="run_kinds.json files (kind -> run document)")
    ap.add_argument("--field", required=True, help="a boolean config field, e.g. swap_ab")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    rows = []
    for path in args.runs:
        for kind, run in json.loads(Path(path).read_text()).items():
            for workload in run["workloads"]:
                rows.append({"file": Path(path).name, "kind": kind, **split_workload(workload, args.field)})
    ratios = [r["without_over_with"] for r in rows if "without_over_with" in r]
    doc = {
        "what": f"per workload, the fastest measured config with {args.field} against the fastest without "
        "(search-time medians of one run; not confirmed)",
        "command": "python benchmarks/family_split.py --runs "
        + " ".join(f"benchmarks/results/{Path(p).name}" for p in args.runs)
        + f" --field {args.field} --out benchmarks/results/{Path(args.out).name}",
        "rows": rows,
        "with_faster": sum(x > 1.0 for x in ratios),
        "compared": len(ratios),
        "geomean_without_over_with": math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else None,
    }
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    for r in rows:
        w, wo = r["with"], r["without"]
        print(
            f"{r['workload']:28s} with {w['measured']:2d}: {w['best'] or '-':28s} {fmt_ms(w['best_ms'])}  "
            f"without {wo['measured']:2d}: {wo['best'] or '-':36s} {fmt_ms(wo['best_ms'])}  "
            + (f"{r['without_over_with']:.3f}" if "without_over_with" in r else "-")
        )
    print(f"{doc['with_faster']}/{doc['compared']} faster with {args.field}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

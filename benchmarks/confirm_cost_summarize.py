"""Summary of one ``confirm_cost_h200.sh`` call (CPU): the cost of confirmation on the cold Llama-3 run,
its library-default GEMM table next to cuBLAS, and the independent check's ratios.

    python benchmarks/confirm_cost_summarize.py --results benchmarks/results --prefix confirm_cost_h200_
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

LIMIT = 0.15  # the share of a cold run that confirmation may take


def cost(run: dict[str, Any], driver: str, check: dict[str, Any] | None) -> dict[str, Any]:
    """Confirmation's wall time against the cold run's, as measured and with the bound that favours
    confirmation least (the check ran beside the cold run: its whole wall taken off the cold wall)."""
    wall, confirm_s = run["wall_s"], run["confirm"]["wall_s"]
    per = {w["name"]: (w.get("time_s") or {}).get("confirm") for w in run["workloads"]}
    out: dict[str, Any] = {
        "cold_run_wall_s": wall,
        "confirm_wall_s": confirm_s,
        "search_wall_s": round(wall - confirm_s, 2),
        "confirm_s_per_workload": per,
        "confirm_s_mean_per_workload": round(confirm_s / len(per), 2) if per else None,
        "share_of_cold_run": round(confirm_s / wall, 4),
        "limit": LIMIT,
        "executor": run.get("executor"),
    }
    side = re.search(r"crosscheck start (\d+) s", driver) and re.search(r"cold run start (\d+) s", driver)
    if check and side:
        xs = int(re.search(r"crosscheck start (\d+) s", driver).group(1))
        cs = int(re.search(r"cold run start (\d+) s", driver).group(1))
        if xs >= cs:  # the check ran beside the cold run
            lower = wall - check.get("wall_s", 0.0)
            out["beside_check"] = {"check_wall_s": check.get("wall_s"), "check_cpu_s": check.get("cpu_s"),
                                   "cold_wall_less_check_s": round(lower, 2),
                                   "share_bound": round(confirm_s / lower, 4)}  # fmt: skip
    worst = max(out["share_of_cold_run"], (out.get("beside_check") or {}).get("share_bound", 0.0))
    out["met"] = worst <= LIMIT
    return out


def table(run: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for w in run["workloads"]:
        best, sb, vendor = w.get("best") or {}, w.get("search_best") or {}, w.get("vendor") or {}
        default = next(
            (f for f in (w.get("confirmation") or {}).get("finalists", []) if f["role"] == "default"), {}
        )
        rows.append({
            "workload": w["name"], "dims": w["dims"], "configs": w.get("measured_configs"),
            "search_best": sb.get("label"), "search_ms": sb.get("time_ms"),
            "confirmed_best": best.get("label"), "confirmed_ms": best.get("time_ms"),
            "spread": best.get("spread"), "unstable": best.get("unstable"),
            "winner_changed": (w.get("confirmation") or {}).get("winner_changed"),
            "default_ms": default.get("confirmed_ms"),
            "vendor": vendor.get("backend") or vendor.get("name"), "vendor_ms": vendor.get("confirmed_ms"),
            "vendor_spread": vendor.get("spread"), "vs_vendor": w.get("vs_vendor"), "verdict": w.get("verdict"),
        })  # fmt: skip
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="benchmarks/results")
    ap.add_argument("--prefix", default="confirm_cost_h200_")
    ap.add_argument("--command", help="the exact device command of the call, recorded as is")
    args = ap.parse_args()
    d, p = Path(args.results), args.prefix
    driver = (d / f"{p}driver.log").read_text() if (d / f"{p}driver.log").exists() else ""
    check = (
        json.loads((d / f"{p}crosscheck.json").read_text()) if (d / f"{p}crosscheck.json").exists() else None
    )
    out: dict[str, Any] = {"what": "cost of confirmation on a cold run of examples/tune_llama3_gemm_sm90.yaml "
                                   "(library defaults) and the independent check of a stream-K winner",
                           "sources": sorted(f.name for f in d.glob(f"{p}*") if f.name != f"{p}summary.json")}  # fmt: skip
    if args.command:
        out["device_command"] = args.command
    run_path = d / f"{p}llama3_run.json"
    if run_path.exists():
        run = json.loads(run_path.read_text())
        out["command"] = run.get("command")
        out["started"] = run.get("started")
        out["device"] = run.get("device_name")
        out["toolchain"], out["library"] = run.get("toolchain"), run.get("library")
        out["template_version"] = run.get("template_version")
        out["cost"] = cost(run, driver, check)
        out["gemm_library_defaults"] = table(run)
    else:
        out["cost"] = {"not_measured": "no cold run in this call (COLD=0: the check alone)"}
    if check:
        out["crosscheck"] = {k: check.get(k) for k in ("date", "command", "run", "vs_vendor", "checks", "wall_s",
                                                       "cpu_s")}  # fmt: skip
        out["crosscheck"]["run"] = {k: v for k, v in (check.get("run") or {}).items() if k != "calls"}
        n = check.get("ncu") or {}
        out["crosscheck"]["ncu_per_launch_ms"] = {k: (v or {}).get("per_launch_ms") or (v or {}).get("median_ms")
                                                  for k, v in n.items() if isinstance(v, dict) and k != "wall_s"}  # fmt: skip
    tg, vg = d / f"{p}ncu_tuned_graph.csv", d / f"{p}ncu_vendor_graph.csv"
    if tg.exists() and vg.exists():  # parsed here again (the device-side parse can miss a row format)
        import confirm_crosscheck_h200 as xc

        t, v = xc.tuned_graph(tg.read_text()), xc.vendor_graph(vg.read_text())
        ratio = (
            (v["per_launch_ms"] / t["per_launch_ms"])
            if t.get("per_launch_ms") and v.get("per_launch_ms")
            else None
        )
        run_ratio = ((check or {}).get("vs_vendor") or {}).get("run_v3")
        out["ncu_graph"] = {
            "tuned": {k: t.get(k) for k in ("graphs", "graph_ms", "iters", "per_launch_ms")},
            "vendor": {k: v.get(k) for k in ("graphs", "graph_ms", "iters", "per_launch_ms")},
            "vs_vendor": ratio, "run_vs_vendor": run_ratio,
            "difference": (ratio / run_ratio - 1.0) if (ratio and run_ratio) else None,
            "agrees_within_3pct": (abs(ratio / run_ratio - 1.0) <= 0.03) if (ratio and run_ratio) else None,
        }  # fmt: skip
    (d / f"{p}summary.json").write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: out.get(k) for k in ("cost", "crosscheck", "ncu_graph")}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

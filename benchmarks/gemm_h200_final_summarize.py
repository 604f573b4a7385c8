"""Tuned CUTLASS vs cuBLAS, side by side in one GPU run (no GPU needed to summarize).

    python benchmarks/gemm_h200_final_summarize.py DIR > benchmarks/results/gemm_h200_final.json

DIR holds what ``benchmarks/gemm_h200.py --phases cublas,final,cublas2`` wrote: ``cublas.json`` (cuBLAS
before the tuned runs), ``run_final.json`` (per shape: the library default and the best configs of the
ground truth, measured by ``kernelpilot tune``), ``cublas2.json`` (cuBLAS again after them) and
``summary.json``.  Both sides exclude host dispatch (cuBLAS and the CUTLASS program replay their timed
launches from CUDA graphs).  The ratio uses the FASTER of the two cuBLAS passes, so drift between the
passes can only count against kernelpilot.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from pathlib import Path


def geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir", type=Path, help="the --out folder of benchmarks/gemm_h200.py's final run")
    d = ap.parse_args().dir
    run = json.loads((d / "run_final.json").read_text())
    cb1 = json.loads((d / "cublas.json").read_text())
    cb2 = json.loads((d / "cublas2.json").read_text())
    summary = json.loads((d / "summary.json").read_text())
    # every measured variant says whether its launches were replayed from a CUDA graph
    graphed: dict[tuple[int, int, int], set] = {}
    with sqlite3.connect(d / "final.sqlite") as db:
        for problem, result in db.execute("select problem, result from measurements"):
            p = json.loads(problem)
            flags = graphed.setdefault((p["M"], p["N"], p["K"]), set())
            flags.update(v.get("graph") for v in json.loads(result).get("variants", []))
    rows, ratios = [], []
    for w in run["workloads"]:
        name, best, default = w["name"], w["best"], w["default"]
        c1 = cb1["shapes"][name]["time_ms"]["median"]
        c2 = cb2["shapes"][name]["time_ms"]["median"]
        cublas = min(c1, c2)
        ratio = cublas / best["time_ms"]
        ratios.append(ratio)
        graphs = graphed.get((w["dims"]["M"], w["dims"]["N"], w["dims"]["K"]), set())
        rows.append({
            "workload": name, "dims": {k: w["dims"][k] for k in ("M", "N", "K")},
            "tuned": {"label": best["label"], "runtime": best["runtime"], "time_ms": best["time_ms"],
                      "tflops": round(best["tflops"], 1), "pct_of_peak": round(best["pct_of_peak"], 1)},
            "library_default": {"label": default["label"], "time_ms": default["time_ms"]},
            "speedup_vs_default": round(w["speedup_vs_default"], 3),
            "cublas_ms": {"before": c1, "after": c2, "used": cublas},
            "cublas_tflops": round(2 * w["dims"]["M"] * w["dims"]["N"] * w["dims"]["K"] / (cublas * 1e-3) / 1e12, 1),
            "tuned_vs_cublas": round(ratio, 3),
            "configs": [{"label": t["label"], "status": t["status"], "time_ms": t.get("time_ms")} for t in w["tried"]],
            "timed_from_cuda_graph": sorted(g for g in graphs if g is not None),
        })  # fmt: skip
    doc = {
        "what": "tuned CUTLASS sm90a GEMM (kernelpilot) vs cuBLAS (torch.matmul), bf16 rr, fp32 accumulate, one GPU run",
        "device": run["device_name"], "toolchain": run["toolchain"], "library": run["library"],
        "template_version": run["template_version"], "torch": cb1["torch"], "date": summary["date"],
        "command": summary["command"], "phases": summary["phases"],
        "geomean_tuned_vs_cublas": round(geomean(ratios), 3),
        "min_tuned_vs_cublas": round(min(ratios), 3),
        "below_0_85": [r["workload"] for r in rows if r["tuned_vs_cublas"] < 0.85],
        "per_shape": rows,
    }  # fmt: skip
    json.dump(doc, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

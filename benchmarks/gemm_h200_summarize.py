"""Summarize the recorded H200 run (no GPU): tuned CUTLASS vs cuBLAS per shape, cold/warm wall time.

    python benchmarks/gemm_h200_summarize.py [--results DIR] > benchmarks/results/gemm_h200_results.json

Inputs (all recorded by benchmarks/gemm_h200.py on the H200 via benchmarks/gemm_h200_device.sh):
gemm_h200_gt_run.json (exhaustive ground truth, 34 configs x 10 shapes), gemm_h200_cublas.json (cuBLAS
in the same run, before the tuning phases), gemm_h200_cold_run.json (one-shape cold-cache tune),
gemm_h200_cublas_rerun*.json (cuBLAS measured twice more in a second call, to show its spread).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--results",
        type=Path,
        default=Path(__file__).parent / "results",
        help="folder with the run's JSON files (default: benchmarks/results)",
    )
    R = ap.parse_args().results
    gt = json.loads((R / "gemm_h200_gt_run.json").read_text())
    cold = json.loads((R / "gemm_h200_cold_run.json").read_text())
    cbs = [
        json.loads((R / f).read_text())
        for f in (
            "gemm_h200_cublas.json",
            "gemm_h200_cublas_rerun_firstpass.json",
            "gemm_h200_cublas_rerun.json",
        )
    ]
    rows, ratios, ratios_best_cublas = [], [], []
    for w in gt["workloads"]:
        b, name = w["best"], w["name"]
        cb = cbs[0]["shapes"][name]["time_ms"]["median"]
        cb_best = min(c["shapes"][name]["time_ms"]["median"] for c in cbs)
        r, rb = cb / b["time_ms"], cb_best / b["time_ms"]
        ratios.append(r)
        ratios_best_cublas.append(rb)
        rows.append({
            "workload": name, "dims": {k: w["dims"][k] for k in ("M", "N", "K")},
            "tuned": {"label": b["label"], "runtime": b["runtime"], "time_ms": b["time_ms"], "tflops": round(b["tflops"], 1)},
            "library_default": {"label": w["default"]["label"], "time_ms": w["default"]["time_ms"], "tflops": round(w["default"]["tflops"], 1)},
            "speedup_vs_default": round(w["speedup_vs_default"], 3),
            "cublas_same_run": {"time_ms": cb, "tflops": round(cbs[0]["shapes"][name]["tflops"], 1)},
            "cublas_best_of_3_runs_ms": cb_best,
            "tuned_vs_cublas": round(r, 3), "tuned_vs_best_cublas": round(rb, 3),
            "configs_measured": w["measured_configs"], "failed": [d["label"] for d in w["model_disagreements"]],
        })  # fmt: skip
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
    geo_b = math.exp(sum(map(math.log, ratios_best_cublas)) / len(ratios_best_cublas))
    cw = cold["workloads"][0]
    doc = {
        "device": gt["device_name"], "toolchain": gt["toolchain"], "library": gt["library"],
        "template_version": gt["template_version"], "date": gt["started"], "torch": cbs[0]["torch"],
        "commands": {
            "device": "BUDGET_S=555 bash benchmarks/gemm_h200_device.sh --jobs 15 --phases cublas,cold,warm,gt",
            "ground_truth": gt["command"], "cold": cold["command"],
        },
        "ground_truth_space": "sm90 model's legal bf16 space filtered to tile_k=64, clusters 1x1/2x1/1x2, cooperative "
        "(stream-K build) and pingpong: 33 configs + the library default (128x128x64 coop nosmem) = 34",
        "per_shape": rows,
        "geomean_tuned_vs_cublas": round(geo, 3), "min_tuned_vs_cublas": round(min(ratios), 3),
        "geomean_tuned_vs_best_of_3_cublas": round(geo_b, 3), "min_tuned_vs_best_of_3_cublas": round(min(ratios_best_cublas), 3),
        "cold_one_shape": {"wall_s": cold["wall_s"], "process_wall_s": 90.8, "shape": cw["dims"], "configs": cw["measured_configs"],
                           "best": cw["best"]["label"], "best_tflops": round(cw["best"]["tflops"], 1), "time_s": cw["time_s"]},
        "warm_one_shape": {"process_wall_s": 13.1, "note": "same command with --remeasure: every build from the cache, every config re-run"},
        "ground_truth_wall_s": gt["wall_s"],
        "model_disagreements": sum(len(r["failed"]) for r in rows),
    }  # fmt: skip
    json.dump(doc, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

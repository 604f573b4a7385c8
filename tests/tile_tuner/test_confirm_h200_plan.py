"""The device driver benchmarks/confirm_h200.py rehearsed on a CPU: its batches and dry-run plans
(what the one GPU call will build and tune)."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.support import REPO


def test_plan_only_writes_the_batches_and_counts_the_programs(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    r = subprocess.run([sys.executable, str(REPO / "benchmarks" / "confirm_h200.py"), "--out", str(out),
                        "--work", str(work), "--plan-only"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    plan = summary["phases"]["plan"]
    assert set(plan) == {"gemm", "fa_prefill", "fa_decode", "moe_gemm", "grouped_gemm"}
    assert all(p["programs"] >= 2 for p in plan.values())
    gemm = yaml.safe_load(summary["batches"]["gemm"])
    shapes = {(w["dims"]["M"], w["dims"]["N"], w["dims"]["K"]) for w in gemm["workloads"]}
    assert len(shapes) == 6 and (2048, 7168, 18432) in shapes and (32, 12288, 4096) in shapes
    # every workload's search is one round (budget <= batch size 8): the build step can build it all
    for name in plan:
        doc = yaml.safe_load(summary["batches"][name])
        assert doc["defaults"]["budget_configs"] <= 8
        assert len(doc["workloads"]) >= 3

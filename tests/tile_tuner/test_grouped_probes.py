"""benchmarks/vendor_kernels_probe.py and grouped_load_probe.py read a tuner run document (no GPU needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.benchmark_scripts import load_benchmark_script

ROOT = Path(__file__).resolve().parents[2]


def load_probe(name: str = "vendor_kernels_probe"):
    return load_benchmark_script(name)


RUN_KINDS = {
    "moe_gemm": {"workloads": [{"name": "moe_a", "dims": {"groups": [[0, 64, 32], [128, 64, 32]]}}]},
    "grouped_gemm": {"workloads": [{"name": "grp_b", "dims": {"groups": [[16, 8, 8], [32, 8, 8]]}}]},
}


def test_group_shapes_drops_empty_groups_and_reads_every_phase():
    shapes = load_probe().group_shapes(RUN_KINDS, {"moe_a", "grp_b"})
    assert shapes == {"moe_a": [(128, 64, 32)], "grp_b": [(16, 8, 8), (32, 8, 8)]}


def test_group_shapes_names_a_missing_workload():
    with pytest.raises(SystemExit, match="not_there"):
        load_probe().group_shapes(RUN_KINDS, {"moe_a", "not_there"})


RECORD = ROOT / "tests" / "data" / "records" / "kinds_default_h100_grouped_r2_run_kinds.json"


def test_load_probe_takes_the_confirmed_winner_and_builds_it_from_its_source_dims():
    import json

    doc = json.loads(RECORD.read_text())
    probe = load_probe("grouped_load_probe")
    spec = probe.winners(doc, {"mixtral_8x7b_down"})["mixtral_8x7b_down"]
    recorded = next(w for w in doc["moe_gemm"]["workloads"] if w["name"] == "mixtral_8x7b_down")
    assert spec["config"] == recorded["best"]["config"]
    assert spec["recorded_ms"] == recorded["best"]["confirmed_ms"]
    from kernelpilot.tile_tuner.kernels import get_tile_kernel

    kernel = get_tile_kernel(spec["kernel"], "sm90")
    problem = kernel.validate_problem(dict(spec["dims"]), spec["dtype"], "test")
    assert problem["groups"] == recorded["dims"]["groups"]


def test_load_probe_names_a_workload_without_a_winner():
    import json

    with pytest.raises(SystemExit, match="nope"):
        load_probe("grouped_load_probe").winners(json.loads(RECORD.read_text()), {"nope"})


def _tried(label: str, ms: float | None, swap: bool, status: str = "ok") -> dict:
    return {"label": label, "time_ms": ms, "status": status, "config": {"swap_ab": True} if swap else {}}


def test_family_split_compares_the_fastest_of_each_side_and_skips_failed_configs():
    split = load_probe("family_split").split_workload
    workload = {
        "name": "w",
        "tried": [
            _tried("a_swap", 1.2, True),
            _tried("b_swap", 0.9, True, status="compile_error"),  # failed: not a measurement
            _tried("c", 1.5, False),
            _tried("d", 1.8, False),
            _tried("e_swap", None, True),  # no time: not measured
        ],
    }
    row = split(workload, "swap_ab")
    assert row["measured"] == 3
    assert row["with"] == {"measured": 1, "best": "a_swap", "best_ms": 1.2}
    assert row["without"] == {"measured": 2, "best": "c", "best_ms": 1.5}
    assert row["without_over_with"] == pytest.approx(1.25)
    one_sided = split({"name": "v", "tried": [_tried("c", 1.5, False)]}, "swap_ab")
    assert one_sided["with"]["best"] is None and "without_over_with" not in one_sided


def test_export_compile_check_without_cutlass_is_refused_by_name(tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "CUTLASS_DIR"}
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "export_grouped_compile_check.py"),
                        "--runs", str(RECORD), "--out", str(tmp_path / "out.json")],
                       capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert r.returncode == 1 and "--cutlass-dir (or CUTLASS_DIR)" in r.stderr, r.stderr
    assert not (tmp_path / "out.json").exists()

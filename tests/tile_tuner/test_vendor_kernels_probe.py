"""benchmarks/vendor_kernels_probe.py reads group shapes from a tuner run document (no GPU needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_probe():
    path = ROOT / "benchmarks" / "vendor_kernels_probe.py"
    spec = importlib.util.spec_from_file_location("vendor_kernels_probe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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

"""benchmarks/summary_from_run.py: a device call's summary rebuilt from its run document and driver log
gives the verdict's tables exactly as the driver computes them, and refuses logs it cannot read."""

from __future__ import annotations

import json

import pytest

from tests.support import REPO
from tests.support.benchmark_scripts import load_benchmark_script

RESULTS = REPO / "benchmarks" / "results"


def test_rebuilding_a_recorded_call_gives_the_drivers_tables() -> None:
    script = load_benchmark_script("summary_from_run")
    driver = load_benchmark_script("confirm_h200")
    runs = json.loads((RESULTS / "kinds_t10_h100_grouped_run_kinds.json").read_text())
    recorded = json.loads((RESULTS / "kinds_t10_h100_grouped_summary.json").read_text())
    phases = script.driver_phases((RESULTS / "kinds_t10_h100_grouped_driver.log").read_text())
    rebuilt = script.rebuild(runs, phases, recorded["versions"], recorded["command"], recorded["wall_s"])
    # the driver's own summary of that call (it came back): same tables, same confirmation cost
    assert rebuilt["phases"]["grouped_gemm"]["table"] == recorded["phases"]["grouped_gemm"]["table"]
    assert rebuilt["phases"]["grouped_gemm"]["table"] == driver.table(runs["grouped_gemm"])
    assert rebuilt["confirmation_cost"] == recorded["confirmation_cost"]
    assert "rebuilt" in rebuilt["reconstructed"] and "H100" in rebuilt["what"]


def test_a_log_without_the_phases_or_a_run_without_its_phase_is_refused() -> None:
    script = load_benchmark_script("summary_from_run")
    with pytest.raises(ValueError, match="no phases JSON"):
        script.driver_phases('{"grouped_gemm": {"programs": 48}}\n')
    with pytest.raises(ValueError, match="moe_gemm"):
        script.rebuild({"moe_gemm": {"workloads": []}}, {"plan": {}}, {}, "cmd", 1.0)

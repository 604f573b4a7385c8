"""The recorded compile outcomes of the configs the sm90 model rejects agree with the model.

tests/data/records/hw_models_sm90_rejected_compile.json (a copy of the record
benchmarks/hw_models_sm90_rejected_compile.py wrote; provenance in tests/data/README.md) holds real
nvcc 13.0 builds of the validation set's rejected entries through the project's GEMM template.  These tests tie that record to the current
model: same configs, same rules, and an observed outcome that is consistent with each rule's reason
(compile error, spills, or - for a config that compiles cleanly - a measured run-time failure on record).
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import yaml

from kernelpilot.dsl_plugins.cuda.gemm import render_source
from kernelpilot.hw_models.sm90.gemm import MAX_ACC_REGISTERS
from kernelpilot.targets import get_target_model
from tests.support import REPO

ROOT = REPO
RECORD = ROOT / "tests" / "data" / "records" / "hw_models_sm90_rejected_compile.json"


def _record() -> dict:
    return json.loads(RECORD.read_text())


def _script():
    path = ROOT / "benchmarks" / "hw_models_sm90_rejected_compile.py"
    spec = importlib.util.spec_from_file_location("hw_models_sm90_rejected_compile", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_record_has_provenance() -> None:
    doc = _record()
    assert doc["date"] and "13.0" in doc["nvcc"] and "cutlass" in doc["cutlass"].lower()
    assert doc["command"].startswith("python benchmarks/hw_models_sm90_rejected_compile.py")
    assert "flock /tmp/kp-nvcc.lock" in doc["nvcc_command"] and "-Xptxas=-v" in doc["nvcc_command"]
    assert "sm_90a" in doc["nvcc_command"]


def test_record_covers_the_rejected_validation_set_with_the_current_rules() -> None:
    doc = _record()
    validation = yaml.safe_load((ROOT / "benchmarks" / "sm90_model_validation_configs.yaml").read_text())
    rejected = {e["label"]: e for e in validation["rejected"]}
    rows = doc["results"]
    assert len(rows) >= 8 and len({r["label"] for r in rows}) == len(rows)
    assert {r["label"] for r in rows} == set(rejected)
    sm90 = get_target_model("sm90")
    for row in rows:
        cfg = sm90.parse_config(row["config"])
        assert cfg.as_dict() == sm90.parse_config(rejected[row["label"]]["config"]).as_dict()
        res = sm90.check(cfg, validation["problem"])
        assert not res.valid and not row["model_valid"]
        assert sorted(set(res.rules())) == row["model_rules"], row["label"]


def test_observed_outcomes_are_consistent_with_the_rules() -> None:
    expected_class = _script().expected_class
    rows = _record()["results"]
    classes = set()
    for row in rows:
        label = row["label"]
        classes.add(row["observed_class"])
        assert row["observed_class"] == expected_class(row["model_rules"], row["config"]["schedule"]), label
        assert row["agrees_with_model"], label
        if row["observed_class"] == "compile_error":
            assert not row["compiled"] and row["nvcc_exit_code"] != 0
            assert any("static assert" in e for e in row["errors"]), (label, row["errors"])
        else:
            assert row["compiled"] and row["registers"] and row["stack_frame_bytes"] is not None
        if "sm90.acc_registers" in row["model_rules"]:
            # the rule's reason is "spills": ptxas must report them (else the model is wrong)
            assert row["model_acc_registers_per_thread"] > MAX_ACC_REGISTERS
            assert row["spill_store_bytes"] > 0 and row["spill_load_bytes"] > 0, label
        if row["observed_class"] == "compiles_cleanly":
            # a rejection the compiler cannot confirm must rest on a measured GPU run
            assert row["reference_gpu_run"], label
    assert {"compile_error", "compiles_with_spills", "compiles_cleanly"} == classes


def test_explicit_epilogues_render_the_requested_schedule() -> None:
    """tma_coop / tma_ws force the epilogue schedule (for building the mismatched pairings); tma keeps
    pairing it with the mainloop, so the sources of existing configs do not change."""
    sm90 = get_target_model("sm90")
    pp_coop = sm90.parse_config({"tile": [128, 128, 64], "schedule": "pingpong", "epilogue": "tma_coop"})
    src = render_source(pp_coop.as_dict(), "bf16", "rr")
    assert "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;" in src
    assert "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;" in src
    coop_ws = sm90.parse_config({"tile": [128, 128, 64], "schedule": "cooperative", "epilogue": "tma_ws"})
    src = render_source(coop_ws.as_dict(), "bf16", "rr")
    assert "using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecialized;" in src
    for schedule, epi in (
        ("cooperative", "TmaWarpSpecializedCooperative;"),
        ("pingpong", "TmaWarpSpecialized;"),
    ):
        cfg = sm90.parse_config({"tile": [128, 128, 64], "schedule": schedule})
        assert f"using EpilogueSchedule = cutlass::epilogue::{epi}" in render_source(
            cfg.as_dict(), "bf16", "rr"
        )
    with pytest.raises(ValueError, match="tma_coop"):
        render_source({"tile": [128, 128, 64], "epilogue": "bogus"}, "bf16", "rr")

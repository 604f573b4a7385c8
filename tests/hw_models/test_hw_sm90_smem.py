"""The sm90 model's shared-memory layout against what the H200 programs reported.

tests/data/records/gemm_h200_verified_configs.json records, per config built and run on the H200,
``sizeof(GemmKernel::SharedStorage)`` and ``DispatchPolicy::Stages`` as the program printed them.  The
old estimate was 784-928 B low on every cooperative and ping-pong kernel: it ignored that the kernel's
``tensors`` member inherits the epilogue buffer's 512-byte swizzle alignment (so the barriers in front of
it cost a whole 512-byte block) and that the epilogue's empty fusion storage pads its buffer by another.
"""

from __future__ import annotations

import json

from kernelpilot.hw_models.sm90.gemm import (
    SMEM_CAPACITY,
    auto_stages,
    epilogue_layout,
    epilogue_smem_bytes,
    smem_bytes,
    swizzle_alignment,
)
from kernelpilot.targets import get_target_model
from tests.support import REPO

ROOT = REPO


def _measured() -> list[dict]:
    doc = json.loads((ROOT / "tests" / "data" / "records" / "gemm_h200_verified_configs.json").read_text())
    return [r for r in doc["configs"] if r.get("measured_smem_bytes") is not None]


def test_smem_and_stages_match_every_h200_measurement() -> None:
    sm90 = get_target_model("sm90")
    rows = _measured()
    assert len(rows) >= 30
    schedules, epilogues = set(), set()
    for row in rows:
        cfg = sm90.parse_config(row["config"])
        assert smem_bytes(cfg) == row["measured_smem_bytes"], (row["label"], smem_bytes(cfg))
        assert auto_stages(cfg) == row["measured_stages"], row["label"]
        assert smem_bytes(cfg) <= SMEM_CAPACITY
        schedules.add(cfg.schedule)
        epilogues.add(cfg.epilogue)
    # the evidence spans both persistent schedules and both epilogue kinds
    assert {"cooperative", "pingpong"} <= schedules and {"tma", "nosmem"} <= epilogues


def test_epilogue_storage_follows_the_swizzle_alignment() -> None:
    """bf16 D rows of EpilogueTileAuto are 32 elements = 64 B: the SW64 atom, 512-byte alignment
    (layout.hpp alignment_for_swizzle); 128 B rows get SW128 (1024), 16 B rows the interleaved atom."""
    assert [swizzle_alignment(b) for b in (128, 256, 64, 32, 16)] == [1024, 1024, 512, 256, 128]
    sm90 = get_target_model("sm90")
    coop = sm90.parse_config({"tile": [128, 128, 64], "schedule": "cooperative"})
    pp = sm90.parse_config({"tile": [128, 128, 64], "schedule": "pingpong"})
    nosmem = sm90.parse_config({"tile": [128, 128, 64], "schedule": "cooperative", "epilogue": "nosmem"})
    # coop: 2 D stages of 128x32 bf16 = 16384 B, + 1 byte of fusion storage -> padded to 512
    assert epilogue_layout(coop) == (16384 + 512, 512, 4 * 16)
    # pingpong: 2 D stages of 64x32 bf16 = 8192 B
    assert epilogue_layout(pp)[0] == 8192 + 512
    assert epilogue_smem_bytes(nosmem) < 128
    # every byte of the kernel's storage is a multiple of the tensors' alignment (TMA epilogue)
    assert smem_bytes(coop) % 512 == 0 and smem_bytes(pp) % 512 == 0


def test_fixed_stage_capacity_uses_the_exact_layout() -> None:
    """A fixed stage count is legal exactly when sizeof(SharedStorage) fits: the largest count the rule
    accepts fits, one more does not."""
    sm90 = get_target_model("sm90")
    for raw in (
        {"tile": [128, 128, 64], "schedule": "cooperative"},
        {"tile": [64, 64, 64], "schedule": "pingpong"},
        {"tile": [128, 256, 64], "schedule": "cooperative", "epilogue": "nosmem"},
    ):
        ok = [s for s in range(2, 20) if sm90.check(sm90.parse_config({**raw, "stages": s})).valid]
        assert ok, raw
        top = max(ok)
        assert smem_bytes(sm90.parse_config({**raw, "stages": top})) <= SMEM_CAPACITY
        assert smem_bytes(sm90.parse_config({**raw, "stages": top + 1})) > SMEM_CAPACITY
        # CUTLASS's own auto count never exceeds what fits
        assert auto_stages(sm90.parse_config(raw)) <= top


def test_stage_discriminators_were_built() -> None:
    """Two tiles where the exact epilogue storage changes CUTLASS's auto stage count (the old estimate
    said 15 and 37) were compiled with nvcc: CUTLASS chose 14 and 36, as the model now predicts."""
    doc = json.loads((ROOT / "tests" / "data" / "records" / "hw_models_sm90_compile_check.json").read_text())
    built = {r["label"]: r for r in doc["results"]}
    sm90 = get_target_model("sm90")
    for label, stages in (("128x96x32_c1x1_coop", 14), ("64x32x32_c1x1_pp", 36)):
        row = built[label]
        assert row["compiled"] and row["ptxas_spill_bytes"] == 0
        assert row["cutlass_stages"] == stages == auto_stages(sm90.parse_config(row["config"]))


def _kinds_programs() -> list[tuple[str, dict]]:
    """(kind, config record) of every program E ran on the H200 that reported its shared storage."""
    doc = json.loads((ROOT / "tests" / "data" / "records" / "cuda_kinds_h200.json").read_text())
    out = []
    for kind, workloads in doc["results"].items():
        for w in workloads.values():
            out += [(kind, c) for c in w["configs"] if c.get("smem_bytes") is not None]
    return out


def test_ptr_array_smem_and_stages_match_the_h200_programs() -> None:
    """Grouped / MoE kernels: tensors, pipelines (+ the group scheduler's), 8 scheduler responses and the
    A/B/C/2xD TMA descriptors (sm90_gemm_array_tma_warpspecialized_cooperative.hpp:178-207)."""
    sm90 = get_target_model("sm90")
    rows = [(k, c) for k, c in _kinds_programs() if k in ("grouped_gemm", "moe_gemm")]
    assert len(rows) >= 10
    epilogues = set()
    for kind, c in rows:
        cfg = sm90.parse_config({**c["config"], "kernel": kind})
        assert smem_bytes(cfg) == c["smem_bytes"], (kind, c["label"], smem_bytes(cfg))
        assert auto_stages(cfg) == c["stages"], (kind, c["label"])
        epilogues.add(cfg.effective_epilogue())
    assert epilogues == {"tma_coop", "tma_ws", "nosmem"}


def test_fmha_smem_matches_the_h200_programs() -> None:
    """Hopper FMHA: coop (union of mainloop and 2 epilogue buffers), pingpong (both, persistent) and the
    non-warp-specialized tma kernel (4 K/V stages)."""
    sm90 = get_target_model("sm90")
    rows = [(k, c) for k, c in _kinds_programs() if k in ("fa_prefill", "fa_decode")]
    assert len(rows) >= 10
    schedules = set()
    for kind, c in rows:
        cfg = sm90.parse_config({**c["config"], "kernel": kind})
        assert cfg.smem_bytes() == c["smem_bytes"], (kind, c["label"], cfg.smem_bytes())
        schedules.add(cfg.schedule)
    assert schedules == {"tma", "cooperative", "pingpong"}

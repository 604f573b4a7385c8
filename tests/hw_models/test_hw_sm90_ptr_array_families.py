"""The 192-wide tile family of the sm90 ptr-array (grouped / MoE) GEMM space: legality, enumeration,
rendering and cost ranking, on the CPU (no compiler, no GPU).

Why the family exists: a grouped problem's N is fixed by the model, and several public models' N
(gpt-oss-20b gate/up 5760 = 30 x 192 = 22.5 x 256, Phi-3-medium qkv 7680 = 40 x 192) are covered by
192-wide tiles with fewer ragged columns than by 256-wide ones.  64x192x16 is a native WGMMA shape
(CUTLASS v4.2.0 include/cute/arch/mma_sm90.hpp:1352); what CUTLASS refuses or runs badly is refused
by the same rules as every other tile, which these tests pin.
"""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel
from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel
from kernelpilot.hw_models.sm90.gemm import SMEM_CAPACITY, auto_stages, smem_bytes
from kernelpilot.targets import get_target_model

PTR_ARRAY = ("grouped_gemm", "moe_gemm")
# the 192-wide configs the rules leave: 128-row cooperative and 64-row ping-pong (96 accumulator
# registers per MMA thread), K of 4 or 8 WGMMA steps, the four enumerated cluster shapes
CLUSTERS = ((1, 1), (2, 1), (1, 2), (2, 2))
# 256x192x128 needs 112 KB a stage: two stages and the epilogue do not fit in 227 KB (sm90.smem_capacity)
EXPECTED_192 = {
    f"{tm}x192x{tk}_c{cm}x{cn}_{sched}"
    for tm, sched in ((128, "coop"), (64, "pp"), (128, "pp"))
    for tk in (64, 128)
    for cm, cn in CLUSTERS
} | {f"256x192x64_c{cm}x{cn}_coop" for cm, cn in CLUSTERS}


def _cfg(kernel: str, tile: list[int], schedule: str, cluster: tuple[int, int] = (1, 1)):
    sm90 = get_target_model("sm90")
    return sm90.parse_config({"kernel": kernel, "tile": tile, "cluster": list(cluster), "schedule": schedule})


@pytest.mark.parametrize("kernel", PTR_ARRAY)
def test_192_wide_tiles_follow_the_schedule_and_register_rules(kernel: str) -> None:
    sm90 = get_target_model("sm90")
    for tile, schedule in (([128, 192, 64], "cooperative"), ([64, 192, 64], "pingpong")):
        res = sm90.check(_cfg(kernel, tile, schedule, (2, 1)))
        assert res.valid, (tile, schedule, res.rules())
    # cooperative splits the tile's rows over two warpgroups of 64 (cooperative.hpp:427 static_assert)
    res = sm90.check(_cfg(kernel, [64, 192, 64], "cooperative"))
    assert "sm90.coop_tile_m" in res.rules()
    # 192 fp32 accumulator registers per thread (one ping-pong warpgroup holds 128x192, two cooperative
    # ones 256x192) compile without spills; 224 and 256 spill
    for tile, schedule in (([128, 192, 64], "pingpong"), ([256, 192, 64], "cooperative")):
        res = sm90.check(_cfg(kernel, tile, schedule))
        assert res.valid, (tile, schedule, res.rules())
    for tile, schedule in (([256, 224, 64], "cooperative"), ([128, 256, 64], "pingpong")):
        res = sm90.check(_cfg(kernel, tile, schedule))
        assert not res.valid and "sm90.acc_registers" in res.rules(), (tile, schedule, res.rules())
    # 128x192x64: five stages of 40 KB fit next to the ptr-array epilogue; the layout stays in 227 KB
    coop = _cfg(kernel, [128, 192, 64], "cooperative")
    assert auto_stages(coop) == 5 and smem_bytes(coop) <= SMEM_CAPACITY


def test_ptr_array_space_enumerates_exactly_the_legal_192_family_and_dense_gemm_none() -> None:
    sm90 = get_target_model("sm90")
    problems = {
        "grouped_gemm": GroupedGemmKernel().validate_problem(
            {"groups": [[512, 5760, 2880], [64, 5760, 2880]]}, "bf16", "w"
        ),
        "moe_gemm": MoeGemmKernel().validate_problem(
            {"tokens": 1024, "experts": 8, "top_k": 2, "N": 5760, "K": 2880, "proj": "gate_up"}, "bf16", "w"
        ),
    }
    for kernel, problem in problems.items():
        space = list(sm90.enumerate(kernel, "bf16", problem))
        wide = {c.label() for c in space if c.tile[1] == 192 and c.launch == "grouped"}
        assert wide == EXPECTED_192, sorted(wide ^ EXPECTED_192)
        assert all(sm90.check(c, problem).valid for c in space)
        # the families the ptr-array kernels had before are all still there
        assert any(c.schedule == "pingpong" and c.tile[0] == 64 for c in space)
        assert any(c.cluster == (2, 1) for c in space)
    dense = sm90.enumerate("gemm", "bf16", {"M": 4096, "N": 5760, "K": 2880})
    assert not any(c.tile[1] == 192 for c in dense)


@pytest.mark.parametrize("kernel_cls", [GroupedGemmKernel, MoeGemmKernel])
def test_192_wide_configs_render_their_tile(kernel_cls) -> None:
    kernel = kernel_cls()
    dims = (
        {"groups": [[100, 5760, 64], [300, 5760, 64]]}
        if kernel.kind == "grouped_gemm"
        else {"tokens": 256, "experts": 4, "top_k": 2, "N": 5760, "K": 2880, "proj": "gate_up"}
    )
    problem = kernel.validate_problem(dims, "bf16", "w")
    for tile, schedule, mainloop in (
        ([128, 192, 64], "cooperative", "KernelPtrArrayTmaWarpSpecializedCooperative"),
        ([64, 192, 128], "pingpong", "KernelPtrArrayTmaWarpSpecializedPingpong"),
    ):
        cfg = _cfg(kernel.kind, tile, schedule, (1, 2))
        src = next(iter(kernel.render(cfg, problem, "sm90").sources.values()))
        assert f"constexpr int kTileM = {tile[0]}, kTileN = 192, kTileK = {tile[2]};" in src
        assert "constexpr int kClusterM = 1, kClusterN = 2;" in src
        assert f"using KernelSchedule = cutlass::gemm::{mainloop};" in src


def test_cost_model_prefers_192_where_it_fits_n_and_256_where_256_does() -> None:
    """gpt-oss-20b's gate/up N = 5760 is 30 columns of 192 but 22.5 of 256; with a 1x2 cluster (A
    multicast to two CTAs side by side along N) the 256-wide grid rounds up to 24 columns, one and a
    half of them empty in every group, while 30 columns pair exactly: the model's best is
    128x192x64 c1x2.  Without a cluster the 192-wide tile's lower operand reuse (it is feed-bound in the
    model) outweighs the half column, and 256 stays ahead.  Llama-3-8B's MLP N = 14336 is exactly 56
    columns of 256, where 192 does not rank first at all."""
    sm90 = get_target_model("sm90")
    moe = MoeGemmKernel().validate_problem(
        {
            "tokens": 4096,
            "experts": 32,
            "top_k": 4,
            "N": 5760,
            "K": 2880,
            "proj": "gate_up",
            "routing": "skewed",
        },
        "bf16",
        "w",
    )
    llama = GroupedGemmKernel().validate_problem(
        {"G": 8, "M": [256, 2048], "N": 14336, "K": 4096, "seed": 1}, "bf16", "w"
    )
    for kernel, problem, best_n in (("moe_gemm", moe, 192), ("grouped_gemm", llama, 256)):
        # the unswapped configs (the swap-AB family is ranked in test_hw_sm90_swap_grouped.py)
        unswapped = [c for c in sm90.enumerate(kernel, "bf16", problem) if not c.swap_ab]
        ranked = sorted(unswapped, key=lambda c: sm90.estimate_time_s(c, problem))
        assert ranked[0].tile[1] == best_n, [c.label() for c in ranked[:5]]

    def est(tile: list[int], cluster: tuple[int, int]) -> float:
        return sm90.estimate_time_s(_cfg("moe_gemm", tile, "cooperative", cluster), moe)

    assert est([128, 192, 64], (1, 2)) < 0.95 * est([128, 256, 64], (1, 2))
    assert est([128, 256, 64], (1, 1)) < est([128, 192, 64], (1, 1))

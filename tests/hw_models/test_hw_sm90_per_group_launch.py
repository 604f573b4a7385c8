"""The per-group launch family of the grouped / MoE kinds (``launch: per_group``): the dense sm90 GEMM
kernel of a config launched once per group, as a ``torch.mm`` loop launches cuBLAS.

Pinned here: the rules (grouped / MoE kinds only; the dense kernel's schedules and stream-K, none of the
ptr-array restrictions or its shared-memory carve-out), enumeration and neighbours, the cost model (the
sum of the dense estimates of the groups), and the rendered program (the dense kernel types, one launch
per group with the stream-K workspace reset), with grouped configs rendering as before.
"""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.grouped_gemm import normalize_gemm_config
from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.cost import SM90_SERIAL_LAUNCH_RAMP_S, sm90_time_s
from kernelpilot.hw_models.sm90.gemm import auto_stages
from kernelpilot.targets import get_target_model

SM90 = get_target_model("sm90")
H200 = get_device("h200")
# Mixtral-8x7B down projection: 8 experts of about 1024 tokens, K = 14336
FEW_LARGE = {"groups": [[m, 4096, 14336] for m in (1035, 1044, 1011, 1011, 1021, 1034, 1000, 1036)]}
MANY_SMALL = {"groups": [[250, 1536, 2048]] * 128}


def cfg(kernel="grouped_gemm", **extra):
    return SM90.parse_config({"kernel": kernel, "tile": [128, 256, 64], "schedule": "cooperative", **extra})


def test_per_group_is_written_only_when_set_and_labelled():
    pg = cfg(launch="per_group", tile_scheduler="streamk")
    assert pg.as_dict()["launch"] == "per_group" and pg.label() == "128x256x64_c1x1_coop_streamk_pergroup"
    assert "launch" not in cfg().as_dict() and not pg.ptr_array and cfg().ptr_array
    with pytest.raises(Exception, match="launch"):
        cfg(launch="sometimes")


def test_rules_are_the_dense_kernels_for_per_group_launches():
    # a plain GEMM has one group: nothing to launch per group
    assert "sm90.launch" in SM90.check(cfg(kernel="gemm", launch="per_group")).rules()
    # stream-K: refused for the group scheduler, legal for the dense kernel (cooperative only)
    assert "sm90.streamk_schedule" in SM90.check(cfg(tile_scheduler="streamk")).rules()
    assert not SM90.check(cfg(launch="per_group", tile_scheduler="streamk"), FEW_LARGE).rules()
    pp = SM90.parse_config({"kernel": "grouped_gemm", "tile": [128, 128, 64], "schedule": "pingpong",
                            "tile_scheduler": "streamk", "launch": "per_group"})  # fmt: skip
    assert "sm90.streamk_schedule" in SM90.check(pp).rules()
    # the non-persistent ws schedule has no ptr-array kernel, but the dense kernel has one
    ws = {"kernel": "grouped_gemm", "tile": [128, 128, 64], "schedule": "ws"}
    assert "sm90.grouped_schedule" in SM90.check(SM90.parse_config(ws)).rules()
    assert "sm90.grouped_schedule" not in SM90.check(SM90.parse_config({**ws, "launch": "per_group"})).rules()
    # no ptr-array carve-out (tensormaps, scheduler responses): at least as many mainloop stages
    assert auto_stages(cfg(launch="per_group")) >= auto_stages(cfg())


def test_enumeration_offers_the_family_for_grouped_kinds_only_and_only_legal_configs():
    space = list(SM90.enumerate("grouped_gemm", "bf16", FEW_LARGE))
    per_group = [c for c in space if c.launch == "per_group"]
    assert per_group and all(SM90.check(c, FEW_LARGE).valid for c in per_group)
    assert {c.tile_scheduler for c in per_group} == {"persistent", "streamk"}
    assert all(c.tile[0] >= 128 and c.schedule in ("cooperative", "pingpong") for c in per_group)
    # the widest tiles the accumulator limit admits: 256x192 cooperative (incl. stream-K), 128x192 ping-pong
    wide = {(c.tile[0], c.schedule, c.tile_scheduler) for c in per_group if c.tile[1] == 192}
    assert {
        (256, "cooperative", "streamk"),
        (256, "cooperative", "persistent"),
        (128, "pingpong", "persistent"),
    } <= wide
    dense = list(SM90.enumerate("gemm", "bf16", {"M": 4096, "N": 4096, "K": 4096}))
    assert not any(c.launch == "per_group" for c in dense)


def test_neighbours_switch_the_launch_of_the_same_tile():
    near = SM90.neighbours(cfg())
    assert cfg(launch="per_group") in near and cfg(launch="per_group", tile_scheduler="streamk") in near
    back = SM90.neighbours(cfg(launch="per_group", tile_scheduler="streamk"))
    assert cfg() in back


def test_cost_is_the_sum_of_the_dense_estimates_plus_a_ramp_per_launch_and_launches_hurt_many_small_groups():
    pg = cfg(launch="per_group", tile_scheduler="streamk")
    dense = SM90.parse_config({"kernel": "gemm", "tile": [128, 256, 64], "schedule": "cooperative",
                               "tile_scheduler": "streamk"})  # fmt: skip
    expected = sum(
        sm90_time_s(dense, {"M": m, "N": n, "K": k}, H200) + SM90_SERIAL_LAUNCH_RAMP_S
        for m, n, k in FEW_LARGE["groups"]
    )
    assert SM90.estimate_time_s(pg, FEW_LARGE) == pytest.approx(expected)
    # back to back on one stream each launch drains before the next fills: the two-stream twin, which
    # overlaps them, is estimated faster by about that ramp per group
    two = SM90.estimate_time_s(cfg(launch="per_group", tile_scheduler="streamk", streams=2), FEW_LARGE)
    assert (
        SM90.estimate_time_s(pg, FEW_LARGE) - two > 0.5 * len(FEW_LARGE["groups"]) * SM90_SERIAL_LAUNCH_RAMP_S
    )
    # per-group launches pay a launch and a partial wave per group: 128 small groups far more than 8 large
    few = SM90.estimate_time_s(pg, FEW_LARGE) / SM90.estimate_time_s(cfg(), FEW_LARGE)
    many = SM90.estimate_time_s(pg, MANY_SMALL) / SM90.estimate_time_s(cfg(), MANY_SMALL)
    assert many > 2 * few


def test_program_runs_the_dense_kernel_once_per_group():
    kernel = MoeGemmKernel()
    problem = kernel.validate_problem(
        {"tokens": 4096, "experts": 8, "top_k": 2, "N": 4096, "K": 14336, "proj": "down"}, "bf16", "w"
    )
    src = next(
        iter(
            kernel.render(cfg(launch="per_group", tile_scheduler="streamk"), problem, "sm90").sources.values()
        )
    )
    assert "using KernelSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;" in src
    assert "using TileScheduler = cutlass::gemm::StreamKScheduler;" in src
    assert "using KernelSchedule = cutlass::gemm::KernelPtrArray" not in src
    launch = src[src.index("static void launch(Runner& r)") :]
    launch = launch[: launch.index("\n}\n")]
    assert "for (size_t j = 0; j < r.gemms.size(); ++j)" in launch
    assert "GemmKernel::initialize_workspace" in launch and "r.gemms[j].run(stream)" in launch
    assert "constexpr int kGroupStreams = 1;" in src  # one stream unless the config asks for more
    grouped = next(iter(kernel.render(cfg(), problem, "sm90").sources.values()))
    assert "KernelPtrArrayTmaWarpSpecializedCooperative" in grouped and "launch=per_group" not in grouped


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"tile_scheduler": "streamk"}, "group scheduler"),
        ({"launch": "per_group", "tile_scheduler": "streamk", "schedule": "pingpong"}, "cooperative"),
        ({"launch": "often"}, "allowed"),
    ],
)
def test_program_side_refuses_what_the_model_refuses(raw, words):
    with pytest.raises(ValueError, match=words):
        normalize_gemm_config({"tile": [128, 256, 64], "cluster": [1, 1], **raw})

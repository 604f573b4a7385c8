"""Per-group launches over two streams (``streams: 2``): group j's dense GEMM runs on stream j % 2, so
one group's last partial wave shares the SMs with the next group's first tiles, which a ``torch.mm`` loop
on one stream leaves idle.

Pinned here: the field (written only when set, labelled, parsed with a clear error), the rule (per-group
launches of the grouped / MoE kinds only), enumeration (a two-stream twin of each per-group config where
there are groups to overlap), the cost model (the groups' tiles fill waves together, plus a launch per
group), and the rendered program (round-robin streams, the stream-K workspace reset on the group's own
stream), with one-stream programs rendering a single stream.
"""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel, normalize_gemm_config
from kernelpilot.errors import InputError
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.cost import SM90_KERNEL_LAUNCH_S
from kernelpilot.targets import get_target_model

SM90 = get_target_model("sm90")
H200 = get_device("h200")
# Llama-3-8B MLP up over eight sequences of about 1240 tokens: each group is 10 x 56 tiles of 128x256,
# 4.2 waves on 132 SMs, so every group ends on a partial wave
FEW_LARGE = {"groups": [[m, 14336, 4096] for m in (1240, 1201, 1275, 1232, 1260, 1219, 1243, 1238)]}
ONE_GROUP = {"groups": [[9908, 14336, 4096]]}


def cfg(**extra):
    raw = {"kernel": "grouped_gemm", "tile": [128, 256, 64], "schedule": "cooperative", "launch": "per_group"}
    return SM90.parse_config({**raw, **extra})


def test_streams_are_written_only_when_set_labelled_and_parsed_with_the_allowed_values():
    two = cfg(streams=2)
    assert two.as_dict()["streams"] == 2 and "streams" not in cfg().as_dict()
    assert two.label() == "128x256x64_c1x1_coop_pergroup_2streams"
    assert SM90.parse_config(two.as_dict()) == two
    for bad in (3, 0, "2", True):
        with pytest.raises(InputError, match="streams"):
            cfg(streams=bad)


def test_only_per_group_launches_of_the_grouped_kinds_take_several_streams():
    assert SM90.check(cfg(streams=2), FEW_LARGE).valid
    grouped = SM90.parse_config({"kernel": "grouped_gemm", "tile": [128, 256, 64], "streams": 2})
    assert "sm90.streams" in SM90.check(grouped, FEW_LARGE).rules()
    dense = SM90.parse_config({"kernel": "gemm", "tile": [128, 256, 64], "streams": 2})
    assert "sm90.streams" in SM90.check(dense).rules()
    assert "sm90.streams" not in SM90.check(cfg(), FEW_LARGE).rules()


def test_enumeration_offers_a_two_stream_twin_of_each_per_group_config_where_groups_can_overlap():
    space = list(SM90.enumerate("grouped_gemm", "bf16", FEW_LARGE))
    one = {c.model_copy(update={"streams": 1}) for c in space if c.launch == "per_group" and c.streams == 1}
    two = {c.model_copy(update={"streams": 1}) for c in space if c.streams == 2}
    assert one and one == two
    assert all(c.launch == "per_group" and SM90.check(c, FEW_LARGE).valid for c in space if c.streams == 2)
    # one group has nothing to overlap
    assert not any(c.streams == 2 for c in SM90.enumerate("grouped_gemm", "bf16", ONE_GROUP))


def test_two_streams_fill_the_partial_waves_one_stream_leaves_idle():
    for scheduler in ("persistent", "streamk"):
        one = SM90.estimate_time_s(cfg(tile_scheduler=scheduler), FEW_LARGE)
        two = SM90.estimate_time_s(cfg(tile_scheduler=scheduler, streams=2), FEW_LARGE)
        assert two < one, scheduler
    # persistent: 8 groups of 4.2 waves take 8 x 5 waves on one stream, ceil(33.8) = 34 over two
    one = SM90.estimate_time_s(cfg(), FEW_LARGE)
    two = SM90.estimate_time_s(cfg(streams=2), FEW_LARGE)
    assert two / one == pytest.approx(34 / 40, rel=0.05)
    # and the overlap is the grouped launch's one grid of the same tile, less its ramp, plus the launches
    grouped = SM90.parse_config({"kernel": "grouped_gemm", "tile": [128, 256, 64], "schedule": "cooperative"})
    ramp_and_launches = two - SM90.estimate_time_s(grouped, FEW_LARGE)
    assert ramp_and_launches == pytest.approx(7 * SM90_KERNEL_LAUNCH_S - 10e-6, abs=1e-9)


def test_neighbours_switch_the_streams_and_back_to_the_grouped_launch():
    assert cfg(streams=2) in SM90.neighbours(cfg())
    back = SM90.neighbours(cfg(streams=2))
    assert cfg() in back
    grouped = SM90.parse_config({"kernel": "grouped_gemm", "tile": [128, 256, 64], "schedule": "cooperative"})
    assert grouped in back


def test_program_spreads_the_groups_over_its_streams():
    kernel = GroupedGemmKernel()
    problem = kernel.validate_problem(FEW_LARGE, "bf16", "w")
    src = next(
        iter(kernel.render(cfg(streams=2, tile_scheduler="streamk"), problem, "sm90").sources.values())
    )
    assert "constexpr int kGroupStreams = 2;" in src
    launch = src[src.index("static void launch(Runner& r)") :]
    launch = launch[: launch.index("\n}\n")]
    assert "cudaStream_t stream = group_stream(j);" in launch
    # the stream-K counters are reset on the stream the group's kernel runs on, before it
    assert launch.index("initialize_workspace(") < launch.index("r.gemms[j].run(stream)")
    assert "stream) != cutlass::Status::kSuccess" in launch
    assert "cudaStreamCreate(&s)" in src[src.index("static cudaStream_t group_stream") :]


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"streams": 2}, "needs launch: per_group"),
        ({"launch": "per_group", "streams": 3}, "allowed"),
        ({"launch": "per_group", "streams": "2"}, "allowed"),
    ],
)
def test_program_side_refuses_what_the_model_refuses(raw, words):
    with pytest.raises(ValueError, match=words):
        normalize_gemm_config({"tile": [128, 256, 64], "cluster": [1, 1], **raw})


def test_a_space_filter_no_config_of_the_problem_can_meet_names_the_values_it_can_take():
    from kernelpilot.tile_tuner.space import SearchSpace

    problem = {**FEW_LARGE, "dtype": "bf16"}
    kept = SearchSpace(SM90, "grouped_gemm", "bf16", problem, None, {"streams": [2]})
    assert kept.configs and all(c.streams == 2 for c in kept.configs)
    with pytest.raises(InputError, match=r"streams: \[3\] \(legal here: 1, 2\)") as err:
        SearchSpace(
            SM90, "grouped_gemm", "bf16", problem, None, {"streams": [3]}, source="b.yaml: workload 'up'"
        )
    assert err.value.field == "b.yaml: workload 'up'.space"
    # one group: no two-stream twin exists, so streams: [2] keeps nothing and says only 1 is legal here
    with pytest.raises(InputError, match=r"streams: \[2\] \(legal here: 1\)"):
        SearchSpace(SM90, "grouped_gemm", "bf16", {**ONE_GROUP, "dtype": "bf16"}, None, {"streams": [2]})

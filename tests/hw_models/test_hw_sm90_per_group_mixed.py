"""Per-group launches with mixed token-side widths (``launch: per_group`` with ``swap_ab`` and
``extra_tile_n``): the dense swap-AB kernel is instantiated once per width and each group's launch runs the
width that pads its tokens least.  Normalisation, legality, the rendered program, the cost model and
enumeration on the CPU; one real nvcc build.

Why the family exists: a torch.mm loop launches one cuBLAS kernel per group and fits its tile to that
group's token count (on Mixtral-8x7B's experts: 176-token tiles for the experts of 1034-1044 tokens, 256
for those of 1011-1021); the per-group launch had one width for all groups.  Unlike the ptr-array
launch, which pays a launch per width, a further width costs the per-group launch no launch at all.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.cuda.grouped_gemm import (
    GroupedGemmKernel,
    config_label,
    normalize_gemm_config,
)
from kernelpilot.errors import InputError
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.cost import SM90_SERIAL_LAUNCH_RAMP_S, sm90_time_s
from kernelpilot.hw_models.sm90.token_widths import (
    MIXED_MIN_PADDING_SAVING,
    MIXED_MIN_PADDING_SAVING_PER_GROUP,
    mixed_padded_rows,
    padded_rows,
    width_for_tokens,
    width_sets,
)
from kernelpilot.targets import get_target_model
from tests.support.grouped_programs import compile_for_sm90a, program_width_rule

REPO = Path(__file__).resolve().parents[2]
CUTLASS = REPO / ".deps" / "cutlass"
NVCC = shutil.which("nvcc")

# Mixtral-8x7B down (14336 -> 4096): the expert token counts of benchmarks/cuda_kinds_common.py's workload
MIXTRAL_TOKENS = [1000, 1011, 1011, 1021, 1034, 1035, 1036, 1044]
MIXTRAL = {"groups": [[m, 4096, 14336] for m in MIXTRAL_TOKENS], "dtype": "bf16", "layout": "rc"}
H200 = get_device("h200")


def _cfg(tile, **extra):
    raw = {"kernel": "grouped_gemm", "tile": list(tile), "schedule": "cooperative", "swap_ab": True,
           "launch": "per_group", "tile_scheduler": "streamk"}  # fmt: skip
    return get_target_model("sm90").parse_config({**raw, **extra})


def test_config_normalisation_and_labels() -> None:
    raw = {"tile": [256, 176, 64], "swap_ab": True, "launch": "per_group", "tile_scheduler": "streamk",
           "streams": 2, "extra_tile_n": [128]}  # fmt: skip
    cfg = normalize_gemm_config(raw)
    assert cfg["extra_tile_n"] == [128] and cfg["launch"] == "per_group"
    assert config_label(cfg) == "coop_256x176x64_c1x1_tma_pergroup_streamk_2streams_swap_n128"
    assert _cfg([256, 176, 64], streams=2, extra_tile_n=[128]).label() == (
        "256x176x64_c1x1_coop_streamk_swap_n128_pergroup_2streams"
    )
    # the tokens must run along the tile's N: without swap_ab there are no token-side widths
    with pytest.raises(ValueError, match="swap_ab"):
        normalize_gemm_config({**raw, "swap_ab": False})


def test_per_group_mixed_widths_are_legal_only_with_swap_ab_and_legal_widths() -> None:
    sm90 = get_target_model("sm90")
    assert sm90.check(_cfg([256, 176, 64], extra_tile_n=[128]), MIXTRAL).valid
    unswapped = _cfg([128, 256, 64], swap_ab=False, extra_tile_n=[192])
    res = sm90.check(unswapped, MIXTRAL)
    assert not res.valid and any(
        v.rule == "sm90.extra_tile_n" and "swap_ab=False" in v.message for v in res.violations
    )
    # a 256-wide token side on a 256-row cooperative tile needs 256 accumulators per thread: refused per width
    res = sm90.check(_cfg([256, 176, 64], extra_tile_n=[256]), MIXTRAL)
    assert not res.valid and any("token-side width 256" in v.message for v in res.violations)
    res = sm90.check(_cfg([256, 176, 64], extra_tile_n=[176]), MIXTRAL)  # repeats the tile's N
    assert not res.valid and any("repeat" in v.message for v in res.violations)
    with pytest.raises(InputError, match="extra_tile_n"):
        _cfg([256, 176, 64], extra_tile_n="wide")


def _render(cfg: dict) -> str:
    kernel = GroupedGemmKernel()
    problem = kernel.validate_problem(
        {"groups": [[m, 4096, 1024] for m in (1000, 1044, 481, 0)]}, "bf16", "test"
    )
    return next(iter(kernel.render(cfg, problem, "sm90").sources.values()))


PER_GROUP = {
    "tile": [256, 176, 64],
    "swap_ab": True,
    "launch": "per_group",
    "tile_scheduler": "streamk",
    "streams": 2,
}


def test_the_program_instantiates_the_dense_kernel_once_per_width() -> None:
    source = _render({**PER_GROUP, "extra_tile_n": [128, 144]})
    for i, w in enumerate((176, 128, 144)):
        assert f"namespace kw{i} {{" in source
        assert f"using TileShape = Shape<_256, _{w}, _64>;" in source
        assert f"std::vector<kw{i}::Gemm> gemms{i};" in source
        assert f"kw{i}::group_args(buf, j, knobs, sm_count)" in source  # each width's own arguments
        assert f"r.gemms{i}[i].run(stream)" in source  # launched on the group's stream
    assert "constexpr int kWidths[kNumWidths] = {176, 128, 144};" in source
    # the group's width comes from its token count, which per-group shapes hold first (M, N, K)
    assert "width_class(get<0>(buf.shapes_host[j]))" in source
    # the correctness check adds a ragged group for each width no check group runs with
    assert "check_groups.push_back({t, 136, 264});" in source
    # the swapped dense arguments (D^T = W X^T) in every width
    assert source.count("{int(N), int(M), int(K), 1}") == 3
    single = _render(PER_GROUP)
    assert "namespace kw" not in single and "width_class" not in single
    assert "using TileShape = Shape<_256, _176, _64>;" in single


@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++")
def test_the_program_assigns_groups_to_widths_by_the_models_rule(tmp_path) -> None:
    """The per-group program's ``width_class`` (C++) and the model's :func:`width_for_tokens` put every token
    count from 1 to 2048 on the same width: the cost the model ranks by is that of the launches made."""
    for widths in ([176, 128], [160, 144, 128]):
        source = _render({**PER_GROUP, "tile": [256, widths[0], 64], "extra_tile_n": widths[1:]})
        got = program_width_rule(source, tmp_path)
        assert got == [width_for_tokens(t, tuple(widths)) for t in range(1, 2049)]


def test_one_stream_cost_is_each_groups_dense_launch_at_its_width() -> None:
    mixed = _cfg([256, 176, 64], extra_tile_n=[128])
    expected = 0.0
    for m, n, k in MIXTRAL["groups"]:
        w = width_for_tokens(m, (176, 128))
        dense = mixed.model_copy(
            update={"kernel": "gemm", "launch": "grouped", "tile": (256, w, 64), "extra_tile_n": ()}
        )
        expected += (
            sm90_time_s(dense, {"M": m, "N": n, "K": k, "dtype": "bf16"}, H200) + SM90_SERIAL_LAUNCH_RAMP_S
        )
    assert sm90_time_s(mixed, MIXTRAL, H200) == pytest.approx(expected, rel=1e-12)
    # the experts of 1011-1021 tokens and the one of 1000 run at 128 (1024 rows), the rest at 176 (1056)
    assert {m: width_for_tokens(m, (176, 128)) for m in MIXTRAL_TOKENS} == {
        1000: 128, 1011: 128, 1021: 128, 1034: 176, 1035: 176, 1036: 176, 1044: 176}  # fmt: skip


def test_two_stream_cost_is_each_widths_groups_as_one_grid() -> None:
    mixed = _cfg([256, 176, 64], streams=2, extra_tile_n=[128])
    by_width = {
        176: [g for g in MIXTRAL["groups"] if g[0] >= 1034],
        128: [g for g in MIXTRAL["groups"] if g[0] < 1034],
    }
    expected = sum(
        sm90_time_s(
            mixed.model_copy(update={"tile": (256, w, 64), "extra_tile_n": ()}),
            {"groups": gs, "dtype": "bf16"},
            H200,
        )
        for w, gs in by_width.items()
    )
    assert sm90_time_s(mixed, MIXTRAL, H200) == pytest.approx(expected, rel=1e-12)


def test_the_model_ranks_the_mixed_twin_ahead_where_it_saves_padding() -> None:
    """Mixtral's experts: 176 and 128 compute 1.5 % fewer rows than 176 alone, and the model ranks the twin
    ahead of its single-width config on one stream and on two."""
    assert mixed_padded_rows(MIXTRAL_TOKENS, (176, 128)) < padded_rows(MIXTRAL_TOKENS, 176)
    for streams in (1, 2):
        single = _cfg([256, 176, 64], streams=streams)
        mixed = single.model_copy(update={"extra_tile_n": (128,)})
        assert sm90_time_s(mixed, MIXTRAL, H200) < sm90_time_s(single, MIXTRAL, H200)


def test_the_per_group_launch_takes_any_saving_the_ptr_array_launch_two_percent() -> None:
    menu = (256, 176, 128)
    assert MIXED_MIN_PADDING_SAVING_PER_GROUP < MIXED_MIN_PADDING_SAVING
    saving = 1 - mixed_padded_rows(MIXTRAL_TOKENS, (176, 128)) / padded_rows(MIXTRAL_TOKENS, 176)
    assert 0 < saving < MIXED_MIN_PADDING_SAVING
    assert (176, 128) in width_sets(MIXTRAL_TOKENS, menu, 2, MIXED_MIN_PADDING_SAVING_PER_GROUP)
    assert (176, 128) not in width_sets(MIXTRAL_TOKENS, menu, 2)
    # a set that saves nothing is never a twin, whatever the threshold
    assert width_sets([176, 352], menu, 2, 0.0) == {}


def test_the_default_space_leaves_the_per_group_twins_out_and_neighbours_reach_them() -> None:
    """Measured, the twins closed no gap and the model ranks them first (token_widths.py,
    ENUM_PER_GROUP_MIXED_TWINS): the default space has none; a per-group swap config's neighbours add a
    second width, and a mixed one's neighbours include its single-width twin."""
    sm90 = get_target_model("sm90")
    enumerated = list(sm90.enumerate("grouped_gemm", "bf16", MIXTRAL))
    assert not [c for c in enumerated if c.launch == "per_group" and c.extra_tile_n]
    single = _cfg([256, 176, 64], streams=2)
    widths = {n.extra_tile_n for n in sm90.neighbours(single) if n.extra_tile_n}
    assert widths == {(144,), (160,), (192,), (128,)}  # 176 - 32, 176 - 16, 176 + 16 and 128
    assert all(sm90.check(n, MIXTRAL).valid for n in sm90.neighbours(single) if n.extra_tile_n)
    mixed = single.model_copy(update={"extra_tile_n": (128,)})
    assert single in sm90.neighbours(mixed)


def test_the_space_enumerates_per_group_mixed_twins_on_one_and_two_streams(monkeypatch) -> None:
    monkeypatch.setattr("kernelpilot.hw_models.sm90.model.ENUM_PER_GROUP_MIXED_TWINS", True)
    sm90 = get_target_model("sm90")
    enumerated = list(sm90.enumerate("grouped_gemm", "bf16", MIXTRAL))
    per_group_mixed = [c for c in enumerated if c.launch == "per_group" and c.extra_tile_n]
    assert per_group_mixed and all(c.swap_ab and sm90.check(c, MIXTRAL).valid for c in per_group_mixed)
    assert {c.streams for c in per_group_mixed} == {1, 2}
    # every two-stream twin has its one-stream config in the space
    keys = {c.label() for c in enumerated}
    for c in per_group_mixed:
        if c.streams == 2:
            assert c.model_copy(update={"streams": 1}).label() in keys
    # the 256-row tile's twin: 176 and 128, which the ptr-array launch, needing 2 % fewer rows, is not given
    assert _cfg([256, 176, 64], extra_tile_n=[128]) in per_group_mixed
    assert not [c for c in enumerated if c.launch == "grouped" and c.extra_tile_n and c.tile[0] == 256]
    # the model's fastest config of the space is a per-group mixed twin here
    best = min(enumerated, key=lambda c: sm90.estimate_time_s(c, MIXTRAL))
    assert best.launch == "per_group" and best.extra_tile_n


def test_a_mixed_ptr_array_configs_per_group_neighbour_keeps_its_widths() -> None:
    sm90 = get_target_model("sm90")
    qwen_down = {
        "groups": [[m, 4096, 12288] for m in (179, 204, 270, 404, 481, 514, 649, 671)],
        "dtype": "bf16",
    }
    grouped = sm90.parse_config(
        {"kernel": "grouped_gemm", "tile": [256, 176, 64], "swap_ab": True, "extra_tile_n": [160]}
    )
    per_group = [n for n in sm90.neighbours(grouped) if n.launch == "per_group"]
    assert per_group and all(n.extra_tile_n == (160,) for n in per_group)
    assert {n.tile_scheduler for n in per_group} == {"streamk", "persistent"}
    assert all(sm90.check(n, qwen_down).valid for n in per_group)


@pytest.mark.slow
@pytest.mark.extra_build
@pytest.mark.skipif(
    not (NVCC and (CUTLASS / "cutlass_library" / "source" / "include").exists()),
    reason="needs nvcc and the CUTLASS headers in .deps/cutlass",
)
def test_the_per_group_mixed_width_program_compiles_for_sm90a(tmp_path) -> None:
    """One real build (two dense swap-AB stream-K kernels, about two minutes on two cores): the namespaced
    kernels, the per-width runners and the per-group launches compile against CUTLASS 4.2."""
    compile_for_sm90a(NVCC, _render({**PER_GROUP, "extra_tile_n": [128]}), tmp_path, CUTLASS)

"""Mixed token-side widths of the sm90 swap-AB grouped GEMM (``extra_tile_n``): the width rule, the choice
of widths, legality, enumeration, cost and the rendered program, on the CPU; one real nvcc build.

Why the family exists: one token-side width pads every group to its own multiple of that width.  On
Qwen3-8B's MLP down projection (16 requests of 179-1019 tokens) the best single width computes 11.6 %
more rows than there are tokens, where a per-GEMM vendor kernel fits a tile to each group.
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
from kernelpilot.hw_models.sm90 import cost as cost_model
from kernelpilot.hw_models.sm90.cost import sm90_time_s
from kernelpilot.hw_models.sm90.token_widths import (
    MIXED_MIN_PADDING_SAVING,
    MIXED_MIN_PADDING_SAVING_PER_GROUP,
    MIXED_WIDTH_MENU,
    mixed_padded_rows,
    mixed_token_widths,
    padded_rows,
    width_for_tokens,
    width_sets,
)
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.space import SearchSpace
from tests.support.grouped_programs import compile_for_sm90a, program_width_rule

REPO = Path(__file__).resolve().parents[2]
CUTLASS = REPO / ".deps" / "cutlass"
NVCC = shutil.which("nvcc")

# Qwen3-8B MLP down (12288 -> 4096): the token counts of benchmarks/cuda_kinds_common.py's varlen16 workload
QWEN3_DOWN_TOKENS = [179, 204, 270, 404, 481, 514, 649, 671, 672, 728, 776, 787, 877, 977, 985, 1019]
QWEN3_DOWN = {"groups": [[m, 4096, 12288] for m in QWEN3_DOWN_TOKENS], "dtype": "bf16", "layout": "rc"}


def _cfg(tile, schedule="cooperative", kernel="grouped_gemm", **extra):
    raw = {"kernel": kernel, "tile": list(tile), "schedule": schedule, "swap_ab": True}
    return get_target_model("sm90").parse_config({**raw, **extra})


def test_a_group_runs_with_the_width_that_pads_it_least_ties_to_the_wider() -> None:
    assert width_for_tokens(176, (176, 208)) == 176  # 176 rows against 208
    assert width_for_tokens(200, (176, 208)) == 208  # 208 against 352
    # 144 tokens: 144 rows at 144 or at 288 (2 x 144)... a tie between 144 and 72 goes to the wider
    assert width_for_tokens(144, (144, 72)) == 144
    assert width_for_tokens(1, (144, 160)) == 144  # one token: the narrowest tile pads least
    assert mixed_padded_rows([176, 200], (208, 176)) == 176 + 208


def test_the_widths_chosen_pad_least_and_each_is_used() -> None:
    from itertools import combinations

    single = min(padded_rows(QWEN3_DOWN_TOKENS, w) for w in MIXED_WIDTH_MENU)
    for size in (2, 3):
        widths = mixed_token_widths(QWEN3_DOWN_TOKENS, MIXED_WIDTH_MENU, size)
        assert len(widths) == size and list(widths) == sorted(widths, reverse=True)
        assert mixed_padded_rows(QWEN3_DOWN_TOKENS, widths) <= (1 - MIXED_MIN_PADDING_SAVING) * single
        # every width of the set runs at least one group (a width no group uses would be built for nothing)
        assert {width_for_tokens(t, widths) for t in QWEN3_DOWN_TOKENS} == set(widths)
        # no set of that size pads less (an exhaustive check over the menu)
        best = min(mixed_padded_rows(QWEN3_DOWN_TOKENS, c) for c in combinations(MIXED_WIDTH_MENU, size))
        assert mixed_padded_rows(QWEN3_DOWN_TOKENS, widths) == best
    # three widths pad no more than two
    three = mixed_token_widths(QWEN3_DOWN_TOKENS, MIXED_WIDTH_MENU, 3)
    two = mixed_token_widths(QWEN3_DOWN_TOKENS, MIXED_WIDTH_MENU, 2)
    assert mixed_padded_rows(QWEN3_DOWN_TOKENS, three) <= mixed_padded_rows(QWEN3_DOWN_TOKENS, two)
    # groups one width already fits: no mixed set (the extra launch would buy nothing); nor past the limit
    assert mixed_token_widths([1024] * 8, MIXED_WIDTH_MENU, 2) == ()
    assert mixed_token_widths([], MIXED_WIDTH_MENU, 2) == ()
    assert mixed_token_widths(QWEN3_DOWN_TOKENS, MIXED_WIDTH_MENU, 4) == ()


def test_mixed_widths_are_legal_only_where_every_width_is() -> None:
    sm90 = get_target_model("sm90")
    ok = sm90.check(_cfg([128, 176, 64], extra_tile_n=[160, 144]), QWEN3_DOWN)
    assert ok.valid, ok.rules()
    # 256-row cooperative tiles hold 256 x N / 256 accumulators per thread: 208 is past the 192 limit
    bad = sm90.check(_cfg([256, 176, 64], extra_tile_n=[208]))
    assert "sm90.extra_tile_n" in bad.rules()
    assert any("208" in v.message and "sm90.acc_registers" in v.message for v in bad.violations)
    # a width repeated (or equal to the tile's N) would instantiate the same kernel twice
    assert "sm90.extra_tile_n" in sm90.check(_cfg([128, 176, 64], extra_tile_n=[176])).rules()
    # only the swap-AB grouped launch has token-side widths
    plain = _cfg([128, 176, 64], extra_tile_n=[160]).model_copy(update={"swap_ab": False})
    assert "sm90.extra_tile_n" in sm90.check(plain).rules()
    dense = sm90.parse_config({"kernel": "gemm", "tile": [128, 128, 64], "extra_tile_n": [64]})
    assert "sm90.extra_tile_n" in sm90.check(dense).rules()
    # at most three widths in all: a bad length is an input error naming the field
    with pytest.raises(InputError, match="extra_tile_n"):
        _cfg([128, 176, 64], extra_tile_n=[160, 144, 128])
    with pytest.raises(InputError, match="extra_tile_n"):
        _cfg([128, 176, 64], extra_tile_n="wide")


def test_the_default_space_holds_a_mixed_twin_per_width_count_and_swap_family_row() -> None:
    sm90 = get_target_model("sm90")
    enumerated = list(sm90.enumerate("grouped_gemm", "bf16", QWEN3_DOWN))
    mixed = [c for c in enumerated if c.extra_tile_n]
    assert mixed and all(c.swap_ab for c in mixed)
    assert {c.launch for c in mixed} == {"grouped"}  # per-group twins: test_hw_sm90_per_group_mixed.py
    rows = {
        (c.launch, c.tile[0], c.schedule, c.tile_scheduler, c.cluster, c.streams, len(c.token_widths))
        for c in mixed
    }
    assert len(rows) == len(
        mixed
    )  # one per (launch, tile M, schedule, cluster, streams) and number of widths
    assert {len(c.token_widths) for c in mixed if c.launch == "grouped"} == {2, 3}
    for c in mixed:
        assert sm90.check(c, QWEN3_DOWN).valid
        # its widths are, of the sets of its size that save enough rows with widths legal for its kernel,
        # the one the cost model estimates fastest (on one stream: a two-stream twin keeps its widths)
        one = c.model_copy(update={"streams": 1})
        legal = tuple(
            w for w in MIXED_WIDTH_MENU if sm90.check(c.model_copy(update={"tile": (c.tile[0], w, 64),
                                                                           "extra_tile_n": ()})).valid
        )  # fmt: skip
        saving = MIXED_MIN_PADDING_SAVING_PER_GROUP if c.launch == "per_group" else MIXED_MIN_PADDING_SAVING
        sets = width_sets(QWEN3_DOWN_TOKENS, legal, len(c.token_widths), saving)
        assert c.token_widths in sets

        def estimate(widths, one=one):
            twin = one.model_copy(update={"tile": (one.tile[0], widths[0], 64), "extra_tile_n": widths[1:]})
            return sm90.estimate_time_s(twin, QWEN3_DOWN)

        assert estimate(c.token_widths) == min(estimate(w) for w in sets)
    space = SearchSpace(sm90, "grouped_gemm", "bf16", QWEN3_DOWN)
    # (the space runs a per-group cooperative persistent config as its stream-K twin)
    assert {c.label() for c in mixed if c.launch == "grouped"} <= {c.label() for c in space.configs}
    # uniform groups: no mixed config
    uniform = {"groups": [[1024, 4096, 12288]] * 8, "dtype": "bf16", "layout": "rc"}
    assert not any(c.extra_tile_n for c in sm90.enumerate("grouped_gemm", "bf16", uniform))


def test_the_cost_model_ranks_a_two_width_twin_above_the_single_width_winner_where_padding_dominates() -> (
    None
):
    """Qwen3-8B down: the best single-width config pads 11.6 %; its two-width twin pays one more launch
    tail and is still estimated faster, while no three-width twin is (two more tails)."""
    sm90 = get_target_model("sm90")
    h200 = get_device("h200")
    configs = [c for c in sm90.enumerate("grouped_gemm", "bf16", QWEN3_DOWN) if c.launch == "grouped"]
    ranked = sorted(configs, key=lambda c: sm90_time_s(c, QWEN3_DOWN, h200))
    best_single = next(c for c in ranked if not c.extra_tile_n)
    best_two = next(c for c in ranked if len(c.token_widths) == 2)
    best_three = next(c for c in ranked if len(c.token_widths) == 3)
    assert sm90_time_s(best_two, QWEN3_DOWN, h200) < sm90_time_s(best_single, QWEN3_DOWN, h200)
    assert sm90_time_s(best_three, QWEN3_DOWN, h200) > sm90_time_s(best_two, QWEN3_DOWN, h200)


def test_cost_is_one_launch_per_width_over_its_groups() -> None:
    h200 = get_device("h200")
    mixed = _cfg([128, 208, 64], extra_tile_n=[176])
    groups = [[m, 8192, 8192] for m in (176, 208) * 8]
    problem = {"groups": groups, "dtype": "bf16", "layout": "rc"}
    per_width = sum(
        sm90_time_s(_cfg([128, w, 64]), {"groups": [g for g in groups if g[0] == w], "dtype": "bf16"}, h200)
        for w in (176, 208)
    )
    assert sm90_time_s(mixed, problem, h200) == pytest.approx(per_width)
    # each group exactly fills its tiles with two widths; one width pads half of them to twice their rows
    for width in (176, 208):
        assert sm90_time_s(mixed, problem, h200) < sm90_time_s(_cfg([128, width, 64]), problem, h200)
    # the MoE kernel's experts split the same way
    moe = {"num_experts": 16, "tokens": [176, 208] * 8, "N": 8192, "K": 8192, "dtype": "bf16"}
    moe_mixed = _cfg([128, 208, 64], kernel="moe_gemm", extra_tile_n=[176])
    assert sm90_time_s(moe_mixed, moe, h200) == pytest.approx(per_width)


# Qwen3-30B-A3B MLP down (768 -> 2048), 128 experts: the token counts of benchmarks/cuda_kinds_common.py's
# qwen3_30b_a3b_down workload (uniform top-8 routing of 4096 tokens, seed 0)
QWEN3_30B_DOWN = {
    "num_experts": 128, "N": 2048, "K": 768, "dtype": "bf16",
    "tokens": [257, 259, 280, 277, 229, 244, 238, 264, 259, 271, 272, 250, 261, 246, 246, 246, 234, 228, 289, 251,
               240, 254, 262, 248, 275, 271, 272, 253, 257, 261, 255, 274, 286, 263, 258, 274, 249, 253, 253, 250,
               261, 265, 257, 269, 262, 244, 242, 250, 262, 247, 248, 254, 249, 293, 288, 239, 279, 266, 228, 281,
               229, 247, 248, 263, 242, 261, 238, 264, 249, 238, 260, 278, 269, 274, 241, 289, 264, 280, 240, 241,
               234, 248, 244, 253, 242, 276, 248, 227, 267, 254, 204, 243, 254, 247, 254, 282, 274, 266, 281, 256,
               256, 238, 242, 241, 299, 250, 247, 240, 235, 244, 231, 280, 247, 252, 252, 268, 260, 257, 257, 249,
               248, 244, 268, 257, 254, 268, 264, 258],
}  # fmt: skip


def test_every_ptr_array_launch_pays_its_ramp_and_a_dense_per_group_launch_does_not(monkeypatch) -> None:
    """Splitting one grouped launch in two costs more than the two launches' waves (the mixed-width probe:
    6-19 us per extra launch); the per-group family launches the dense kernel, which pays no ramp."""
    h100 = get_device("h100_sxm")
    groups = [[m, 2048, 768] for m in QWEN3_30B_DOWN["tokens"]]
    whole = {"groups": groups, "dtype": "bf16"}
    halves = [{"groups": groups[:64], "dtype": "bf16"}, {"groups": groups[64:], "dtype": "bf16"}]
    cfg = _cfg([256, 144, 64])
    per_group = _cfg([128, 256, 64], launch="per_group", swap_ab=False)

    def costs() -> tuple[float, float]:
        split = sum(sm90_time_s(cfg, h, h100) for h in halves) - sm90_time_s(cfg, whole, h100)
        return split, sm90_time_s(per_group, whole, h100)

    with_ramp, ramp = costs(), cost_model.SM90_PTR_ARRAY_RAMP_S
    monkeypatch.setattr(cost_model, "SM90_PTR_ARRAY_RAMP_S", 0.0)
    without = costs()
    assert ramp > 0 and with_ramp[0] == pytest.approx(without[0] + ramp)  # the second launch's ramp, once
    assert with_ramp[1] == pytest.approx(without[1])


def test_a_twin_whose_narrow_width_saves_few_rows_ranks_below_its_single_width_config() -> None:
    """Qwen3-30B-A3B down: 256x144 + 128 computes 6.4 % fewer rows than 256x144 alone and measured 1.070x
    its time on an H100 (benchmarks/results/mixed_width_probe_h100_moe.json): one more launch over 128 short
    experts costs more than the rows save.  The model puts it behind its twin, and no mixed config first."""
    h100 = get_device("h100_sxm")
    sm90 = get_target_model("sm90")
    mixed = _cfg([256, 144, 64], kernel="moe_gemm", extra_tile_n=[128])
    twin = _cfg([256, 144, 64], kernel="moe_gemm")
    tokens = QWEN3_30B_DOWN["tokens"]
    assert mixed_padded_rows(tokens, (144, 128)) < 0.94 * padded_rows(tokens, 144)
    assert sm90_time_s(mixed, QWEN3_30B_DOWN, h100) > 1.03 * sm90_time_s(twin, QWEN3_30B_DOWN, h100)
    ranked = sorted(
        sm90.enumerate("moe_gemm", "bf16", QWEN3_30B_DOWN), key=lambda c: sm90_time_s(c, QWEN3_30B_DOWN, h100)
    )
    assert any(c.extra_tile_n for c in ranked) and not ranked[0].extra_tile_n


def test_config_normalisation_and_labels() -> None:
    cfg = normalize_gemm_config({"tile": [128, 176, 64], "swap_ab": True, "extra_tile_n": [160, 144]})
    assert cfg["extra_tile_n"] == [160, 144]
    assert config_label(cfg) == "coop_128x176x64_c1x1_tma_swap_n160+144"
    assert _cfg([128, 176, 64], extra_tile_n=[160, 144]).label() == "128x176x64_c1x1_coop_swap_n160+144"
    assert "extra_tile_n" not in normalize_gemm_config({"tile": [128, 176, 64], "swap_ab": True})
    assert "extra_tile_n" not in _cfg([128, 176, 64]).as_dict()
    for bad, match in (
        ({"extra_tile_n": [160]}, "swap_ab"),
        ({"swap_ab": True, "extra_tile_n": [176]}, "repeats"),
        ({"swap_ab": True, "extra_tile_n": ["x"]}, "list of tile N widths"),
    ):
        with pytest.raises(ValueError, match=match):
            normalize_gemm_config({"tile": [128, 176, 64], **bad})


def _render(cfg: dict) -> str:
    kernel = GroupedGemmKernel()
    problem = kernel.validate_problem(
        {"groups": [[m, 4096, 1024] for m in (179, 481, 728, 0)]}, "bf16", "test"
    )
    return next(iter(kernel.render(cfg, problem, "sm90").sources.values()))


def test_the_program_instantiates_one_kernel_per_width_and_checks_each() -> None:
    source = _render({"tile": [128, 176, 64], "swap_ab": True, "extra_tile_n": [160, 144]})
    for i, w in enumerate((176, 160, 144)):
        assert f"namespace kw{i} {{" in source
        assert f"constexpr int kTileM = 128, kTileN = {w}, kTileK = 64;" in source
        assert f"kw{i}::Gemm gemm{i};" in source and f"r.gemm{i}.run()" in source
    assert "constexpr int kWidths[kNumWidths] = {176, 160, 144};" in source
    assert "static int width_class(int tokens)" in source
    # the correctness check adds a ragged group for each width no check group runs with
    assert "check_groups.push_back({t, 136, 264});" in source
    # the kernel's A is the weight and its B the tokens, per width as in the one-width program
    assert "a.push_back(buf.b[j]);" in source and "b.push_back(buf.a[j]);" in source
    single = _render({"tile": [128, 176, 64], "swap_ab": True})
    assert "namespace kw" not in single and "width_class" not in single


@pytest.mark.slow
@pytest.mark.extra_build
@pytest.mark.skipif(
    not (NVCC and (CUTLASS / "cutlass_library" / "source" / "include").exists()),
    reason="needs nvcc and the CUTLASS headers in .deps/cutlass",
)
def test_the_mixed_width_program_compiles_for_sm90a(tmp_path) -> None:
    """One real build (two swap-AB kernels, about two minutes on two cores): the namespaced kernels, the
    shared group arrays and the per-width launches compile against CUTLASS 4.2."""
    compile_for_sm90a(
        NVCC, _render({"tile": [128, 176, 64], "swap_ab": True, "extra_tile_n": [144]}), tmp_path, CUTLASS
    )


@pytest.mark.skipif(not shutil.which("g++"), reason="needs g++")
def test_the_program_assigns_groups_to_widths_by_the_models_rule(tmp_path) -> None:
    """The program's ``width_class`` (C++) and the model's :func:`width_for_tokens` put every token count
    from 1 to 2048 on the same width, for a two- and a three-width config: the cost the model ranks by is
    that of the launches the program makes."""
    for widths in ([176, 160], [256, 224, 144]):
        source = _render({"tile": [128, widths[0], 64], "swap_ab": True, "extra_tile_n": widths[1:]})
        got = program_width_rule(source, tmp_path)
        assert got == [width_for_tokens(t, tuple(widths)) for t in range(1, 2049)]

"""The swap-AB family of the sm90 ptr-array (grouped / MoE) GEMM: token-side tile widths fitted to the
groups, legality, its place in the default space, cost and rendering, on the CPU (no compiler, no GPU).

Why the family exists: a torch.mm loop launches one cuBLAS kernel per group and fits its token-side tile
to that group (on Mixtral's experts of 1034-1044 tokens, 176-wide tiles: 6 x 176 = 1056 rows), while the
grouped kernel has one tile for every group and, with the tokens along the tile's M, pads a group of
1035 tokens to 1152 or 1280 rows.  Swapping A and B puts the tokens along the tile's N, which WGMMA
takes in steps of 8.
"""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel, normalize_gemm_config
from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.cost import sm90_time_s
from kernelpilot.hw_models.sm90.token_widths import padded_rows, swap_token_tile_ns
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.space import SearchSpace

# Mixtral-8x7B down projection, 4096 tokens routed top-2 over 8 experts (the run's own token counts)
MIXTRAL_TOKENS = [1035, 1044, 1011, 1011, 1021, 1034, 1000, 1036]
MIXTRAL = {"num_experts": 8, "tokens": MIXTRAL_TOKENS, "N": 4096, "K": 14336, "dtype": "bf16", "layout": "rc"}


def _cfg(kernel: str, tile: list[int], schedule: str, cluster=(1, 1), **extra):
    sm90 = get_target_model("sm90")
    raw = {"kernel": kernel, "tile": tile, "cluster": list(cluster), "schedule": schedule, "swap_ab": True}
    return sm90.parse_config({**raw, **extra})


def _two_group_problem(kernel, second_tokens: int) -> dict:
    """A small N=4096, K=1024 problem of the kernel's kind: grouped, 1035 tokens then ``second_tokens``
    (0: an empty group); MoE, 2048 tokens routed top-1 over 2 experts."""
    dims = (
        {"groups": [[1035, 4096, 1024], [second_tokens, 4096, 1024]]}
        if kernel.kind == "grouped_gemm"
        else {"experts": 2, "tokens": 2048, "top_k": 1, "N": 4096, "K": 1024}
    )
    return kernel.validate_problem(dims, "bf16", "test")


def test_token_side_widths_are_the_least_padding_ones_widest_first() -> None:
    # Mixtral: 176 pads every expert to 1056 rows (8448 in all), 208 to 1040 but the 1044-token one to
    # 1248 (8528), 224 to 1120 (8960); 160 also gives 8960 and loses the tie to the wider 224
    assert padded_rows(MIXTRAL_TOKENS, 176) == 8 * 1056
    assert padded_rows(MIXTRAL_TOKENS, 208) == 7 * 1040 + 1248
    assert padded_rows(MIXTRAL_TOKENS, 160) == padded_rows(MIXTRAL_TOKENS, 224) == 8960
    assert swap_token_tile_ns(MIXTRAL, "moe_gemm") == (224, 208, 176)
    # no problem (or only empty groups): no fitted family
    assert swap_token_tile_ns(None, "moe_gemm") == ()
    assert swap_token_tile_ns({**MIXTRAL, "tokens": [0] * 8}, "moe_gemm") == ()


@pytest.mark.parametrize("kernel", ("grouped_gemm", "moe_gemm"))
def test_swap_grouped_configs_follow_the_usual_rules(kernel: str) -> None:
    sm90 = get_target_model("sm90")
    res = sm90.check(_cfg(kernel, [128, 208, 64], "cooperative", (2, 1)))
    assert res.valid, res.rules()
    assert not res.warnings, [w.rule for w in res.warnings]
    # 256x176 cooperative keeps 176 accumulators per thread; 256x208 would need 208 (limit 192)
    assert sm90.check(_cfg(kernel, [256, 176, 64], "cooperative")).valid
    assert "sm90.acc_registers" in sm90.check(_cfg(kernel, [256, 208, 64], "cooperative")).rules()
    # the cooperative schedule still splits the tile's M (now along the weight's N) over two warpgroups
    assert "sm90.coop_tile_m" in sm90.check(_cfg(kernel, [64, 176, 64], "cooperative")).rules()
    # once per group on the dense kernel: the same widths (extended WGMMA shapes), either scheduler of
    # the cooperative schedule, and mixed widths (the dense kernel once per width)
    for ts in ("persistent", "streamk"):
        res = sm90.check(_cfg(kernel, [256, 176, 64], "cooperative", launch="per_group", tile_scheduler=ts))
        assert res.valid, res.rules()
    assert sm90.check(_cfg(kernel, [128, 176, 64], "pingpong", launch="per_group", streams=2)).valid
    res = sm90.check(_cfg(kernel, [128, 176, 64], "pingpong", launch="per_group", tile_scheduler="streamk"))
    assert "sm90.streamk_schedule" in res.rules()
    res = sm90.check(_cfg(kernel, [256, 176, 64], "cooperative", launch="per_group", extra_tile_n=[144]))
    assert res.valid, res.rules()
    # a plain GEMM's swap is still the tiny-M dense one (its own family): no extended shapes there
    assert "sm90.wgmma_n_shape" in sm90.check(_cfg("gemm", [128, 176, 64], "cooperative")).rules()


def test_the_family_is_in_the_default_space_and_a_space_filter_can_leave_it_out() -> None:
    sm90 = get_target_model("sm90")
    enumerated = list(sm90.enumerate("moe_gemm", "bf16", MIXTRAL))
    swapped = [c for c in enumerated if c.swap_ab and not c.extra_tile_n and c.launch == "grouped"]
    assert swapped and {c.tile[1] for c in swapped} == {176, 208, 224}
    assert {c.tile[2] for c in swapped} == {64}
    # the same widths once per group on the dense kernel, each config also on two streams
    per_group = [c for c in enumerated if c.swap_ab and c.launch == "per_group" and not c.extra_tile_n]
    assert {c.tile[1] for c in per_group} == {176, 208, 224} and {c.tile[2] for c in per_group} == {64}
    # their mixed-width twins are not in the default space (tests/hw_models/test_hw_sm90_per_group_mixed.py)
    assert not any(c.launch == "per_group" and c.extra_tile_n for c in enumerated)
    one = {c.model_copy(update={"streams": 1}).label() for c in per_group if c.streams == 2}
    assert one and one == {c.label() for c in per_group if c.streams == 1}
    assert {c.tile_scheduler for c in per_group} == {"persistent", "streamk"}
    default = SearchSpace(sm90, "moe_gemm", "bf16", MIXTRAL)
    assert {c.label() for c in swapped} <= {c.label() for c in default.configs}
    # with the mixed-width twins (extra_tile_n); a persistent per-group config stands in the space as its
    # stream-K twin, so the space holds fewer than the enumeration yields
    every_swap = [c for c in default.configs if c.swap_ab]
    assert any(c.extra_tile_n for c in every_swap) and any(c.launch == "per_group" for c in every_swap)
    unswapped = SearchSpace(sm90, "moe_gemm", "bf16", MIXTRAL, space_filter={"swap_ab": [False]})
    assert len(unswapped) == len(default) - len(every_swap) and not any(c.swap_ab for c in unswapped.configs)
    only = SearchSpace(sm90, "moe_gemm", "bf16", MIXTRAL, space_filter={"swap_ab": [True]})
    assert {c.label() for c in only.configs} == {c.label() for c in every_swap}
    # dense GEMMs keep their own (tiny-M) swap family only
    assert not any(c.swap_ab for c in sm90.enumerate("grouped_gemm", "bf16", None))


def test_cost_of_a_swapped_config_is_that_of_the_transposed_groups() -> None:
    """The swapped kernel runs every group as N x M x K: its estimate is the unswapped config's on the
    transposed groups, so the model sees the token-side padding and nothing else changes."""
    h200 = get_device("h200")
    groups = [[m, 4096, 14336] for m in MIXTRAL_TOKENS]
    problem = {"groups": groups, "dtype": "bf16", "layout": "rc"}
    transposed = {"groups": [[n, m, k] for m, n, k in groups], "dtype": "bf16", "layout": "rc"}
    swapped = _cfg("grouped_gemm", [256, 176, 64], "cooperative")
    plain = swapped.model_copy(update={"swap_ab": False})
    assert sm90_time_s(swapped, problem, h200) == pytest.approx(sm90_time_s(plain, transposed, h200))
    # and the padding shows: 176 token rows per tile beat 192 on these experts (1056 vs 1152 rows each)
    wider = _cfg("grouped_gemm", [256, 192, 64], "cooperative")
    assert sm90_time_s(swapped, problem, h200) < sm90_time_s(wider, problem, h200)


@pytest.mark.parametrize("kernel_cls", (GroupedGemmKernel, MoeGemmKernel))
def test_swapped_program_passes_weights_as_a_and_writes_d_transposed(kernel_cls) -> None:
    kernel = kernel_cls()
    problem = _two_group_problem(kernel, second_tokens=0)
    cfg = {
        "tile": [128, 176, 64],
        "cluster": [2, 1],
        "schedule": "cooperative",
        "epilogue": "tma",
        "swap_ab": True,
    }
    source = next(iter(kernel.render(cfg, problem, "sm90").sources.values()))
    assert "using LayoutD = cutlass::layout::ColumnMajor;" in source
    assert "constexpr int kTileM = 128, kTileN = 176, kTileK = 64;" in source
    assert "UnderlyingShape{g.n, g.m, g.k}" in source and "UnderlyingShape{g.m, g.n, g.k}" not in source
    assert "cudaMemcpy(buf.a_dev, buf.b.data()" in source and "cudaMemcpy(buf.b_dev, buf.a.data()" in source
    # the check kernel still compares D row-major against A row-major times the weight: unchanged
    assert "float(A[size_t(m) * K + k]) * float(B[size_t(n) * K + k])" in source
    # 176 is one of CUTLASS's extended WGMMA N shapes: without them it would compile to 64x16 WGMMAs
    assert "#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED" in source
    assert source.index("#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED") < source.index("#include")
    plain = next(iter(kernel.render({**cfg, "swap_ab": False}, problem, "sm90").sources.values()))
    assert "using LayoutD = cutlass::layout::RowMajor;" in plain and "swap_ab" not in plain
    assert "EXTENDED_MMA_SHAPES" not in plain
    assert "UnderlyingShape{g.m, g.n, g.k}" in plain


def test_swap_config_normalisation_and_label() -> None:
    cfg = normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative", "swap_ab": True})
    assert cfg["swap_ab"] is True
    assert "swap_ab" not in normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative"})
    per_group = normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative", "swap_ab": True,
                                       "launch": "per_group", "tile_scheduler": "streamk"})  # fmt: skip
    assert per_group["swap_ab"] is True and per_group["launch"] == "per_group"
    mixed = normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative", "swap_ab": True,
                                   "launch": "per_group", "extra_tile_n": [144]})  # fmt: skip
    assert mixed["extra_tile_n"] == [144] and mixed["launch"] == "per_group"
    with pytest.raises(ValueError, match="extra_tile_n"):
        normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative", "launch": "per_group",
                               "extra_tile_n": [144]})  # fmt: skip
    with pytest.raises(ValueError, match="true or false"):
        normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative", "swap_ab": "yes"})
    assert _cfg("moe_gemm", [128, 176, 64], "cooperative").label() == "128x176x64_c1x1_coop_swap"


def test_exported_grouped_kernel_launches_the_swapped_problem() -> None:
    """The exported operator's prepare kernel builds the same swapped shapes and pointers as the program."""
    from kernelpilot.dsl_plugins.cuda.gemm import template_env
    from kernelpilot.dsl_plugins.cuda.grouped_gemm import kernel_context

    template = template_env().get_template("export/cuda/grouped_kernel.cu.j2")
    cfg = normalize_gemm_config({"tile": [128, 176, 64], "schedule": "cooperative", "swap_ab": True})
    swapped = template.render(**kernel_context(cfg, "bf16"), name="n", symbol="s", label="l")
    assert "using LayoutD = cutlass::layout::ColumnMajor;" in swapped
    assert "shapes[g] = UnderlyingShape{n, m, k};" in swapped
    assert "pa[g] = b + g * b_group_stride;" in swapped and "pb[g] = a + start * k;" in swapped
    plain = template.render(
        **kernel_context({**cfg, "swap_ab": False}, "bf16"), name="n", symbol="s", label="l"
    )
    assert "shapes[g] = UnderlyingShape{m, n, k};" in plain and "UnderlyingShape{n, m, k}" not in plain


def test_tile_widths_outside_the_default_wgmma_shapes_need_the_extended_set() -> None:
    """Unswapped programs are built without CUTLASS's extended WGMMA shapes: a 208-wide tile there would
    be thirteen N=16 WGMMAs per K step, so the model refuses it; the swap-AB grouped program enables
    the extended shapes and takes it."""
    sm90 = get_target_model("sm90")
    plain = sm90.parse_config({"kernel": "grouped_gemm", "tile": [128, 208, 64], "schedule": "cooperative"})
    res = sm90.check(plain)
    assert "sm90.wgmma_n_shape" in res.rules()
    assert "13 WGMMAs of N=16" in next(v.message for v in res.violations if v.rule == "sm90.wgmma_n_shape")
    assert sm90.check(_cfg("grouped_gemm", [128, 208, 64], "cooperative")).valid
    dense = sm90.parse_config({"kernel": "gemm", "tile": [128, 160, 64], "schedule": "cooperative"})
    assert "sm90.wgmma_n_shape" in sm90.check(dense).rules()
    for n in (256, 192, 128, 96, 64):
        cfg = sm90.parse_config({"kernel": "gemm", "tile": [128, n, 64], "schedule": "cooperative"})
        assert "sm90.wgmma_n_shape" not in sm90.check(cfg).rules()


@pytest.mark.parametrize("kernel_cls", (GroupedGemmKernel, MoeGemmKernel))
def test_per_group_swapped_program_swaps_in_the_dense_arguments_not_in_the_buffers(kernel_cls) -> None:
    """Once per group, the dense kernel computes D^T = W X^T: its arguments carry the swap (an N x M x K
    problem, the weight as operand A), while the buffers, the reference check and the group shapes stay
    the groups' own; swapping both would swap twice."""
    kernel = kernel_cls()
    problem = _two_group_problem(kernel, second_tokens=700)
    cfg = {"tile": [256, 176, 64], "cluster": [1, 1], "schedule": "cooperative", "epilogue": "tma",
           "swap_ab": True, "launch": "per_group", "tile_scheduler": "streamk", "streams": 2}  # fmt: skip
    source = next(iter(kernel.render(cfg, problem, "sm90").sources.values()))
    assert "#define CUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED" in source
    assert "using LayoutD = cutlass::layout::ColumnMajor;" in source
    assert "using TileShape = Shape<_256, _176, _64>;" in source
    assert "{int(N), int(M), int(K), 1}" in source and "{buf.b[j], sa, buf.a[j], sb}" in source
    assert "UnderlyingShape{g.m, g.n, g.k}" in source and "UnderlyingShape{g.n, g.m, g.k}" not in source
    assert "cudaMemcpy(buf.a_dev, buf.a.data()" in source
    assert "float(A[size_t(m) * K + k]) * float(B[size_t(n) * K + k])" in source
    assert "constexpr int kGroupStreams = 2;" in source
    plain = next(iter(kernel.render({**cfg, "swap_ab": False}, problem, "sm90").sources.values()))
    assert "{int(M), int(N), int(K), 1}" in plain and "EXTENDED_MMA_SHAPES" not in plain


def test_per_group_swap_is_ranked_first_on_few_large_experts_and_last_on_many_small_ones() -> None:
    """On Mixtral's 8 experts of ~1030 tokens the dense kernel once per group (two streams) is the
    model's first pick; on 128 experts of ~256 tokens each launch pays its own cost and tail, and the
    ptr-array kernel ranks above every per-group config."""
    sm90 = get_target_model("sm90")
    few = SearchSpace(sm90, "moe_gemm", "bf16", MIXTRAL).ranked()
    assert few[0].swap_ab and few[0].launch == "per_group" and few[0].streams == 2
    many_tokens = [256 + (i * 37) % 64 for i in range(128)]
    many = {"num_experts": 128, "tokens": many_tokens, "N": 1536, "K": 2048, "dtype": "bf16", "layout": "rc"}
    ranked = SearchSpace(sm90, "moe_gemm", "bf16", many).ranked()
    first_per_group = next(i for i, c in enumerate(ranked) if c.launch == "per_group")
    assert first_per_group > 16 and ranked[0].launch == "grouped"


def test_a_mixed_width_config_neighbours_its_per_group_twin_with_its_widths() -> None:
    sm90 = get_target_model("sm90")
    mixed = _cfg("moe_gemm", [256, 176, 64], "cooperative", extra_tile_n=[144])
    twins = [c for c in sm90.neighbours(mixed) if c.launch == "per_group"]
    assert twins and all(c.swap_ab and c.extra_tile_n == (144,) and c.tile == (256, 176, 64) for c in twins)
    assert {c.tile_scheduler for c in twins} == {"persistent", "streamk"}

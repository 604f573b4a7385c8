"""Workload validation and generators of the CUDA grouped GEMM, MoE GEMM and FMHA kinds (CPU only)."""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, fa_flops, fa_min_bytes, program_dims
from kernelpilot.dsl_plugins.cuda.grouped_gemm import GroupedGemmKernel, generate_groups, groups_arg
from kernelpilot.dsl_plugins.cuda.moe_gemm import MoeGemmKernel, route_tokens
from kernelpilot.errors import InputError

G = GroupedGemmKernel()
MOE = MoeGemmKernel()
PRE = FmhaKernel("fa_prefill")
DEC = FmhaKernel("fa_decode")


# ----------------------------------------------------------------------------- grouped GEMM
def test_explicit_groups_accept_lists_and_strings_and_drop_empty_groups():
    p = G.validate_problem({"groups": [[128, 256, 64], "0x64x64", "7x8x16"]}, "bf16", "w")
    assert p["groups"] == [[128, 256, 64], [7, 8, 16]]
    assert p["empty_groups"] == 1
    assert p["layout"] == "rc" and p["dtype"] == "bf16"
    assert G.flops(p) == 2 * (128 * 256 * 64 + 7 * 8 * 16)
    assert G.min_bytes(p) == 2 * (128 * 64 + 256 * 64 + 128 * 256 + 7 * 16 + 8 * 16 + 7 * 8)


def test_generator_is_seeded_and_respects_ranges_and_alignment():
    dims = {"G": 50, "M": [0, 300], "N": [64, 1000], "K": [8, 4096], "dist": "loguniform", "seed": 7}
    a = G.validate_problem(dims, "bf16", "w")
    b = G.validate_problem(dict(dims), "fp16", "w")
    assert a["groups"] == b["groups"] and b["dtype"] == "f16"
    raw = generate_groups(50, (0, 300), (64, 1000), (8, 4096), dist="loguniform", seed=7)
    assert len(raw) == 50 and len(a["groups"]) + a["empty_groups"] == 50
    for m, n, k in raw:
        assert 0 <= m <= 300 and 64 <= n <= 1000 and 8 <= k <= 4096
        assert n % 8 == 0 and k % 8 == 0
    other = G.validate_problem({**dims, "seed": 8}, "bf16", "w")
    assert other["groups"] != a["groups"]
    assert a["source"]["seed"] == 7 and a["source"]["dist"] == "loguniform"


@pytest.mark.parametrize(
    ("dims", "field", "words"),
    [
        ({"groups": [[128, 100, 64]]}, "w.dims.groups[0]", "multiples of 8"),
        ({"groups": [[-1, 64, 64]]}, "w.dims.groups[0]", "M >= 0"),
        ({"groups": [[0, 64, 64]]}, "w.dims.groups", "M = 0"),
        ({"groups": [[1, 2]]}, "w.dims.groups[0]", "three extents"),
        ({"groups": []}, "w.dims.groups", "no groups"),
        ({"groups": [[8, 8, 8]], "M": 4}, "w.dims", "not both"),
        ({"G": 4, "M": 8, "N": 64}, "w.dims", "missing ['K']"),
        ({"G": 4, "M": [9, 3], "N": 64, "K": 64}, "w.dims.M", "lo <= hi"),
        ({"G": 4, "M": 8, "N": 64, "K": 64, "dist": "zipf"}, "w.dims.dist", "uniform, loguniform"),
        ({"G": 0, "M": 8, "N": 64, "K": 64}, "w.dims.G", "1..4096"),
        ({"G": 4, "M": 8, "N": 64, "K": 64, "align": 12}, "w.dims.align", "multiple of 8"),
        ({"groups": [[8, 8, 8]], "colour": 1}, "w.dims", "colour"),
        ({"groups": [[8, 8, 8]], "layout": "rr"}, "w.dims.layout", "allowed: rc"),
    ],
)
def test_grouped_errors_name_the_field_and_the_allowed_values(dims, field, words):
    with pytest.raises(InputError) as exc:
        G.validate_problem(dims, "bf16", "w")
    assert exc.value.field == field
    assert words in str(exc.value)


def test_dtype_must_be_one_16_bit_type():
    with pytest.raises(InputError, match="allowed: bf16, f16"):
        G.validate_problem({"groups": [[8, 8, 8]]}, "e4m3", "w")
    with pytest.raises(InputError, match="one 16-bit dtype"):
        G.validate_problem({"groups": [[8, 8, 8]]}, {"a": "bf16", "b": "f16"}, "w")
    assert G.validate_problem({"groups": [[8, 8, 8]]}, {"a": "bf16", "b": "bf16"}, "w")["dtype"] == "bf16"


def test_run_command_passes_groups_and_variants_and_knobs():
    p = G.validate_problem({"groups": [[128, 256, 64], [0, 64, 64], [3, 8, 16]]}, "bf16", "w")
    argv, env = G.run_command(
        "/b/prog", p, {"variants": [{"raster": "N", "swizzle": 4}, {"raster": "M"}], "reps": 3}
    )
    assert argv == ["/b/prog", "--groups=128x256x64,3x8x16", "--variants=N:4,M:1", "--reps=3"]
    assert env == {}
    assert groups_arg([[1, 8, 8]]) == "--groups=1x8x8"
    small = G.runtime_variants({}, p)
    assert {v["raster"] for v in small} == {"M", "N"} and all(v["swizzle"] == 1 for v in small)
    big = G.validate_problem({"groups": [[4096, 64, 64]]}, "bf16", "w")
    # the ptr-array kernel's group scheduler never swizzles (CUTLASS 4.2): only raster variants for it
    assert {v["swizzle"] for v in G.runtime_variants({}, big)} == {1}
    assert {v["swizzle"] for v in G.runtime_variants({"launch": "grouped"}, big)} == {1}
    # the per-group launch runs the dense kernel, whose scheduler applies the swizzle
    per_group = {(v["raster"], v["swizzle"]) for v in G.runtime_variants({"launch": "per_group"}, big)}
    assert {(r, s) for r in "MN" for s in (4, 8)} <= per_group
    assert {v["swizzle"] for v in G.runtime_variants({"launch": "per_group"}, p)} == {1}
    # a stored run is re-run with the knobs it reported, offered today or not
    assert G.variant_from_runtime({"raster": "M", "swizzle": 8, "buffers": 1}) == {
        "raster": "M",
        "swizzle": 8,
    }
    assert G.variant_from_runtime({"raster": "H", "swizzle": 1}) is None
    assert G.variant_from_runtime({}) is None


# ----------------------------------------------------------------------------- MoE
def test_routing_sums_to_tokens_times_top_k_and_is_seeded():
    for routing in ("balanced", "uniform", "skewed"):
        counts = route_tokens(1000, 16, 4, routing, seed=3)
        assert len(counts) == 16 and sum(counts) == 4000
        assert counts == route_tokens(1000, 16, 4, routing, seed=3)
    assert route_tokens(10, 4, 1, "balanced") == [3, 3, 2, 2]
    uniform = route_tokens(4096, 64, 8, "uniform", seed=0)
    skewed = route_tokens(4096, 64, 8, "skewed", seed=0)
    assert max(skewed) > 2 * max(uniform)  # a few hot experts
    assert max(route_tokens(100, 8, 8, "uniform")) == 100  # top_k distinct experts: each gets every token


def test_moe_problem_is_a_grouped_problem_over_experts():
    dims = {
        "tokens": 512,
        "experts": 8,
        "top_k": 2,
        "N": 1536,
        "K": 2048,
        "routing": "balanced",
        "proj": "down",
    }
    p = MOE.validate_problem(dims, "bf16", "w")
    assert p["groups"] == [[128, 1536, 2048]] * 8
    assert p["num_experts"] == 8 and p["tokens"] == [128] * 8 and p["N"] == 1536 and p["K"] == 2048
    assert p["source"]["proj"] == "down"
    assert MOE.flops(p) == 2 * 512 * 2 * 1536 * 2048
    rec = MOE.validate_problem(
        {
            "total_tokens": 4,
            "num_experts": 3,
            "top_k": 2,
            "N": 64,
            "K": 64,
            "routing": "recorded",
            "counts": [8, 0, 0],
        },
        "bf16",
        "w",
    )
    assert rec["groups"] == [[8, 64, 64]] and rec["empty_groups"] == 2 and rec["tokens"] == [8, 0, 0]


@pytest.mark.parametrize(
    ("dims", "field"),
    [
        ({"experts": 8, "N": 64, "K": 64}, "w.dims.tokens"),
        ({"tokens": 8, "total_tokens": 8, "experts": 8, "N": 64, "K": 64}, "w.dims.tokens"),
        ({"tokens": 8, "experts": 8, "top_k": 9, "N": 64, "K": 64}, "w.dims.top_k"),
        ({"tokens": 8, "experts": 8, "N": 60, "K": 64}, "w.dims.groups[0]"),
        ({"tokens": 8, "experts": 8, "N": 64, "K": 64, "routing": "random"}, "w.dims.routing"),
        (
            {"tokens": 8, "experts": 2, "N": 64, "K": 64, "routing": "recorded", "counts": [1, 2]},
            "w.dims.counts",
        ),
        ({"tokens": 8, "experts": 2, "N": 64, "K": 64, "routing": "recorded"}, "w.dims.counts"),
        ({"tokens": 8, "experts": 2, "N": 64, "K": 64, "skew": 2.0}, "w.dims.skew"),
        ({"tokens": 8, "experts": 2, "N": 64, "K": 64, "proj": "up"}, "w.dims.proj"),
        ({"tokens": 8, "experts": 2, "N": 64, "K": 64, "hidden": 3}, "w.dims"),
    ],
)
def test_moe_errors_name_the_field(dims, field):
    with pytest.raises(InputError) as exc:
        MOE.validate_problem(dims, "bf16", "w")
    assert exc.value.field == field


# ----------------------------------------------------------------------------- attention
def test_prefill_defaults_and_causal_gqa_shares_kv_heads_by_group():
    """Under the causal mask the query heads are not packed into rows (the mask would move); the prefill
    program takes the group (--g) and shares each K/V head among its G query heads."""
    p = PRE.validate_problem(
        {"batch": 2, "num_heads_q": 32, "num_heads_kv": 8, "seq_qo": 1000, "head_dim": 128}, "bf16", "w"
    )
    assert p["seq_kv"] == 1000 and p["causal"] is True
    assert program_dims(p) == {"b": 2, "h": 32, "q": 1000, "k": 1000}  # without --g: K/V per query head
    assert program_dims(p, kv_groups=True) == {"b": 2, "h": 32, "g": 4, "q": 1000, "k": 1000}
    assert fa_flops(p) == 4 * 2 * 32 * 1000 * 1000 * 128 * 0.5
    argv, _ = PRE.run_command("/p", p, {"reps": 2})
    assert argv == ["/p", "--b=2", "--h=32", "--g=4", "--q=1000", "--k=1000", "--reps=2"]
    mha = PRE.validate_problem({"batch": 1, "num_heads_q": 4, "seq_qo": 77, "head_dim": 64}, "bf16", "w")
    assert "--g" not in " ".join(PRE.run_command("/p", mha, {})[0])  # one K/V head per query head
    # a decode program (template 4) has no --g: a causal GQA decode problem keeps K/V per query head
    dec = DEC.validate_problem(
        {"batch": 2, "num_heads_q": 8, "num_heads_kv": 2, "seq_qo": 16, "seq_kv": 16, "head_dim": 64,
         "causal": True}, "bf16", "w",
    )  # fmt: skip
    assert DEC.run_command("/p", dec, {})[0] == ["/p", "--b=2", "--h=8", "--q=16", "--k=16"]


def test_decode_packs_query_heads_into_rows():
    p = DEC.validate_problem(
        {"batch": 64, "num_heads_q": 64, "num_heads_kv": 8, "seq_kv": 4096, "head_dim": 64}, "bf16", "w"
    )
    assert p["seq_qo"] == 1 and p["causal"] is False
    assert program_dims(p) == {"b": 64, "h": 8, "q": 8, "k": 4096}
    # packing keeps the FLOPs of the GQA problem
    d = program_dims(p)
    assert 4.0 * d["b"] * d["h"] * d["q"] * d["k"] * 64 == DEC.flops(p)
    mha = DEC.validate_problem({"batch": 1, "num_heads_q": 4, "seq_kv": 77, "head_dim": 32}, "f16", "w")
    assert program_dims(mha) == {"b": 1, "h": 4, "q": 1, "k": 77}


def test_attention_min_bytes_counts_kv_once_per_kv_head():
    gqa = DEC.validate_problem(
        {"batch": 64, "num_heads_q": 64, "num_heads_kv": 8, "seq_kv": 4096, "head_dim": 64}, "bf16", "w"
    )
    kv = 2 * 64 * 8 * 4096 * 64 * 2  # K and V, bf16, one copy per K/V head
    q_and_o = 2 * 64 * 64 * 1 * 64 * 2
    assert DEC.min_bytes(gqa) == fa_min_bytes(gqa) == kv + q_and_o
    mha = dict(gqa, num_heads_kv=64)
    assert fa_min_bytes(mha) == 8 * kv + q_and_o
    pre = PRE.validate_problem({"batch": 1, "num_heads_q": 2, "seq_qo": 10, "head_dim": 128}, "bf16", "w")
    assert PRE.min_bytes(pre) == 2 * (2 * 2 * 10 * 128 + 2 * 2 * 10 * 128)


@pytest.mark.parametrize(
    ("kernel", "dims", "field"),
    [
        (PRE, {"batch": 1, "num_heads_q": 8, "seq_qo": 64, "head_dim": 96}, "w.dims.head_dim"),
        (
            PRE,
            {"batch": 1, "num_heads_q": 8, "num_heads_kv": 3, "seq_qo": 64, "head_dim": 64},
            "w.dims.num_heads_kv",
        ),
        (PRE, {"batch": 1, "num_heads_q": 8, "seq_qo": 64, "seq_kv": 128, "head_dim": 64}, "w.dims.causal"),
        (PRE, {"batch": 1, "num_heads_q": 8, "head_dim": 64}, "w.dims"),
        (PRE, {"batch": 0, "num_heads_q": 8, "seq_qo": 64, "head_dim": 64}, "w.dims.batch"),
        (
            PRE,
            {"batch": 1, "num_heads_q": 8, "seq_qo": 64, "head_dim": 64, "causal": "maybe"},
            "w.dims.causal",
        ),
        (DEC, {"batch": 1, "num_heads_q": 8, "seq_qo": 65, "seq_kv": 128, "head_dim": 64}, "w.dims.seq_qo"),
        (DEC, {"batch": 1, "num_heads_q": 8, "seq_kv": 128, "head_dim": 64, "window": 4}, "w.dims"),
    ],
)
def test_attention_errors_name_the_field(kernel, dims, field):
    with pytest.raises(InputError) as exc:
        kernel.validate_problem(dims, "bf16", "w")
    assert exc.value.field == field

"""``exp2_emulation``: every k-th softmax exponential of the Hopper FMHA on the FMA pipe instead of MUFU.EX2.

Pinned here: the rules (allowed periods, a period a thread's row fragment can hold), parsing, labels and
that the field is written only when set; that the program renders the softmax specialization and the
emulated fusion only for such configs (every other config renders byte for byte as before, so no cached
build or measurement of it changes); and the arithmetic the rendered ``exp2_fma`` does, replayed in float32
from the rendered source: relative error within 1.1e-4 of 2^x over the softmax's range, 0 for masked scores.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, fmha_label, normalize_fmha_config
from tests.support.sm90_fmha import PREFILL_D64, SM90, fa


def _source(config: dict, problem: dict = PREFILL_D64) -> str:
    kernel = FmhaKernel("fa_prefill")
    prob = kernel.validate_problem({k: v for k, v in problem.items() if k != "dtype"}, "bf16", "w")
    ((_, text),) = kernel.render(config, prob, "sm90").sources.items()
    return text


@pytest.mark.parametrize("period", [2, 3, 4, 6, 8])
def test_allowed_periods_are_legal_on_every_schedule(period: int) -> None:
    for tile, schedule in (
        ((128, 128, 64), "cooperative"),
        ((128, 128, 64), "pingpong"),
        ((64, 128, 64), "tma"),
    ):
        assert not SM90.check(fa(tile, schedule, exp2_emulation=period), PREFILL_D64).rules()


def test_other_periods_and_periods_longer_than_a_threads_row_are_refused() -> None:
    assert "sm90.fa.exp2_emulation" in SM90.check(fa((128, 128, 64), exp2_emulation=5)).rules()
    # BlockKV 16: a thread holds 4 scores of a row; a period of 6 would emulate none
    short = SM90.check(fa((128, 16, 64), exp2_emulation=6)).rules()
    assert "sm90.fa.exp2_emulation_period" in short
    assert "sm90.fa.exp2_emulation_period" not in SM90.check(fa((128, 16, 64), exp2_emulation=4)).rules()
    with pytest.raises(Exception, match="exp2_emulation"):
        fa((128, 128, 64), exp2_emulation=-1)


def test_the_field_is_parsed_labelled_and_written_only_when_set() -> None:
    cfg = fa((128, 128, 64), longest_first=True, exp2_emulation=4)
    assert cfg.label() == "128x128x64_coop_lf_ex4"
    assert cfg.as_dict()["exp2_emulation"] == 4
    assert "exp2_emulation" not in fa((128, 128, 64)).as_dict()
    # the program side reads the model's dict the same way
    program_cfg = normalize_fmha_config(cfg.as_dict(), 64)
    assert program_cfg["exp2_emulation"] == 4 and fmha_label(program_cfg).endswith("_lf_ex4")
    with pytest.raises(ValueError, match=r"exp2_emulation=5.*\[2, 3, 4, 6, 8\]"):
        normalize_fmha_config({"tile": [128, 128, 64], "exp2_emulation": 5}, 64)


def test_only_emulating_configs_render_the_softmax_specialization() -> None:
    plain = _source({"tile": [128, 128, 64], "schedule": "cooperative"})
    zero = _source({"tile": [128, 128, 64], "schedule": "cooperative", "exp2_emulation": 0})
    assert plain == zero
    assert "kp_fmha" not in plain and "Exp2Emulated" not in plain
    emulated = _source({"tile": [128, 128, 64], "schedule": "cooperative", "exp2_emulation": 4})
    assert (
        "struct CollectiveSoftmax<float, kp_fmha::Exp2EmulatedFusion<BaseFusion, kEvery>, Params>" in emulated
    )
    assert (
        "using Fusion = kp_fmha::Exp2EmulatedFusion<std::conditional_t<kCausal, CausalFusion, ResidualFusion>, 4>;"
        in emulated
    )
    # the specialization comes before the kernel types that use it, at namespace scope
    assert emulated.index("namespace cutlass::fmha::collective {") < emulated.index("using Fusion =")
    # the rest of the program is the plain one's
    assert len(emulated.splitlines()) > len(plain.splitlines())


def _exp2_fma_from(source: str):
    """The rendered exp2_fma, replayed in float32: clamp, floor through the 1.5 * 2^23 round-down add,
    the polynomial as written (Horner, one rounding per FMA step), floor(x) added to the exponent bits."""
    body = source[source.index("CUTLASS_DEVICE float exp2_fma(float x)") :]
    body = body[: body.index("}")]
    clamp = float(re.search(r"fmaxf\(x, (-?[0-9.]+)f\)", body).group(1))
    c3, c2, c1, c0 = (
        float(v)
        for v in re.search(
            r"fmaf\(fmaf\(fmaf\(([0-9.]+)f, f, ([0-9.]+)f\), f, ([0-9.]+)f\), f, ([0-9.]+)f\)", body
        ).groups()
    )
    rounder = float(re.search(r"kRound = ([0-9.]+)f", body).group(1))
    f32 = np.float32

    def exp2_fma(x: np.ndarray) -> np.ndarray:
        x = np.maximum(x.astype(f32), f32(clamp))
        t = (f32(rounder) + np.floor(x)).astype(f32)  # add.rm: exact integer in [2^23, 2^24)
        f = (x - (t - f32(rounder))).astype(f32)
        p = ((f32(c3) * f + f32(c2)).astype(f32) * f + f32(c1)).astype(f32) * f + f32(c0)
        bits = p.astype(f32).view(np.uint32) + (t.view(np.uint32) << np.uint32(23))
        return bits.astype(np.uint32).view(f32)

    return exp2_fma


def test_the_rendered_exp2_fma_matches_exp2_where_the_softmax_uses_it() -> None:
    exp2_fma = _exp2_fma_from(
        _source({"tile": [128, 128, 64], "schedule": "cooperative", "exp2_emulation": 4})
    )
    # scaled scores minus the row max: <= 0; 2^x below 2^-126 flushes to zero in the -ftz build anyway
    x = np.concatenate([np.linspace(-126.0, 0.0, 400_001), -np.arange(0, 126, dtype=np.float64)]).astype(
        np.float32
    )
    got = exp2_fma(x).astype(np.float64)
    want = np.exp2(x.astype(np.float64))
    assert np.max(np.abs(got / want - 1.0)) <= 1.1e-4
    assert exp2_fma(np.array([0.0], np.float32))[0] == 1.0  # p(0) = 1: the row max gives exactly 1
    # continuous across integers (p(1) = 2): no step where floor(x) changes
    edge = np.array([-3.0, np.nextafter(np.float32(-3.0), np.float32(-4.0))], np.float32)
    assert abs(float(exp2_fma(edge)[0]) / float(exp2_fma(edge)[1]) - 1.0) < 1e-6
    # masked scores (-inf) and anything at or below -127 give exactly 0, as exp2f does under -ftz
    assert np.all(exp2_fma(np.array([-np.inf, -127.0, -500.0], np.float32)) == 0.0)


def test_the_exported_kernel_carries_the_specialization_at_namespace_scope() -> None:
    """The exported library's translation unit renders the same prelude before its kernel namespace (a
    partial specialization cannot live inside it) and the same emulated fusion in its types."""
    from kernelpilot.dsl_plugins.cuda.gemm import template_env
    from kernelpilot.export.attention_ops import AttentionKernel, render_kernel

    cfg = normalize_fmha_config({"tile": [128, 128, 64], "schedule": "cooperative", "exp2_emulation": 4}, 64)
    text = render_kernel(AttentionKernel(0, "bf16", cfg, True, "x"), "kpk", template_env())
    spec = "struct CollectiveSoftmax<float, kp_fmha::Exp2EmulatedFusion<BaseFusion, kEvery>, Params>"
    assert text.count(spec) == 1
    assert (
        text.index(spec)
        < text.index("namespace kpk {")
        < text.index("kp_fmha::Exp2EmulatedFusion<std::conditional_t")
    )
    plain = render_kernel(
        AttentionKernel(0, "bf16", {**cfg, "exp2_emulation": 0}, True, "x"), "kpk", template_env()
    )
    assert "kp_fmha" not in plain


def test_enumeration_offers_the_listed_periods_for_prefill_up_to_head_dim_64_only(monkeypatch) -> None:
    """What the space enumerates follows ENUM_EXP2_EMULATION (empty until a GPU measurement fills it): each
    period on every warp-specialized prefill config at head dim <= 64, with and without longest_first."""
    import kernelpilot.hw_models.sm90.fmha_space as space

    assert not any(c.exp2_emulation for c in SM90.enumerate("fa_prefill", "bf16", PREFILL_D64))
    monkeypatch.setattr(space, "ENUM_EXP2_EMULATION", (4,))
    configs = list(SM90.enumerate("fa_prefill", "bf16", PREFILL_D64))
    labels = {c.label() for c in configs}
    assert {
        "128x128x64_coop_ex4",
        "128x128x64_coop_lf_ex4",
        "192x128x64_coop_wg3_ex4",
        "128x128x64_pp_ex4",
    } <= labels
    assert all(SM90.check(c, PREFILL_D64).valid for c in configs)
    assert not any(c.exp2_emulation and c.schedule == "tma" for c in configs)
    plain = [c for c in configs if not c.exp2_emulation and c.schedule != "tma"]
    assert all(c.model_copy(update={"exp2_emulation": 4}).label() in labels for c in plain)
    hd128 = {**PREFILL_D64, "head_dim": 128}
    assert not any(c.exp2_emulation for c in SM90.enumerate("fa_prefill", "bf16", hd128))
    decode = {**PREFILL_D64, "seq_qo": 1, "causal": False}
    assert not any(c.exp2_emulation for c in SM90.enumerate("fa_decode", "bf16", decode))


def test_neighbours_reach_every_period_and_back() -> None:
    base = fa((128, 128, 64))
    assert {f"128x128x64_coop_ex{k}" for k in (2, 3, 4, 6, 8)} <= {n.label() for n in SM90.neighbours(base)}
    assert "128x128x64_coop" in {n.label() for n in SM90.neighbours(fa((128, 128, 64), exp2_emulation=4))}


def test_cost_model_ranks_the_measured_periods_slower_and_predicts_no_effect_without_a_factor(
    monkeypatch,
) -> None:
    import kernelpilot.hw_models.sm90.fmha_cost as cost
    from kernelpilot.hw_models.catalogue import get_device

    h200 = get_device("h200")
    base = fa((128, 128, 64))
    # every measured period ran slower (the H100 A/B), the shorter the period the slower: ranked so
    times = [cost.fmha_time_s(fa((128, 128, 64), exp2_emulation=k), PREFILL_D64, h200) for k in (8, 4, 3, 2)]
    assert cost.fmha_time_s(base, PREFILL_D64, h200) < times[0] < times[1] < times[2] < times[3]
    # a period without a measured factor has no predicted effect
    ex6 = fa((128, 128, 64), exp2_emulation=6)
    assert cost.fmha_time_s(ex6, PREFILL_D64, h200) == cost.fmha_time_s(base, PREFILL_D64, h200)
    # a factor applies to the softmax-bound part: at head dim 64 the softmax bounds the model's step
    ex4 = fa((128, 128, 64), exp2_emulation=4)
    monkeypatch.setattr(cost, "FA_EXP2_EMULATION_SOFTMAX_FACTOR", {4: 0.9})
    assert cost.fmha_time_s(ex4, PREFILL_D64, h200) < cost.fmha_time_s(base, PREFILL_D64, h200)
    # above head dim 64 the wide-head table applies, not the hd64 one
    hd128 = {**PREFILL_D64, "head_dim": 128}
    wide, wide_ex4 = fa((128, 128, 128)), fa((128, 128, 128), exp2_emulation=4)
    monkeypatch.setattr(cost, "FA_EXP2_EMULATION_WIDE_HEAD_FACTOR", {})
    assert cost.fmha_time_s(wide_ex4, hd128, h200) == cost.fmha_time_s(wide, hd128, h200)

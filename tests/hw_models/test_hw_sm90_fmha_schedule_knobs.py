"""The Hopper FMHA knobs that change when work runs, not the tile: ``longest_first`` (causal Q tiles of
each head launched from the longest to the shortest, through the project's scheduler) and ``wg_locked``
(``Option<Tag::kIsMainloopLocked>``: the MMA warpgroups take turns on the softmax).

Pinned here: the rules (warp-specialized schedules only; longest_first only with the causal mask), that
enumeration offers them for prefill only and nothing it offers is illegal, that neighbours toggle them,
that the program renders the scheduler / option (and configs without them render as before), and the
cost model's ranking of each knob against its base config.
"""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, kernel_context, normalize_fmha_config
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.fmha_cost import FA_WG_LOCK_SOFTMAX_FACTOR, fmha_time_s
from tests.support.sm90_fmha import PREFILL_D64, SM90, fa

H200 = get_device("h200")
PREFILL_NOMASK = {**PREFILL_D64, "causal": False}
DECODE_D128 = {
    "batch": 64,
    "num_heads_q": 32,
    "num_heads_kv": 8,
    "seq_qo": 1,
    "seq_kv": 4096,
    "head_dim": 128,
    "causal": False,
    "dtype": "bf16",
}


@pytest.mark.parametrize("knob", ["longest_first", "wg_locked"])
def test_the_tma_schedule_takes_neither_knob(knob: str) -> None:
    assert f"sm90.fa.{knob}" in SM90.check(fa((64, 128, 64), "tma", **{knob: True})).rules()
    for schedule in ("cooperative", "pingpong"):
        assert not SM90.check(fa((128, 128, 64), schedule, **{knob: True}), PREFILL_D64).rules()


def test_longest_first_needs_the_causal_mask() -> None:
    cfg = fa((128, 128, 64), longest_first=True)
    assert "sm90.fa.longest_first_causal" in SM90.check(cfg, PREFILL_NOMASK).rules()
    assert not SM90.check(cfg, PREFILL_D64).rules()
    # the lock is legal without the mask
    assert not SM90.check(fa((128, 128, 64), wg_locked=True), PREFILL_NOMASK).rules()


def test_knobs_are_parsed_labelled_and_written_only_when_set() -> None:
    cfg = fa((128, 128, 64), longest_first=True, wg_locked=True)
    assert cfg.label() == "128x128x64_coop_lf_lk"
    assert cfg.as_dict()["longest_first"] is True and cfg.as_dict()["wg_locked"] is True
    plain = fa((128, 128, 64))
    assert "longest_first" not in plain.as_dict() and "wg_locked" not in plain.as_dict()
    with pytest.raises(Exception, match="wg_locked"):
        fa((128, 128, 64), wg_locked="sometimes")


def test_enumeration_offers_longest_first_for_causal_prefill_only_and_only_legal_configs() -> None:
    causal = list(SM90.enumerate("fa_prefill", "bf16", PREFILL_D64))
    labels = {c.label() for c in causal}
    assert {"128x128x64_coop_lf", "128x128x64_pp_lf", "128x128x64_coop"} <= labels
    assert all(SM90.check(c, PREFILL_D64).valid for c in causal)
    assert not any(c.schedule == "tma" and c.longest_first for c in causal)
    # the lock measured no gain on the H200: not enumerated (neighbours still reach it)
    assert not any(c.wg_locked for c in causal)
    nomask = list(SM90.enumerate("fa_prefill", "bf16", PREFILL_NOMASK))
    assert nomask and not any(c.longest_first or c.wg_locked for c in nomask)
    decode = list(SM90.enumerate("fa_decode", "bf16", DECODE_D128))
    assert decode and not any(c.longest_first or c.wg_locked for c in decode)


def test_neighbours_toggle_the_knobs_and_a_schedule_change_drops_them() -> None:
    base = fa((128, 128, 64))
    labels = {n.label() for n in SM90.neighbours(base)}
    assert {"128x128x64_coop_lf", "128x128x64_coop_lk"} <= labels
    both = fa((128, 128, 64), longest_first=True, wg_locked=True)
    near = SM90.neighbours(both)
    assert {"128x128x64_coop_lk", "128x128x64_coop_lf"} <= {n.label() for n in near}
    assert all(not (n.longest_first or n.wg_locked) for n in near if n.schedule == "tma")


def test_the_program_renders_the_reversed_scheduler_and_the_lock() -> None:
    kernel = FmhaKernel("fa_prefill")
    problem = kernel.validate_problem(
        {"batch": 4, "num_heads_q": 64, "num_heads_kv": 8, "seq_qo": 4096, "head_dim": 64}, "bf16", "w"
    )
    coop = next(
        iter(
            kernel.render(fa((128, 128, 64), longest_first=True).as_dict(), problem, "sm90").sources.values()
        )
    )
    assert "struct KpLongestFirstScheduler : IndividualTileScheduler" in coop
    assert "gridDim.x - 1 - blockIdx.x" in coop
    assert "KernelTmaWarpSpecializedCooperative>;" in coop and "kIsMainloopLocked" not in coop
    pp = fa((128, 128, 64), "pingpong", longest_first=True, wg_locked=True).as_dict()
    src = next(iter(kernel.render(pp, problem, "sm90").sources.values()))
    assert "struct KpLongestFirstScheduler : PersistentTileScheduler" in src
    assert "params.divmod_m_block.divisor - 1 - get<0>(c)" in src
    # the pingpong schedule's own options come with it, the lock too, in the builder and the kernel
    for opt in ("kIsPersistent, true_type", "kLoadsQSeparately, true_type", "kIsMainloopLocked, true_type"):
        assert src.count(opt) == 2, opt
    plain = next(iter(kernel.render(fa((128, 128, 64)).as_dict(), problem, "sm90").sources.values()))
    assert "KpLongestFirstScheduler" not in plain and "kIsMainloopLocked" not in plain
    assert "Fusion, Schedule>::Kernel>;" in plain


def test_the_program_side_refuses_what_the_model_refuses() -> None:
    with pytest.raises(ValueError, match="longest_first"):
        normalize_fmha_config({"tile": [64, 128, 64], "schedule": "tma", "longest_first": True})
    cfg = normalize_fmha_config({"tile": [128, 128, 64], "longest_first": True})
    with pytest.raises(ValueError, match="causal"):
        kernel_context(cfg, "bf16", causal=False)
    assert (
        "Option<Tag::kIsMainloopLocked, true_type>"
        in kernel_context(
            normalize_fmha_config({"tile": [128, 128, 64], "wg_locked": True}), "bf16", causal=False
        )["options"]
    )


def test_cost_model_is_fit_to_the_measured_knob_effects() -> None:
    """longest_first: 0.5-1.0 % faster in the H200 run's confirmation, so the model predicts a small gain
    on causal grids and none without the mask; wg_locked: no measured gain, no predicted effect."""
    base = fa((128, 128, 64))
    t = fmha_time_s(base, PREFILL_D64, H200)
    lf = fmha_time_s(fa((128, 128, 64), longest_first=True), PREFILL_D64, H200)
    lk = fmha_time_s(fa((128, 128, 64), wg_locked=True), PREFILL_D64, H200)
    assert 0.99 < lf / t < 1.0 and FA_WG_LOCK_SOFTMAX_FACTOR == 1.0 and lk == pytest.approx(t)
    nomask = fmha_time_s(base, PREFILL_NOMASK, H200)
    assert fmha_time_s(fa((128, 128, 64), wg_locked=True), PREFILL_NOMASK, H200) == pytest.approx(nomask)

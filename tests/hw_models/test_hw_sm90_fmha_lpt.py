"""``lpt``: the causal Q tiles of every (batch, head) dispatched longest first across the whole grid.

Pinned here: the dispatch simulation the cost model takes the knob's gain from (hand-checked small grids,
the orders' ranking on the prefill workloads), the rules (warp-specialized, causal, not with
``longest_first``), labels and the written form, enumeration and neighbours, the cost model's use of the
simulation, and the programs' schedulers (configs without the knob render as before).
"""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.cuda.fmha import FmhaKernel, kernel_context, normalize_fmha_config
from kernelpilot.hw_models.catalogue import get_device
from kernelpilot.hw_models.sm90.fmha import _program_rows
from kernelpilot.hw_models.sm90.fmha_cost import fmha_time_s
from kernelpilot.hw_models.sm90.fmha_dispatch import dispatch_overrun, tile_steps
from tests.support.sm90_fmha import PREFILL_D64, SM90, fa

H200 = get_device("h200")
PREFILL_NOMASK = {**PREFILL_D64, "causal": False}


def test_tile_steps_count_the_causal_sweep_plus_the_fixed_work() -> None:
    # BlockQO 128, BlockKV 64: tile i sees 128 (i + 1) keys in 64-key steps; the last tile stops at the rows
    assert [tile_steps(i, 128, 64, 300) for i in range(3)] == [3.0, 5.0, 6.0]


def test_the_dispatch_simulation_on_a_grid_small_enough_to_check_by_hand() -> None:
    """Two heads of two tiles (2 and 3 steps) on two slots.  Natural order [2, 3, 2, 3]: the slots free at
    2 and 3, take 2 (-> 4) and 3 (-> 6): makespan 6 over 10 / 2 = 5.  Longest first within each head
    [3, 2, 3, 2] and across heads [3, 3, 2, 2] both end at 5 and 5."""
    assert dispatch_overrun("natural", 2, 64, 64, 128, 2) == pytest.approx(1.2)
    assert dispatch_overrun("longest_first", 2, 64, 64, 128, 2) == pytest.approx(1.0)
    assert dispatch_overrun("lpt", 2, 64, 64, 128, 2) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="dispatch order"):
        dispatch_overrun("random", 2, 64, 64, 128, 2)


@pytest.mark.parametrize(
    "heads, qo, kv, rows",
    [(112, 128, 128, 4096), (128, 128, 128, 4096), (256, 192, 128, 4096), (32, 128, 64, 4096)],
    ids=["qwen25_7b", "llama3_8b", "gpt_oss_20b_hd64", "gemma3_12b_hd256"],
)
def test_lpt_leaves_the_least_idle_end_on_the_prefill_grids(heads: int, qo: int, kv: int, rows: int) -> None:
    natural, lf, lpt = (
        dispatch_overrun(o, heads, qo, kv, rows, 132) for o in ("natural", "longest_first", "lpt")
    )
    assert natural > lf > lpt >= 1.0
    assert lpt < 1.01  # only the shortest tiles are left for the end
    assert lf / lpt > 1.01  # the within-head order still ends on the last heads' long tiles


def test_rules_labels_and_written_form() -> None:
    cfg = fa((128, 128, 64), lpt=True)
    assert cfg.label() == "128x128x64_coop_lpt" and cfg.as_dict()["lpt"] is True
    assert not SM90.check(cfg, PREFILL_D64).rules()
    assert not SM90.check(fa((128, 128, 64), "pingpong", lpt=True), PREFILL_D64).rules()
    assert "lpt" not in fa((128, 128, 64), longest_first=True).as_dict()
    assert "sm90.fa.lpt" in SM90.check(fa((64, 128, 64), "tma", lpt=True)).rules()
    assert "sm90.fa.lpt_causal" in SM90.check(cfg, PREFILL_NOMASK).rules()
    both = fa((128, 128, 64), lpt=True, longest_first=True)
    assert "sm90.fa.lpt_longest_first" in SM90.check(both, PREFILL_D64).rules()
    with pytest.raises(Exception, match="lpt"):
        fa((128, 128, 64), lpt="yes")


def test_enumeration_leaves_lpt_out_until_measured_and_offers_it_next_to_longest_first_when_on(
    monkeypatch,
) -> None:
    """Off (``ENUM_LPT``): the causal prefill space is what it was, neighbours still reach lpt.  On: every
    base that gets the within-head order also gets the across-heads one, all legal, causal only."""
    from kernelpilot.hw_models.sm90 import fmha_space

    assert fmha_space.ENUM_LPT is False
    assert not any(c.lpt for c in SM90.enumerate("fa_prefill", "bf16", PREFILL_D64))
    monkeypatch.setattr(fmha_space, "ENUM_LPT", True)
    causal = list(SM90.enumerate("fa_prefill", "bf16", PREFILL_D64))
    lpt = {c.model_copy(update={"lpt": False}) for c in causal if c.lpt}
    lf = {c.model_copy(update={"longest_first": False}) for c in causal if c.longest_first}
    assert lpt and lpt == lf
    assert all(SM90.check(c, PREFILL_D64).valid for c in causal)
    assert not any(c.lpt and c.longest_first for c in causal)
    assert not any(c.lpt for c in SM90.enumerate("fa_prefill", "bf16", PREFILL_NOMASK))


def test_neighbours_switch_between_the_two_orders() -> None:
    assert {"128x128x64_coop_lpt", "128x128x64_coop_lf"} <= {
        n.label() for n in SM90.neighbours(fa((128, 128, 64)))
    }
    near = {n.label() for n in SM90.neighbours(fa((128, 128, 64), longest_first=True))}
    assert "128x128x64_coop_lpt" in near and "128x128x64_coop" in near
    assert "128x128x64_coop_lf" in {n.label() for n in SM90.neighbours(fa((128, 128, 64), lpt=True))}


def test_the_cost_model_takes_lpt_gain_from_the_dispatch_simulation() -> None:
    for tile in ((128, 128, 64), (192, 128, 64)):
        extra = {"warpgroups": 3} if tile[0] == 192 else {}
        lf = fmha_time_s(fa(tile, longest_first=True, **extra), PREFILL_D64, H200)
        lpt_cfg = fa(tile, lpt=True, **extra)
        b, h, rows, _ = _program_rows(PREFILL_D64)
        slots = H200.cores * lpt_cfg.resident_blocks()
        ratio = dispatch_overrun("lpt", b * h, tile[0], tile[1], rows, slots) / dispatch_overrun(
            "longest_first", b * h, tile[0], tile[1], rows, slots
        )
        assert fmha_time_s(lpt_cfg, PREFILL_D64, H200) == pytest.approx(lf * ratio)
        assert ratio < 0.99


def _source(cfg: dict, problem: dict) -> str:
    return next(iter(FmhaKernel("fa_prefill").render(cfg, problem, "sm90").sources.values()))


def test_the_program_renders_the_across_heads_scheduler() -> None:
    kernel = FmhaKernel("fa_prefill")
    problem = kernel.validate_problem(
        {"batch": 4, "num_heads_q": 64, "num_heads_kv": 8, "seq_qo": 4096, "head_dim": 64}, "bf16", "w"
    )
    coop = _source(fa((128, 128, 64), lpt=True).as_dict(), problem)
    assert "struct KpLongestFirstScheduler : IndividualTileScheduler" in coop
    assert "int linear = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);" in coop
    assert "int(gridDim.x) - 1 - linear / heads" in coop and "gridDim.x - 1 - blockIdx.x" not in coop
    pp = _source(fa((128, 128, 64), "pingpong", lpt=True).as_dict(), problem)
    assert "struct KpLongestFirstScheduler : PersistentTileScheduler" in pp
    assert "params.divmod_h(rest, bidh, rest);" in pp and "kIsPersistent, true_type" in pp
    lf = _source(fa((128, 128, 64), longest_first=True).as_dict(), problem)
    assert "gridDim.x - 1 - blockIdx.x" in lf and "linear" not in lf
    assert "KpLongestFirstScheduler" not in _source(fa((128, 128, 64)).as_dict(), problem)


def test_the_program_side_refuses_what_the_model_refuses() -> None:
    with pytest.raises(ValueError, match="lpt"):
        normalize_fmha_config({"tile": [64, 128, 64], "schedule": "tma", "lpt": True})
    with pytest.raises(ValueError, match="set one"):
        normalize_fmha_config({"tile": [128, 128, 64], "lpt": True, "longest_first": True})
    cfg = normalize_fmha_config({"tile": [128, 128, 64], "lpt": True})
    assert cfg["lpt"] is True and kernel_context(cfg, "bf16", causal=True)["lpt"] is True
    with pytest.raises(ValueError, match="lpt needs the causal mask"):
        kernel_context(cfg, "bf16", causal=False)


def test_the_prediction_script_ranks_the_orders_on_every_causal_prefill_workload() -> None:
    """benchmarks/fmha_dispatch_orders.py (whose record the docs quote): one row per causal prefill
    workload, lpt's overrun below longest_first's below the natural order's, and the cost model's ratio
    the simulated one."""
    from tests.support.benchmark_scripts import load_benchmark_script

    script = load_benchmark_script("fmha_dispatch_orders")
    rows = script.predict()
    assert [r["workload"] for r in rows] == [w for w, _ in script.DEFAULT_CASES]
    for r in rows:
        o = r["overrun"]
        assert o["natural"] > o["longest_first"] > o["lpt"] >= 1.0, r["workload"]
        assert r["cost_model_lf_over_lpt"] == pytest.approx(r["simulated_lf_over_lpt"], abs=1e-3)

"""Xe model rules and cost-model facts that come from how sycl-tla's schedulers launch work-groups:
persistent-decode partition slots, causal attention with more query than key rows, one work-group per
Xe-core for grouped / MoE / persistent decode, narrow row pitches, the ``persistent`` GEMM alias,
experimental element types, and tuning without a library default."""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.errors import InputError, NoLibraryDefaultError
from kernelpilot.hw_models.xe.launch import fa_partitions
from kernelpilot.targets import get_target_model
from kernelpilot.tile_tuner.space import SearchSpace, config_key

KERNELS = {k.kind: k for k in all_kernels()}
BMG = get_target_model("bmg")  # default device Arc B580: 20 Xe-cores
DECODE_CFG = {"kernel": "fa_decode", "dtype": "bf16", "qk": [1, 256, 64], "pv": [1, 32, 256], "out": [1, 64],
              "sg_qk": [1, 16, 1], "head_dim": 64, "stages": 1, "persistent": True}  # fmt: skip


def _problem(kind: str, dims: dict, dtype="bf16") -> dict:
    return KERNELS[kind].validate_problem(dims, dtype, "test")


def _decode(batch: int, heads: int, seq_kv: int) -> dict:
    dims = {"head_dim": 64, "batch": batch, "num_heads_q": heads, "num_heads_kv": heads, "seq_kv": seq_kv}
    return _problem("fa_decode", dims)


def test_partition_count_follows_the_kernels_split() -> None:
    # one (batch, head), 16 KV blocks, 20 work-groups: one block each, 16 partitions
    assert fa_partitions(1, 4096, 256, 20) == 16
    assert fa_partitions(1, 2048, 256, 20) == 8
    # many heads share the work-groups: a few partitions each
    assert fa_partitions(8, 4096, 256, 20) <= 4


def test_persistent_decode_may_not_overflow_its_eight_partition_slots() -> None:
    cfg = BMG.parse_config(DECODE_CFG)
    over = BMG.check(cfg, _decode(1, 1, 4096))
    assert "xe.fa.persistent_partitions" in over.rules()
    assert "16 work-groups" in next(
        v.message for v in over.violations if v.rule == "xe.fa.persistent_partitions"
    )
    assert BMG.check(cfg, _decode(1, 1, 2048)).valid
    assert BMG.check(cfg, _decode(1, 8, 4096)).valid  # the golden decode shape
    # the same problem on PVC (more Xe-cores) splits wider
    pvc = get_target_model("pvc")
    assert (
        "xe.fa.persistent_partitions" in pvc.check(pvc.parse_config(DECODE_CFG), _decode(1, 8, 4096)).rules()
    )


def test_enumeration_never_plans_a_partition_overflow() -> None:
    problem = _decode(1, 1, 4096)
    persistent = [c for c in BMG.enumerate("fa_decode", "bf16", problem) if c.persistent]
    assert persistent, "larger KV tiles keep the split within 8 partitions"
    assert all(fa_partitions(1, 4096, c.qk[1], 20) <= 8 for c in persistent)


def _prefill(seq_qo: int, seq_kv: int) -> dict:
    dims = {"head_dim": 128, "batch": 1, "num_heads_q": 8, "seq_qo": seq_qo, "seq_kv": seq_kv, "causal": True}
    return _problem("fa_prefill", dims)


def test_causal_with_more_query_than_key_rows() -> None:
    problem = _prefill(1024, 512)
    cfg = BMG.default_config("fa_prefill", "bf16", problem)  # 256x32x32, 16 query rows per subgroup
    aligned = BMG.check(cfg, problem)
    assert aligned.valid and "xe.fa.causal_unwritten_rows" in {w.rule for w in aligned.warnings}
    straddle = BMG.check(cfg, _prefill(1030, 1024))  # 6 unseeing rows: the first subgroup straddles them
    assert "xe.fa.causal_discard" in straddle.rules()
    plain = BMG.check(cfg, _prefill(1024, 1024))
    assert plain.valid and not plain.warnings


def test_grouped_moe_and_persistent_decode_warn_about_one_work_group_per_core() -> None:
    grouped = BMG.parse_config(
        {"kernel": "grouped_gemm", "dtype": "bf16", "wg": [8, 16, 16], "sg": [1, 1, 1]}
    )
    warning = next(w for w in BMG.check(grouped).warnings if w.rule == "xe.occupancy")
    assert "1 of 32" in warning.message
    full = BMG.parse_config(
        {"kernel": "grouped_gemm", "dtype": "bf16", "wg": [256, 256, 32], "sg": [8, 4, 1]}
    )
    assert "xe.occupancy" not in {w.rule for w in BMG.check(full).warnings}
    dense = BMG.parse_config({"kernel": "gemm", "dtype": "bf16", "wg": [8, 16, 16], "sg": [1, 1, 1]})
    assert "xe.occupancy" not in {w.rule for w in BMG.check(dense).warnings}  # many work-groups per core
    decode = BMG.check(BMG.parse_config(DECODE_CFG), _decode(1, 8, 4096))
    assert "16 of 32" in next(w.message for w in decode.warnings if w.rule == "xe.occupancy")


def test_cost_model_counts_one_work_group_per_core_for_grouped_gemm() -> None:
    """Same tile and problem: the dense kernel fills a core with 32 one-subgroup work-groups, the
    grouped kernel's scheduler launches one, so its estimate is many times slower."""
    dims = {"M": 2048, "N": 2048, "K": 2048}
    raw = {"dtype": "bf16", "wg": [8, 16, 16], "sg": [1, 1, 1]}
    dense = BMG.estimate_time_s(BMG.parse_config({"kernel": "gemm", **raw}), _problem("gemm", dims))
    grouped_problem = _problem("grouped_gemm", {"shapes": [[2048, 2048, 2048]]})
    grouped = BMG.estimate_time_s(BMG.parse_config({"kernel": "grouped_gemm", **raw}), grouped_problem)
    assert grouped > 4 * dense
    big = {"dtype": "bf16", "wg": [256, 256, 32], "sg": [8, 4, 1]}
    g_big = BMG.estimate_time_s(BMG.parse_config({"kernel": "grouped_gemm", **big}), grouped_problem)
    assert g_big < grouped / 4  # and the ranking prefers a full work-group


def test_narrow_row_pitches_are_a_warning() -> None:
    cfg = BMG.parse_config({"kernel": "grouped_gemm", "dtype": "bf16", "wg": [256, 256, 32], "sg": [8, 4, 1]})
    narrow = BMG.check(cfg, _problem("grouped_gemm", {"shapes": [[4096, 4096, 16], [1024, 4096, 4096]]}))
    assert narrow.valid
    msgs = [w.message for w in narrow.warnings if w.rule == "xe.pitch_64"]
    assert msgs and all(m.startswith("group 0: A: row pitch 32 B (K=16)") for m in msgs)
    assert all("narrow_pitch check problem" in m for m in msgs)  # what the program then verifies
    wide = BMG.check(cfg, _problem("grouped_gemm", {"shapes": [[1024, 4096, 4096]]}))
    assert "xe.pitch_64" not in {w.rule for w in wide.warnings}


def test_persistent_gemm_schedule_is_the_default_kernel() -> None:
    raw = {"kernel": "gemm", "dtype": "bf16", "wg": [256, 256, 32], "sg": [8, 4, 1], "stages": 2}
    alias = BMG.parse_config({**raw, "schedule": "persistent"})
    plain = BMG.parse_config(raw)
    assert alias.schedule == "default" and config_key(alias) == config_key(plain)
    assert all(n.schedule != "persistent" for n in BMG.neighbours(plain))
    with pytest.raises(InputError, match="schedule"):
        BMG.parse_config({**raw, "schedule": "persistant"})


@pytest.mark.parametrize(
    ("kind", "dtype", "experimental"),
    [("gemm", "bf16", False), ("gemm", "s8", False), ("gemm", {"a": "bf16", "b": "s8"}, True),
     ("gemm", "s4", True), ("gemm", "e2m1", True), ("grouped_gemm", {"a": "f16", "b": "u4"}, True),
     ("moe_gemm", "bf16", False)],
)  # fmt: skip
def test_mixed_and_4bit_dense_gemm_are_labelled_experimental(kind: str, dtype, experimental: bool) -> None:
    wk = 64 if kind != "moe_gemm" and (isinstance(dtype, dict) or dtype in ("s4", "e2m1")) else 32
    cfg = BMG.parse_config({"kernel": kind, "dtype": dtype, "wg": [256, 256, wk], "sg": [8, 4, 1]})
    assert ("xe.experimental_dtype" in {w.rule for w in BMG.check(cfg).warnings}) == experimental


def test_no_library_default_is_its_own_error_and_the_space_falls_back_to_the_models_best() -> None:
    dims = {"head_dim": 80, "batch": 1, "num_heads_q": 32, "seq_qo": 2048, "seq_kv": 2048, "causal": True}
    problem = _problem("fa_prefill", dims)
    with pytest.raises(NoLibraryDefaultError, match="head_dim=80"):
        BMG.default_config("fa_prefill", "bf16", problem)
    assert issubclass(NoLibraryDefaultError, InputError)  # still exit 2 where a default is asked for by name
    space = SearchSpace(BMG, "fa_prefill", "bf16", problem)
    baseline = space.default()
    assert space.default_source == "model_best" and "head_dim=80" in space.default_note
    assert config_key(baseline) == config_key(space.ranked()[0]) and BMG.check(baseline, problem).valid
    library = SearchSpace(BMG, "fa_prefill", "bf16", _prefill(2048, 2048))
    library.default()
    assert library.default_source == "library" and library.default_note == ""


def test_experimental_label_reaches_the_search_space_and_the_report() -> None:
    """The label is not only a model warning: the tuner's space names it for the workload, and the run
    report prints it (the run JSON's ``experimental`` list)."""
    from kernelpilot.tile_tuner.report import confirmation_notes
    from kernelpilot.tile_tuner.space import SearchSpace

    notes = {}
    for dtype in ("bf16", {"a": "bf16", "b": "s8"}):
        problem = _problem("gemm", {"M": 1024, "N": 1024, "K": 1024}, dtype)
        notes[str(dtype)] = SearchSpace(BMG, "gemm", problem["dtype"], problem).experimental_notes()
    assert notes["bf16"] == []
    (mixed,) = notes[str({"a": "bf16", "b": "s8"})]
    assert mixed.startswith("experimental: ") and "no icpx build" in mixed
    lines = confirmation_notes({"workloads": [{"name": "w", "experimental": [mixed]}, {"name": "v"}]})
    assert lines == [f"EXPERIMENTAL: w: {mixed}"]

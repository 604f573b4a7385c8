"""Target-model API: lookup, parsing errors, enumeration speed and legality, neighbours, defaults, cost model."""

from __future__ import annotations

import time

import pytest

from kernelpilot.errors import InputError
from kernelpilot.hw_models.sm90.gemm import MAX_ACC_REGISTERS
from kernelpilot.hw_models.types import CheckResult, TileConfig
from kernelpilot.targets import get_target_model, list_target_models
from tests.support import REPO

GEMM_8K = {"M": 8192, "N": 8192, "K": 8192}


def test_registry_has_all_targets_and_unknown_lists_them() -> None:
    models = list_target_models()
    assert {"bmg", "pvc", "xe2_igpu", "sm90"} <= set(models)
    assert models["sm90"].family == "sm90" and models["bmg"].family == "xe"
    with pytest.raises(InputError) as err:
        get_target_model("gfx942")
    assert "bmg" in str(err.value) and "sm90" in str(err.value)


@pytest.mark.parametrize(
    ("target", "raw", "needle"),
    [
        ("bmg", {"kernel": "gemm", "wg": [256, 256, 32], "tile": [1, 2, 3]}, "tile"),
        ("bmg", {"kernel": "conv", "wg": [256, 256, 32]}, "conv"),
        ("bmg", {"kernel": "gemm", "dtype": "fp7", "wg": [256, 256, 32]}, "fp7"),
        ("bmg", {"kernel": "gemm", "wg": [256, 256]}, "wg"),
        ("bmg", {"kernel": "gemm", "wg": [256, 256, 32], "schedule": "fast"}, "schedule"),
        (
            "bmg",
            {"kernel": "fa_prefill", "qk": [128, 64, 32], "pv": [128, 32, 64], "out": [128, 64]},
            "sg_qk",
        ),
        ("sm90", {"tile": [128, 128, 64], "schedule": "coop"}, "schedule"),
        ("sm90", {"tile": [128, 128, 64], "swizzle": 2}, "swizzle"),
        ("sm90", {"tile": [128, 128, 64], "cluster": [2, 1, 2]}, "cluster"),
    ],
)
def test_bad_input_names_where_and_field(target: str, raw: dict, needle: str) -> None:
    with pytest.raises(InputError) as err:
        get_target_model(target).parse_config(raw, where="cfg.yaml: entry 3")
    msg = str(err.value)
    assert "cfg.yaml: entry 3" in msg and needle in msg


def test_fp16_alias_and_mixed_dtype_roundtrip() -> None:
    bmg = get_target_model("bmg")
    cfg = bmg.parse_config({"kernel": "gemm", "dtype": "fp16", "wg": [256, 256, 32], "sg": [8, 4, 1]})
    assert cfg.as_dict()["dtype"] == "f16"
    mixed = bmg.parse_config({"kernel": "gemm", "dtype": {"a": "bf16", "b": "s8"}, "wg": [256, 256, 32]})
    assert mixed.as_dict()["dtype"] == {"a": "bf16", "b": "s8"}
    assert bmg.parse_config(mixed.as_dict()) == mixed  # derived sg written out equals sg left out


def test_configs_are_frozen_hashable_and_labelled() -> None:
    for target, kernel in (
        ("sm90", "gemm"),
        ("sm90", "fa_prefill"),
        ("bmg", "gemm"),
        ("bmg", "fa_prefill"),
        ("pvc", "fa_decode"),
    ):
        model = get_target_model(target)
        cfg = model.default_config(kernel, "bf16")
        assert isinstance(cfg, TileConfig)
        assert hash(cfg) == hash(model.parse_config(cfg.as_dict()))
        assert cfg.label() and " " not in cfg.label()
        with pytest.raises(Exception):  # noqa: B017 - pydantic raises ValidationError on frozen models
            cfg.stages = 5  # type: ignore[misc]


def test_builder_derivation_reproduced() -> None:
    """sycl-tla's CollectiveBuilder (xe_mma_builder.inl:89-98) derivations, including illegal ones."""
    bmg = get_target_model("bmg")
    derive = lambda wg: bmg.parse_config({"kernel": "gemm", "wg": wg}).effective_sg()  # noqa: E731
    assert derive([256, 256, 32]) == (8, 4, 1)
    assert derive([512, 128, 32]) == (8, 4, 1)  # the generator's [16,2,1] is ignored
    assert derive([16, 64, 64]) == (2, 4, 1)
    assert derive([96, 256, 32]) == (8, 4, 1)  # illegal: 96 % 64
    assert derive([24, 256, 32]) == (3, 10, 1)  # illegal: 256 % 160
    res = bmg.check(bmg.parse_config({"kernel": "gemm", "wg": [96, 256, 32]}))
    assert not res.valid and "derived" in res.violations[0].message


def test_violation_messages_have_numbers() -> None:
    bmg = get_target_model("bmg")
    res = bmg.check(bmg.parse_config({"kernel": "gemm", "wg": [256, 200, 32], "sg": [8, 4, 1]}))
    assert isinstance(res, CheckResult)
    assert res.violations[0].rule == "xe.gemm.wg_n_divisible"
    assert "WG_N=200" in res.violations[0].message and "64" in res.violations[0].message


def test_grf_is_a_warning_not_a_rejection() -> None:
    bmg = get_target_model("bmg")
    res = bmg.check(bmg.parse_config({"kernel": "gemm", "wg": [512, 256, 32], "sg": [8, 4, 1]}))
    assert res.valid and [w.rule for w in res.warnings] == ["xe.grf_pressure"]


@pytest.mark.parametrize(
    ("target", "kernel", "dtype"),
    [
        ("sm90", "gemm", "bf16"),
        ("sm90", "grouped_gemm", "bf16"),
        ("sm90", "gemm", "e4m3"),
        ("bmg", "gemm", "bf16"),
        ("bmg", "gemm", "s8"),
        ("pvc", "grouped_gemm", "f16"),
        ("bmg", "moe_gemm", "bf16"),
        ("bmg", "fa_prefill", "bf16"),
        ("bmg", "fa_decode", "bf16"),
        ("sm90", "fa_prefill", "bf16"),
        ("sm90", "moe_gemm", "bf16"),
    ],
)
def test_enumeration_is_fast_legal_and_unique(target: str, kernel: str, dtype: str) -> None:
    model = get_target_model(target)
    start = time.perf_counter()
    configs = list(model.enumerate(kernel, dtype))
    elapsed = time.perf_counter() - start
    assert elapsed < 0.5, f"enumerating {target}/{kernel} took {elapsed:.2f}s"
    assert configs and len(set(configs)) == len(configs)
    assert model.space_size(kernel, dtype) == len(configs)
    for cfg in configs[:: max(1, len(configs) // 50)]:
        assert model.check(cfg).valid


def test_xe_gemm_space_has_thousands_fast() -> None:
    """'well under a second for GEMM spaces of thousands of points': all three Xe GEMM kinds together."""
    bmg = get_target_model("bmg")
    start = time.perf_counter()
    total = sum(bmg.space_size(k, "bf16") for k in ("gemm", "grouped_gemm", "moe_gemm"))
    assert total >= 1000
    assert time.perf_counter() - start < 1.0


def test_sm90_bf16_space_size_is_practical() -> None:
    """Every legal bf16 row/row GEMM config gets built for the H200 ground truth: keep it in 50-120."""
    sm90 = get_target_model("sm90")
    configs = list(sm90.enumerate("gemm", "bf16", {**GEMM_8K, "layout": "rr"}))
    assert 50 <= len(configs) <= 120
    assert {c.schedule for c in configs} == {"cooperative", "pingpong", "ws"}
    assert {c.cluster for c in configs} >= {(1, 1), (2, 1), (1, 2), (2, 2)}
    assert all(c.acc_registers <= MAX_ACC_REGISTERS for c in configs)


def test_sm90_skinny_gemm_gets_narrow_n_tiles() -> None:
    """M <= 64 (decode) GEMMs: 64-wide N tiles leave SMs idle (64 CTAs for N=4096 on 132 SMs), so the
    space adds WGMMA N=16/32 tiles there, and only there (not for grouped kernels or large M)."""
    sm90 = get_target_model("sm90")
    skinny = {"M": 16, "N": 4096, "K": 14336, "layout": "rr"}
    tiles_n = {c.tile[1] for c in sm90.enumerate("gemm", "bf16", skinny)}
    assert {16, 32} <= tiles_n
    assert all(sm90.check(c, skinny).valid for c in sm90.enumerate("gemm", "bf16", skinny) if c.tile[1] <= 32)
    assert {16, 32}.isdisjoint(
        {c.tile[1] for c in sm90.enumerate("gemm", "bf16", {**GEMM_8K, "layout": "rr"})}
    )
    assert {16, 32}.isdisjoint({c.tile[1] for c in sm90.enumerate("gemm", "bf16", {**skinny, "M": 65})})
    assert {16, 32}.isdisjoint({c.tile[1] for c in sm90.enumerate("grouped_gemm", "bf16")})


def test_problem_rules_alignment() -> None:
    sm90 = get_target_model("sm90")
    cfg = sm90.default_config("gemm", "bf16")
    assert sm90.check(cfg, {"M": 1000, "N": 4096, "K": 4096}).valid  # M needs no alignment for rr
    bad = sm90.check(cfg, {"M": 4096, "N": 4100, "K": 4096, "layout": "rr"})
    assert not bad.valid and "sm90.alignment" in bad.rules()
    assert list(sm90.enumerate("gemm", "bf16", {"M": 64, "N": 4100, "K": 4096})) == []
    bmg = get_target_model("bmg")
    xcfg = bmg.default_config("gemm", "bf16")
    assert "xe.alignment" in bmg.check(xcfg, {"M": 64, "N": 4096, "K": 4090}).rules()
    assert "xe.alignment_batch" in bmg.check(xcfg, {"M": 3, "N": 8, "K": 8, "batch": 2}).rules()


def test_defaults_cite_the_library() -> None:
    sm90 = get_target_model("sm90")
    d = sm90.default_config("gemm", "bf16")
    assert d.as_dict() == {
        "kernel": "gemm",
        "dtype": "bf16",
        "tile": [128, 128, 64],
        "cluster": [1, 1],
        "schedule": "cooperative",
        "epilogue": "nosmem",
        "stages": 0,
        "tile_scheduler": "persistent",
    }
    bmg = get_target_model("bmg")
    g = bmg.default_config("gemm", "bf16")
    assert (g.wg, g.effective_sg(), g.stages) == ((256, 256, 32), (8, 4, 1), 2)
    fa = bmg.default_config(
        "fa_prefill", "bf16", {"batch": 1, "num_heads_q": 8, "seq_qo": 1024, "seq_kv": 1024, "head_dim": 128}
    )
    assert fa.qk == (256, 32, 32) and fa.out == (256, 128)
    for model, kernel in (
        (sm90, "gemm"),
        (bmg, "gemm"),
        (bmg, "grouped_gemm"),
        (bmg, "moe_gemm"),
        (bmg, "fa_decode"),
    ):
        assert model.check(model.default_config(kernel, "bf16")).valid


def test_neighbours_are_legal_and_distinct() -> None:
    for target, kernel in (("sm90", "gemm"), ("bmg", "gemm"), ("bmg", "fa_prefill")):
        model = get_target_model(target)
        base = model.default_config(kernel, "bf16")
        near = model.neighbours(base)
        assert near and base not in near and len(set(near)) == len(near)
        assert all(model.check(n).valid for n in near)


def test_sm90_cost_model_reproduces_measured_order() -> None:
    """H200 8192^3 bf16 measurements (docs/reference/sm90_h200_measurements.md): 128x256 coop 2x1 (651-704) > 128x128 pp 1x2 (573)
    > 128x128 coop (556) > ws (525) > 64x256 pp (376).  Estimates must rank them in that order and stay below peak."""
    sm90 = get_target_model("sm90")
    order = [
        {"tile": [128, 256, 64], "cluster": [2, 1]},
        {"tile": [128, 128, 64], "cluster": [1, 2], "schedule": "pingpong"},
        {"tile": [128, 128, 64]},
        {"tile": [128, 128, 64], "schedule": "ws"},
        {"tile": [64, 256, 64], "schedule": "pingpong"},
    ]
    times = [sm90.estimate_time_s(sm90.parse_config(c), GEMM_8K) for c in order]
    assert times == sorted(times)
    flops = 2 * 8192**3
    assert all(flops / t / 1e12 < 989.4 for t in times)


def test_cost_model_wave_quantization_and_small_m() -> None:
    sm90 = get_target_model("sm90")
    cfg = sm90.parse_config({"tile": [128, 128, 64]})
    # 132 tiles fill one wave, 133 need two: the second costs (nearly) a whole wave
    one = sm90.estimate_time_s(cfg, {"M": 128 * 12, "N": 128 * 11, "K": 8192})
    two = sm90.estimate_time_s(cfg, {"M": 128 * 12 + 1, "N": 128 * 11, "K": 8192})
    assert two > 1.6 * one
    # a 16-row GEMM is memory-bound: its time follows bytes, not the 128-row tile's FLOPs
    t = sm90.estimate_time_s(cfg, {"M": 16, "N": 4096, "K": 14336})
    assert t > (4096 * 14336 * 2) / 4.8e12


def test_rank_puts_small_tiles_first_for_small_problems() -> None:
    bmg = get_target_model("bmg")
    best_small = bmg.rank("gemm", "bf16", {"M": 64, "N": 1024, "K": 1024}, top=1)[0][1]
    best_big = bmg.rank("gemm", "bf16", GEMM_8K, top=1)[0][1]
    assert best_small.wg[0] * best_small.wg[1] <= best_big.wg[0] * best_big.wg[1]


def test_sm90_fmha_cost_model_reproduces_measured_order() -> None:
    """H200 example-88 runs (docs/reference/sm90_h200_measurements.md), b4 h32 q=k=8192 d64: tma 64x128 (476) > pingpong 128x64
    (368) > cooperative 128x64 (341); the softmax, not the MMAs, limits the warp-specialized kernels there."""
    sm90 = get_target_model("sm90")
    problem = {
        "batch": 4,
        "num_heads_q": 32,
        "num_heads_kv": 32,
        "seq_qo": 8192,
        "seq_kv": 8192,
        "head_dim": 64,
    }
    order = [
        {"kernel": "fa_prefill", "tile": [64, 128, 64], "schedule": "tma"},
        {"kernel": "fa_prefill", "tile": [128, 64, 64], "schedule": "pingpong"},
        {"kernel": "fa_prefill", "tile": [128, 64, 64], "schedule": "cooperative"},
    ]
    times = [sm90.estimate_time_s(sm90.parse_config(c), problem) for c in order]
    assert times == sorted(times)


def test_sm90_moe_is_ptr_array_grouped() -> None:
    sm90 = get_target_model("sm90")
    problem = {"num_experts": 4, "tokens": [0, 100, 3000, 996], "N": 2048, "K": 1024, "layout": "rc"}
    configs = list(sm90.enumerate("moe_gemm", "bf16", problem))
    assert configs and {c.schedule for c in configs} <= {"cooperative", "pingpong"}
    ws = sm90.parse_config({"kernel": "moe_gemm", "tile": [128, 128, 64], "schedule": "ws"})
    assert "sm90.grouped_schedule" in sm90.check(ws).rules()
    assert sm90.estimate_time_s(configs[0], problem) > 0


def test_every_rule_id_is_documented() -> None:
    """docs/hw_models.md lists every rule id the models can emit (ids are a stable contract)."""
    import re

    root = REPO
    source = "".join(p.read_text() for p in (root / "hw_models").rglob("*.py"))
    ids = set(re.findall(r'"((?:xe|sm90)\.[a-z0-9_.]+)"', source))
    docs = (root / "docs" / "hw_models.md").read_text()
    missing = sorted(i for i in ids if f"`{i}`" not in docs)
    assert len(ids) > 50 and not missing, missing


def test_validation_set_matches_the_model() -> None:
    """benchmarks/sm90_model_validation_configs.yaml (built and run on the H200) agrees with the model."""

    import yaml

    path = REPO / "benchmarks" / "sm90_model_validation_configs.yaml"
    doc = yaml.safe_load(path.read_text())
    sm90 = get_target_model("sm90")
    assert len(doc["accepted"]) >= 30 and len(doc["rejected"]) >= 8
    schedules = set()
    for entry in doc["accepted"]:
        cfg = sm90.parse_config(entry["config"])
        assert sm90.check(cfg, doc["problem"]).valid, entry["label"]
        assert cfg.label() == entry["label"]
        schedules.add(cfg.schedule)
    assert schedules == {"cooperative", "pingpong", "ws"}
    for entry in doc["rejected"]:
        res = sm90.check(sm90.parse_config(entry["config"]), doc["problem"])
        assert not res.valid and set(entry["rules"]) <= set(res.rules()), entry["label"]
        assert entry["predicted"]


def test_problem_dtype_must_match_config() -> None:
    sm90 = get_target_model("sm90")
    cfg = sm90.default_config("gemm", "bf16")
    assert sm90.check(cfg, {**GEMM_8K, "dtype": "bf16"}).valid
    assert "sm90.dtype_mismatch" in sm90.check(cfg, {**GEMM_8K, "dtype": "fp16"}).rules()
    bmg = get_target_model("bmg")
    xcfg = bmg.default_config("gemm", "bf16")
    assert "xe.dtype_mismatch" in bmg.check(xcfg, {**GEMM_8K, "dtype": {"a": "bf16", "b": "s8"}}).rules()


def test_calibration_recovers_per_schedule_factors() -> None:
    """Synthetic 'measurements' = estimate x a known factor per schedule: the fit recovers the factors, and
    the calibrated model re-ranks across schedules accordingly."""
    from kernelpilot.hw_models.calibration import CalibratedModel, fit_scales

    sm90 = get_target_model("sm90")
    problems = [GEMM_8K, {"M": 4096, "N": 4096, "K": 4096}, {"M": 1024, "N": 8192, "K": 4096}]
    truth = {"cooperative": 1.3, "pingpong": 0.8, "ws": 1.0}
    configs = list(sm90.enumerate("gemm", "bf16"))[:40]
    records = [(c, p, sm90.estimate_time_s(c, p) * truth[c.schedule]) for c in configs for p in problems]
    records.append((configs[0], GEMM_8K, float("nan")))  # a failed run is skipped, not fitted
    scales = fit_scales(sm90, records)
    for sched, factor in truth.items():
        if f"gemm/{sched}" in scales:
            assert scales[f"gemm/{sched}"] == pytest.approx(factor, rel=1e-9)
    calibrated = CalibratedModel(sm90, scales)
    cfg = configs[0]
    assert calibrated.estimate_time_s(cfg, GEMM_8K) == pytest.approx(
        sm90.estimate_time_s(cfg, GEMM_8K) * truth[cfg.schedule]
    )
    assert calibrated.name == "sm90" and calibrated.check(cfg).valid  # everything else delegates


def test_xe_cost_model_in_range_of_public_measurements() -> None:
    """Arc Pro B60: sycl-tla bf16 GEMM measured 72-82 TFLOP/s for M >= 256 (vllm-project/vllm-xpu-kernels
    PR #294).  The model's best estimate for a large GEMM must land near that band (60-90), and
    the library default must not beat the model's best."""
    bmg = get_target_model("bmg")
    problem = {"M": 4096, "N": 4096, "K": 4096}
    flops = 2 * 4096**3
    best_t, _ = bmg.rank("gemm", "bf16", problem, device="arc_pro_b60", top=1)[0]
    assert 60 <= flops / best_t / 1e12 <= 90
    default_t = bmg.estimate_time_s(bmg.default_config("gemm", "bf16"), problem, "arc_pro_b60")
    assert default_t >= best_t


def test_stage_model_matches_recorded_cutlass_builds() -> None:
    """tests/data/records/hw_models_sm90_compile_check.json records nvcc builds of accepted configs: each
    compiled without spills and CUTLASS chose exactly the stage count the model predicts."""
    import json

    from kernelpilot.hw_models.sm90.gemm import auto_stages

    path = REPO / "tests" / "data" / "records" / "hw_models_sm90_compile_check.json"
    rows = json.loads(path.read_text())["results"]
    sm90 = get_target_model("sm90")
    assert len(rows) >= 5
    for row in rows:
        cfg = sm90.parse_config(row["config"])
        assert sm90.check(cfg).valid and row["compiled"] and row["ptxas_spill_bytes"] == 0
        assert auto_stages(cfg) == row["cutlass_stages"], row["label"]

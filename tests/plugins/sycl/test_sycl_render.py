"""Every config the Xe models accept renders into a complete sycl-tla program (structural checks), and a
handful of programs match golden files byte for byte.

Regenerate the golden files after a deliberate template change with
``KP_UPDATE_GOLDEN=1 python -m pytest -q tests/plugins/sycl/test_sycl_render.py -k golden`` and review the diff.
"""

from __future__ import annotations

import json
import math
import os
import re

import pytest

from kernelpilot.dsl_plugins.sycl import dtypes, programs
from kernelpilot.dsl_plugins.sycl.kernels import all_kernels
from kernelpilot.hw_models.dtypes import parse_dtype
from kernelpilot.targets import get_target_model
from tests.support import REPO

GOLDEN = REPO / "tests" / "data" / "sycl" / "golden"
VERSION = "sycl-tla 0.9.1 (cutlass 4.2.1)"
KERNELS = {k.kind: k for k in all_kernels()}

GEMM_DTYPES = ["bf16", "f16", "tf32", "s8", "u8", "e4m3", "e5m2", "s4", "u4", "e2m1", {"a": "bf16", "b": "s8"}, {"a": "f16", "b": "u4"}, {"a": "f16", "b": "e5m2"}]  # fmt: skip
PROBLEMS = {
    "gemm": {"M": 4096, "N": 4096, "K": 4096},
    "grouped_gemm": {"shapes": [[512, 1024, 2048], [128, 4096, 512], [1024, 256, 1024]]},
    "moe_gemm": {"N": 2880, "K": 2880, "num_experts": 8, "total_tokens": 4096},
    "fa_prefill": {
        "head_dim": 128,
        "batch": 2,
        "num_heads_q": 32,
        "num_heads_kv": 8,
        "seq_qo": 4096,
        "seq_kv": 4096,
    },
    "fa_decode": {
        "head_dim": 128,
        "batch": 4,
        "num_heads_q": 32,
        "num_heads_kv": 8,
        "seq_qo": 1,
        "seq_kv": 4096,
    },
}
DTYPES = {
    "gemm": GEMM_DTYPES,
    "grouped_gemm": GEMM_DTYPES,
    "moe_gemm": ["bf16", "f16"],
    "fa_prefill": ["bf16", "f16", "e4m3", "e5m2"],
    "fa_decode": ["bf16", "f16", "e4m3", "e5m2"],
}
EXTRA_PROBLEMS = {  # other compile-time facts: causal, head dims, layouts, output types
    "gemm": [{"M": 4096, "N": 4096, "K": 4096, "layout": "cc", "out_dtype": "bf16"}],
    "fa_prefill": [
        {"head_dim": 64, "batch": 1, "num_heads_q": 16, "seq_qo": 2048, "seq_kv": 2048, "causal": True},
        {"head_dim": 192, "batch": 1, "num_heads_q": 8, "seq_qo": 1024, "seq_kv": 1024},
        {"head_dim": 96, "batch": 1, "num_heads_q": 8, "seq_qo": 1024, "seq_kv": 1024},
    ],
    "fa_decode": [
        {"head_dim": 64, "batch": 8, "num_heads_q": 64, "num_heads_kv": 8, "seq_kv": 8192, "causal": True}
    ],
}


def _cases():
    for target in ("bmg", "pvc"):
        for kind, dts in DTYPES.items():
            for dt in dts:
                yield pytest.param(
                    target, kind, dt, PROBLEMS[kind], id=f"{target}-{kind}-{parse_dtype(dt).label()}"
                )
            for i, extra in enumerate(EXTRA_PROBLEMS.get(kind, [])):
                yield pytest.param(target, kind, dts[0], extra, id=f"{target}-{kind}-extra{i}")


def _code_only(src: str) -> str:
    """Source without comments, raw JSON literal, strings and char literals (for bracket balance)."""
    src = re.sub(r'R"KPJSON\(.*?\)KPJSON"', '""', src, flags=re.S)
    src = re.sub(r'"(?:\\.|[^"\\])*"', '""', src)
    src = re.sub(r"'(?:\\.|[^'\\])'", "''", src)
    return re.sub(r"//[^\n]*", "", src)


def _cpp(name: str) -> str:
    return dtypes.CPP_TYPES[name]


def _check_gemm_like(kind: str, cfg, problem: dict, src: str) -> None:
    d = cfg.as_dict()
    wm, wn, wk = d["wg"]
    sgm, sgn, _ = d["sg"]
    tile = "WGTile" if kind == "moe_gemm" else "TileShape"
    assert f"using {tile} = Shape<_{wm}, _{wn}, _{wk}>;" in src
    assert f"Layout<Shape<_{sgm}, _{sgn}, _1>, Stride<_{sgn}, _1, _0>>" in src
    atom = cfg.atom()
    pair = parse_dtype(d["dtype"])
    acc = "int32_t" if dtypes.accumulator(pair) == "s32" else "float"
    # the model's DPAS atom (repeat count and operand types) is the one the program instantiates
    types = (
        f"{_cpp(atom.type_a)}" if atom.type_a == atom.type_b else f"{_cpp(atom.type_a)}, {_cpp(atom.type_b)}"
    )
    assert f"XE_DPAS_TT<{atom.m}, {acc}, {types}>" in src, (atom, re.findall(r"XE_DPAS_TT<[^>]*>", src))
    assert f"using ElementA = {_cpp(pair.a)};" in src
    assert f"using ElementB = {_cpp(pair.b)};" in src
    if kind == "moe_gemm":
        assert "MoE::MoEGEMM<void, void, void, 'R', 'R', 'R'>" in src
        assert "SchedulerTile = WGTile" in src
        return
    assert f"constexpr int PipelineStages = {d['stages']};" in src
    sched = d["schedule"]
    if kind == "grouped_gemm":
        assert "MainloopXeL1StagedGroup<PipelineStages>" in src and "cutlass::gemm::GroupScheduler" in src
    elif sched in ("streamk", "splitk"):
        assert "MainloopXeL1Staged<PipelineStages, cutlass::gemm::KernelXeCooperative>" in src
        assert "cutlass::gemm::StreamKScheduler" in src
    elif sched == "persistent":
        assert "MainloopXeL1Staged<PipelineStages>;" in src and "cutlass::gemm::PersistentScheduler" in src
    else:
        assert "MainloopXeL1Staged<PipelineStages>;" in src
        assert "Scheduler" not in src.split("using GemmKernel")[1].split(";")[0]
    la = "ColumnMajor" if problem["layout"][0] == "c" else "RowMajor"
    assert f"using LayoutA = cutlass::layout::{la};" in src


def _check_fa(kind: str, cfg, problem: dict, src: str) -> None:
    d = cfg.as_dict()
    q, k, hd = d["qk"]
    assert f"using TileShapeQK = Shape<_{q}, _{k}, _{hd}>;" in src
    assert "using TileShapePV = Shape<_{}, _{}, _{}>;".format(*d["pv"]) in src
    assert "using TileShapeOutput = Shape<_{}, _{}>;".format(*d["out"]) in src
    assert "using SubgroupLayoutQK = Layout<Shape<_{}, _{}, _{}>>;".format(*d["sg_qk"]) in src
    assert "using SubgroupLayoutPV = Layout<Shape<_{}, _{}, _{}>>;".format(*d["sg_pv"]) in src
    assert f"constexpr int PipelineStages = {d['stages']};" in src
    assert f"constexpr bool kCausal = {'true' if d['causal'] else 'false'};" in src
    assert f"constexpr bool kPersistent = {'true' if d['persistent'] else 'false'};" in src
    assert ("using FMHAKernel = cutlass::fmha::kernel::XeFMHAFwdDynamicSplitKernel<" in src) == d[
        "persistent"
    ]
    assert ("using FMHAKernel = cutlass::fmha::kernel::XeFMHAFwdKernel<" in src) != d["persistent"]
    assert f"XE_DPAS_TT<{cfg.atom().m}, float, {_cpp(cfg.atom().type_a)}>" in src


@pytest.mark.parametrize(("target", "kind", "dtype", "dims"), list(_cases()))
def test_every_accepted_config_renders(target: str, kind: str, dtype, dims: dict) -> None:
    model = get_target_model(target)
    kernel = KERNELS[kind]
    problem = kernel.validate_problem(dims, dtype, "test")
    configs = list(model.enumerate(kind, problem["dtype"], problem))
    default = model.default_config(kind, problem["dtype"], problem)
    if model.check(default, problem).valid:  # (the model's own business whether its default is legal)
        configs.append(default)
    assert configs, f"the {target} model accepts no {kind} config for {dtype}: nothing was rendered"
    for cfg in configs:
        assert model.check(cfg, problem).valid
        sources = programs.render_program(kind, cfg, problem, target, VERSION)
        src = sources[f"{kind}.cpp"]
        assert set(sources) == {
            f"{kind}.cpp",
            programs.COMMON_HEADER,
            *programs.PATCHED_HEADERS.get(kind, ()),
        }
        assert "{{" not in src and "{%" not in src and "_None" not in src
        code = _code_only(src)
        for open_, close in ("{}", "()", "[]"):
            assert code.count(open_) == code.count(close), f"unbalanced {open_}{close} in {cfg.label()}"
        literal = re.search(r'R"KPJSON\((.*)\)KPJSON"', src).group(1)
        embedded = json.loads(literal)
        assert {k: v for k, v in embedded.items() if k != "resolved"} == {**cfg.as_dict(), "kernel": kind}
        assert f'kLibraryVersion = "{VERSION}"' in src
        if kind.startswith("fa_"):
            _check_fa(kind, cfg, problem, src)
        else:
            _check_gemm_like(kind, cfg, problem, src)


def test_schedules_render_their_kernel_and_runtime_variants() -> None:
    model = get_target_model("bmg")
    kernel = KERNELS["gemm"]
    problem = kernel.validate_problem({"M": 512, "N": 512, "K": 8192}, "bf16", "test")
    seen = set()
    for schedule in ("default", "persistent", "streamk", "splitk"):
        cfg = model.parse_config(
            {
                "kernel": "gemm",
                "dtype": "bf16",
                "wg": [256, 256, 32],
                "sg": [8, 4, 1],
                "stages": 2,
                "schedule": schedule,
            }
        )
        result = model.check(cfg, problem)
        if not result.valid:
            continue
        seen.add(schedule)
        src = programs.render_program("gemm", cfg, problem, "bmg", VERSION)["gemm.cpp"]
        variants = kernel.runtime_variants(cfg, problem)
        if schedule == "streamk":
            assert 'std::string mode = "streamk";' in src
            assert variants == [{"mode": "streamk", "splits": 1}, {"mode": "dp", "splits": 1}]
        elif schedule == "splitk":
            assert 'std::string mode = "splitk";' in src
            assert variants == [{"mode": "splitk", "splits": s} for s in (2, 4, 8)]  # 256 K-tiles allow all
        else:
            assert variants == [{}]
            assert "DecompositionMode" not in src
    assert {"default", "streamk"} <= seen


def test_builder_derived_layout_when_sg_is_omitted() -> None:
    """sg omitted: derive it exactly as sycl-tla's CollectiveBuilder does (xe_mma_builder.inl:89-98)."""
    assert programs.builder_sg_layout(256, 256) == (8, 4)
    assert programs.builder_sg_layout(512, 128) == (8, 4)  # the generator's [16,2,1] hint is ignored
    assert programs.builder_sg_layout(96, 256) == (
        8,
        4,
    )  # ... and can be illegal (96 % 64): the model rejects it
    assert programs.builder_sg_layout(24, 256) == (3, 10)
    src = programs.render_program(
        "gemm", {"wg": [128, 128, 32]}, {"dtype": "bf16", "layout": "rr"}, "bmg", VERSION
    )["gemm.cpp"]
    assert "Layout<Shape<_8, _4, _1>, Stride<_4, _1, _0>>" in src
    assert "constexpr int PipelineStages = 3;" in src  # builder stage count for KernelXe
    assert f"XE_DPAS_TT<{math.gcd(8, 128)}, float, cutlass::bfloat16_t>" in src


def test_legacy_atom_vocabulary_renders_on_the_current_api() -> None:
    model = get_target_model("bmg")
    cfg = model.parse_config(
        {
            "kernel": "gemm",
            "dtype": "bf16",
            "wg": [256, 256, 32],
            "sg": [8, 4, 1],
            "stages": 2,
            "mma_atom": "XE_8x16x16_F32BF16BF16F32_TT",
        }
    )
    src = programs.render_program("gemm", cfg, {"dtype": "bf16", "layout": "rr"}, "bmg", VERSION)["gemm.cpp"]
    assert "XE_DPAS_TT<8, float, cutlass::bfloat16_t>" in src
    assert "XE_8x16x16" not in src.split("*/")[-1].split("// Config")[0]


def test_dpas_selection_follows_the_builder() -> None:
    p = parse_dtype
    assert dtypes.dpas_op(8, p("bf16")) == "XE_DPAS_TT<8, float, cutlass::bfloat16_t>"
    assert dtypes.dpas_op(4, p("tf32")) == "XE_DPAS_TT<4, float, cutlass::tfloat32_t>"
    assert dtypes.dpas_op(8, p("s8")) == "XE_DPAS_TT<8, int32_t, int8_t>"
    assert dtypes.dpas_op(8, p({"a": "u8", "b": "s4"})) == "XE_DPAS_TT<8, int32_t, uint8_t, cutlass::int4b_t>"
    # no fp8 / mixed float DPAS: upconvert to bf16 when A is bf16, else to f16 (xe_mma_builder.inl:44-53)
    assert dtypes.dpas_op(8, p("e4m3")) == "XE_DPAS_TT<8, float, cutlass::half_t>"
    assert dtypes.dpas_op(8, p({"a": "bf16", "b": "s8"})) == "XE_DPAS_TT<8, float, cutlass::bfloat16_t>"
    assert dtypes.dpas_op(2, p({"a": "f16", "b": "u4"})) == "XE_DPAS_TT<2, float, cutlass::half_t>"


GOLDEN_CASES = {
    "gemm_bf16_default_bmg": ("gemm", "bmg", {"M": 4096, "N": 4096, "K": 4096}, "bf16", None),
    "gemm_s8_splitk_rc_pvc": ("gemm", "pvc", {"M": 1024, "N": 2048, "K": 8192, "layout": "rc"}, "s8",
                              {"wg": [128, 256, 64], "sg": [4, 8, 1], "stages": 3, "schedule": "splitk"}),
    "grouped_gemm_f16_bmg": ("grouped_gemm", "bmg", {"shapes": [[256, 512, 1024], [64, 1024, 256]]}, "f16", None),
    "moe_gemm_bf16_bmg": ("moe_gemm", "bmg", {"N": 2880, "K": 2880, "num_experts": 32, "total_tokens": 8192}, "bf16", None),
    "fa_prefill_bf16_causal_hd128_bmg": ("fa_prefill", "bmg", {"head_dim": 128, "batch": 1, "num_heads_q": 32, "num_heads_kv": 8, "seq_qo": 4096, "seq_kv": 4096, "causal": True}, "bf16", None),
    "fa_decode_e4m3_persistent_hd64_bmg": ("fa_decode", "bmg", {"head_dim": 64, "batch": 1, "num_heads_q": 8, "num_heads_kv": 1, "seq_kv": 4096, "persistent": True}, "e4m3",
                                           {"qk": [1, 256, 64], "pv": [1, 32, 256], "out": [1, 64], "sg_qk": [1, 16, 1], "head_dim": 64, "stages": 1, "persistent": True}),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_programs(name: str) -> None:
    kind, target, dims, dtype, raw = GOLDEN_CASES[name]
    model = get_target_model(target)
    problem = KERNELS[kind].validate_problem(dims, dtype, "golden")
    cfg = (
        model.default_config(kind, problem["dtype"], problem)
        if raw is None
        else model.parse_config({"kernel": kind, "dtype": dtype, **raw})
    )
    assert model.check(cfg, problem).valid, model.check(cfg, problem).violations
    src = programs.render_program(kind, cfg, problem, target, VERSION)[f"{kind}.cpp"]
    path = GOLDEN / f"{name}.cpp"
    if os.environ.get("KP_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(src)
    assert path.exists(), f"missing golden file {path}; run with KP_UPDATE_GOLDEN=1 once and review it"
    assert src == path.read_text(), f"{name}: rendered program differs from {path}"


def test_common_header_is_shipped_and_self_contained() -> None:
    header = programs.common_header()
    assert "namespace kp" in header and "kExitWrongResult = 4" in header and "kExitCannotRun = 3" in header
    includes = re.findall(r"#\s*include\s*[<\"]([^>\"]+)", header)
    # no oneMKL (sycl_tensor_fill.h / initialize_block.hpp pull in its device RNG): we fill data ourselves
    assert not [i for i in includes if "mkl" in i or "tensor_fill" in i or "initialize_block" in i]
    for kind in KERNELS:
        src = programs.template_text(programs.TEMPLATES[kind])
        assert "initialize_block" not in src and "sycl_tensor_fill" not in src and '"helper.h"' not in src

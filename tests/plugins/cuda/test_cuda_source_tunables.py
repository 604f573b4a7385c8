"""The spec's ``tunables:`` section, the search space, the source rewrite, the C++ rules stages and
analyzer, and the CUDA plugin's prompts/KB as the core loads them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kernelpilot.cpp_source.tunables import (
    apply_config,
    batches,
    check_constraint,
    current_values,
    parse_tunables,
    search_order,
    spec_tunables,
)
from kernelpilot.dsl_plugins.cuda.pipeline_stages import (
    CudaAutotuneStage,
    CudaSourceAnalyzer,
    RestrictPointersStage,
    restrict_pointers,
)
from kernelpilot.errors import InputError
from kernelpilot.pipeline.contracts import ISSUE_CATEGORIES, StageContext
from kernelpilot.spec import load_spec, parse_spec
from tests.support import REPO

GEMM = REPO / "examples" / "cuda_gemm_bias_relu"
RMS = REPO / "examples" / "cuda_row_rms"


def context(
    example: Path, attempt: int = 0, variant: str = "bench-gpu", source: str | None = None
) -> StageContext:
    src = source if source is not None else (example / f"{example.name}.cu").read_text()
    return StageContext(
        stage="autotuning",
        dsl="cuda",
        device="cuda",
        original_source=src,
        current_source=src,
        issues=[],
        spec=load_spec(example / f"{example.name}.yaml"),
        variant=variant,
        settings=None,
        attempt=attempt,
    )


def test_spec_keeps_tunables_and_they_parse() -> None:
    spec = load_spec(RMS / "cuda_row_rms.yaml")
    t = spec_tunables(spec, "bench-gpu")
    assert t is not None and t.names == ["THREADS", "GROUP", "VEC"]
    assert t.parameters["THREADS"].role == "threads" and t.max_configs == 12
    assert t.size() == 4 * 5 * 3
    legal = t.legal_configs(dict(spec.resolve("bench-gpu").dims))
    assert all(c["THREADS"] % c["GROUP"] == 0 for c in legal) and len(legal) == 60


@pytest.mark.parametrize(
    ("data", "field", "words"),
    [
        ({"parameters": {"BM": [16]}, "max_config": 3}, "tunables.max_config", "allowed fields"),
        ({"parameters": {"BM": {"values": [16], "role": "warps"}}}, "tunables.parameters.BM.role", "threads"),
        ({"parameters": {"BM": []}}, "tunables.parameters.BM.values", "at least 1"),
        ({"parameters": {"BM": [16]}, "constraints": ["BM <"]}, "tunables.constraints[0]", "BM"),
        ({"parameters": {"BM": [16]}, "constraints": ["BM * Q <= 4"]}, "tunables.constraints[0]", "Q"),
        ({"parameters": {"BM": [16]}, "constraints": ["BM + 1"]}, "tunables.constraints[0]", "comparison"),
        ({"parameters": {}}, "tunables.parameters", "at least 1"),
    ],
)
def test_bad_tunables_name_file_and_field(data: dict, field: str, words: str) -> None:
    with pytest.raises(InputError) as err:
        parse_tunables(data, path="spec.yaml", dims={"M": 64})
    assert err.value.file == "spec.yaml" and err.value.field == field
    assert words in str(err.value)


def test_bad_tunables_inside_a_spec_file_are_reported_at_use(tmp_path: Path) -> None:
    data = yaml.safe_load((RMS / "cuda_row_rms.yaml").read_text())
    data["tunables"]["parameters"]["VEC"] = {"values": [1, 2], "kind": "x"}
    spec = parse_spec(data, path=str(tmp_path / "s.yaml"))
    with pytest.raises(InputError, match="s.yaml") as err:
        spec_tunables(spec, "ci")
    assert err.value.field == "tunables.parameters.VEC.kind"


def test_constraints_are_evaluated_over_the_ast_only() -> None:
    scope = {"BM": 64, "BK": 16, "M": 100}
    assert check_constraint("BM * BK <= 1024 and M % 4 == 0", scope)
    assert not check_constraint("BM > M or BK == 8", scope)
    assert check_constraint("not BM == 32", scope)
    assert check_constraint("16 <= BM <= 128", scope)
    for evil in ("__import__('os').system('true') == 0", "BM.bit_length() > 1", "[BM][0] < 2"):
        with pytest.raises(ValueError):
            check_constraint(evil, scope)


def test_threads_role_enforces_the_hardware_rule() -> None:
    t = parse_tunables({"parameters": {"T": {"values": [16, 32, 48, 1024, 2048], "role": "threads"}}})
    assert [c["T"] for c in t.legal_configs({})] == [32, 1024]
    assert "multiple of 32" in t.violations({"T": 48}, {})[0]
    xe = parse_tunables(
        {
            "parameters": {"T": {"values": [16, 48, 512, 1024], "role": "threads"}},
            "thread_multiple": 16,
            "max_threads": 512,
        }
    )
    assert [c["T"] for c in xe.legal_configs({})] == [16, 48, 512]


def test_read_and_rewrite_defines_and_constexpr() -> None:
    source = "#ifndef BM\n#define BM 16  // rows\n#endif\nconstexpr int BK = 8;\n#define OTHER 3\n"
    assert current_values(source, ["BM", "BK", "TN"]) == {"BM": 16, "BK": 8, "TN": None}
    new = apply_config(source, {"BM": 128, "BK": 32})
    assert "#define BM 128  // rows" in new and "constexpr int BK = 32;" in new and "#define OTHER 3" in new
    with pytest.raises(ValueError, match="TN"):
        apply_config(source, {"TN": 4})


def test_search_order_is_deterministic_legal_and_starts_near_the_current_config() -> None:
    spec = load_spec(RMS / "cuda_row_rms.yaml")
    t = spec_tunables(spec, "bench-gpu")
    assert t is not None
    dims = dict(spec.resolve("bench-gpu").dims)
    start = {"THREADS": 128, "GROUP": 1, "VEC": 1}
    order = search_order(t, dims, start)
    assert order == search_order(t, dims, start)  # same every run
    assert start not in order and len(order) == 59
    assert sum(order[0][k] != start[k] for k in start) == 1  # a neighbour first
    assert all(not t.violations(c, dims) for c in order)
    assert [len(b) for b in batches(order, 12)] == [12, 12, 12, 12, 11]


def test_autotune_stage_proposes_batches_of_rewritten_sources() -> None:
    stage = CudaAutotuneStage()
    first = stage.propose(context(GEMM, 0))
    second = stage.propose(context(GEMM, 1))
    assert len(first) == 12 and len(second) == 12 and not set(first) & set(second)
    for code in first:
        values = current_values(code, ["BM", "BN", "BK", "TM", "TN"])
        threads = (values["BM"] // values["TM"]) * (values["BN"] // values["TN"])
        assert 64 <= threads <= 256 and (values["BM"] + values["BN"]) * values["BK"] * 4 <= 48 * 1024
    legal = 135  # GEMM spec: 243 combinations, 135 satisfy the constraints
    last = -(-legal // 12)
    assert stage.propose(context(GEMM, last)) == []


def test_autotune_stage_explains_what_is_missing() -> None:
    ctx = context(RMS, source="#define THREADS 128\nKP_EXPORT int kp_forward();\n")
    with pytest.raises(ValueError, match="GROUP, VEC"):
        CudaAutotuneStage().propose(ctx)
    spec = load_spec(REPO / "examples" / "softmax" / "softmax.yaml")
    ctx.spec, ctx.variant = spec, "ci"
    with pytest.raises(ValueError, match="no 'tunables:'"):
        CudaAutotuneStage().propose(ctx)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")
def test_rewritten_candidates_still_compile() -> None:
    from kernelpilot.dsl_plugins.cuda.source_build import BuildOptions, check_syntax

    candidates = CudaAutotuneStage().propose(context(GEMM, 0))
    assert check_syntax(candidates[0], Path("/tmp") / "kp_test_syntax", BuildOptions()) == []
    restricted = RestrictPointersStage().propose(context(RMS))
    assert len(restricted) == 1 and "const float* __restrict__ x" in restricted[0]
    assert check_syntax(restricted[0], Path("/tmp") / "kp_test_syntax", BuildOptions()) == []


def test_restrict_rewrite_handles_launch_bounds_and_leaves_restricted_pointers() -> None:
    src = (
        "__global__ void __launch_bounds__((BM / TM) * 2) k(const float* a, float * __restrict__ b, int n) {}"
    )
    new, n = restrict_pointers(src)
    assert n == 1 and "const float* __restrict__ a" in new and "float * __restrict__ b" in new
    assert restrict_pointers(new) == (new, 0)


def test_analyzer_maps_cpp_findings_onto_stage_categories() -> None:
    issues = CudaSourceAnalyzer().analyze((RMS / "cuda_row_rms.cu").read_text())
    categories = {i.category for i in issues}
    assert {"hardcoded_block_size", "redundant_loads"} <= categories
    assert all(i.category in ISSUE_CATEGORIES for i in issues)
    bad = "// double in a comment is fine\n__global__ void k(double* x) { cudaDeviceSynchronize(); }\n"
    found = {(i.category, i.line) for i in CudaSourceAnalyzer().analyze(bad)}
    assert ("float64_usage", 2) in found and ("host_device_sync", 2) in found
    assert ("device_tuning", 2) in found  # no __launch_bounds__


def test_prompts_render_and_knowledge_loads_through_the_core() -> None:
    from kernelpilot.engines.llm_stage import prompt_variables
    from kernelpilot.llm.knowledge import load_knowledge
    from kernelpilot.llm.prompts import prompt_dirs_for, render
    from kernelpilot.plugins import get_registry

    registry = get_registry()
    dirs = prompt_dirs_for(registry.collect("kp_prompt_dirs"), "cuda", "cuda")
    kb = load_knowledge(registry.collect("kp_knowledge_dirs"), "cuda", "cuda", "device_specific")
    assert any("wgmma" in k for k in kb) and any("kp_forward" in k for k in kb)
    assert not any("DPAS" in k for k in kb)  # the SYCL KB is not mixed in
    ctx = context(GEMM)
    ctx.stage, ctx.knowledge, ctx.feedback = "device_specific", kb, ["candidate t3 rejected: compile_error"]
    text = render(dirs, "device_specific", prompt_variables(ctx))
    assert "kp_forward" in text and "sm_90a" in text and "t3 rejected" in text and "BM" in text
    analysis = render(dirs, None, prompt_variables(ctx))
    assert "Hopper" in analysis


def test_dtype_fix_rules_stage_rewrites_code_not_comments_or_strings() -> None:
    from kernelpilot.cpp_source.stages import double_to_float
    from kernelpilot.dsl_plugins.cuda.pipeline_stages import CudaDoubleToFloatStage

    src = (
        "// double stays in comments 1.0\n"
        '__global__ void k(const double* x, double* y) { double a = 1.0 + 2.5e-3 * x[0] + 3.; const char* s = "double 1.0";'
        " y[0] = a * .5 + 1e5 + 7; float f = 2.0f; }\n"
    )
    both, n = double_to_float(src, literals=True)
    assert "const float* x, float* y" in both and "float a = 1.0f + 2.5e-3f * x[0] + 3.f;" in both
    assert "a * .5f + 1e5f + 7;" in both and "2.0f;" in both and "2.0ff" not in both
    assert both.startswith("// double stays in comments 1.0") and '"double 1.0"' in both
    types_only, _ = double_to_float(src, literals=False)
    assert "float a = 1.0 + 2.5e-3" in types_only
    ctx = context(RMS, source=src)
    ctx.stage = "dtype_fix"
    assert CudaDoubleToFloatStage().propose(ctx) == [both]
    ctx.attempt = 1
    assert CudaDoubleToFloatStage().propose(ctx) == [types_only]
    ctx.attempt, ctx.current_source = 0, both
    assert CudaDoubleToFloatStage().propose(ctx) == []  # nothing left to do

"""Static analysis rules, categories, planning, noise, KB selection and prompt lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.errors import InputError
from kernelpilot.llm.knowledge import load_knowledge
from kernelpilot.llm.prompts import PromptError, find_template, render
from kernelpilot.pipeline.contracts import ISSUE_CATEGORIES, STAGE_ORDER, Issue
from kernelpilot.pipeline.noise import MIN_NOISE, estimate_noise, is_faster
from kernelpilot.pipeline.planner import make_plan, parse_stages
from kernelpilot.pipeline.static_analysis import analyze_python_kernel, static_issues
from kernelpilot.plugin_types import ResourceDir

NAIVE = """
import torch
import triton
import triton.language as tl

@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    a = tl.load(a_ptr + offs_m[:, None] * K + offs_k[None, :])
    b = tl.load(b_ptr + offs_k[:, None] * N + offs_n[None, :])
    acc = tl.sum(a[:, :, None] * b[None, :, :], axis=1)

@triton.jit
def act(x_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))  # plain 1-D access

class Model(torch.nn.Module):
    def forward(self, a, b):
        c = torch.empty(1)
        mm[(1,)](a, b, c, 1, 1, 1, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_warps=4)
        act[(1,)](c, BLOCK=128)
        scale = c.sum().item()
        return torch.relu(c) * scale
"""

TUNED = """
import torch
import triton
import triton.language as tl

@triton.autotune(configs=[triton.Config({"BLOCK": 128})], key=["n"])
@triton.jit
def k(x_ptr, n, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))  # float32 only; mentions tl.float64 in a comment

class Model(torch.nn.Module):
    def forward(self, x):
        k[lambda meta: (1,)](x, x.numel())
        return x
"""


def _cats(source: str, dsl: str = "triton") -> dict[str, list[Issue]]:
    found: dict[str, list[Issue]] = {}
    for issue in analyze_python_kernel(source, dsl):
        found.setdefault(issue.category, []).append(issue)
    return found


def test_static_rules_find_what_is_there() -> None:
    cats = _cats(NAIVE)
    assert {i.message.split("`")[1] for i in cats["missing_autotune"]} == {"mm", "act"}
    assert sorted(i.message.split("fixes ")[1] for i in cats["hardcoded_block_size"]) == [
        "BLOCK=128",
        "BLOCK_K=32",
        "BLOCK_M=64",
        "BLOCK_N=64",
    ]
    assert [i.message.split("fixes ")[1] for i in cats["hardcoded_launch_config"]] == ["num_warps=4"]
    assert "mm" in cats["tensor_cores_unused"][0].message and len(cats["tensor_cores_unused"]) == 1
    assert [i.message.split("`")[1] for i in cats["manual_pointer_arithmetic"]] == ["mm"]
    assert "2 kernels" in cats["extra_kernel_launches"][0].message
    assert "torch.relu" in cats["unfused_operations"][0].message
    assert ".item()" in cats["host_device_sync"][0].message
    assert cats["host_device_sync"][0].line == NAIVE.splitlines().index("        scale = c.sum().item()") + 1
    assert all(i.category in ISSUE_CATEGORIES and i.stage in STAGE_ORDER for v in cats.values() for i in v)


def test_static_rules_stay_quiet_on_a_tuned_kernel() -> None:
    assert analyze_python_kernel(TUNED) == []  # a comment that mentions tl.float64 is not a use
    assert analyze_python_kernel("def broken(:\n") == []  # unparsable: the validator reports it
    assert "missing_autotune" not in _cats(NAIVE, dsl="gluon")  # Gluon has no triton.autotune


def test_plugin_analyzers_are_added_and_deduplicated() -> None:
    class Extra:
        dsl = "triton"
        stage = "analysis"

        def analyze(self, source: str) -> list[Issue]:
            return [Issue("open_ended", "try split-K"), Issue("open_ended", "try split-K")]

    class OtherDsl(Extra):
        dsl = "sycl"

    issues = static_issues(TUNED, "triton", [Extra(), OtherDsl()])
    assert [(i.category, i.message) for i in issues] == [("open_ended", "try split-K")]
    assert static_issues("int main() {}", "cuda", []) == []  # no Python rules for C++ DSLs


def test_plan_order_selection_and_skips() -> None:
    issues = [Issue("missing_autotune", "a"), Issue("float64_usage", "b"), Issue("unfused_operations", "c")]
    plan = make_plan(issues, None, {"autotuning", "dtype_fix"})
    assert [p.stage for p in plan.stages] == ["dtype_fix", "autotuning"]  # dependency order, not input order
    assert plan.skipped == {"fusion": "no implementation for this DSL and engine"}
    plan = make_plan(issues, ["autotuning", "discovery"], {"autotuning", "dtype_fix", "discovery"})
    assert [(p.stage, p.reason) for p in plan.stages] == [
        ("autotuning", "1 issue(s)"),
        ("discovery", "requested with --stages (no issue detected)"),
    ]
    assert "not selected" in plan.skipped["dtype_fix"]
    assert parse_stages("all") == list(STAGE_ORDER) and parse_stages(None) is None
    with pytest.raises(InputError, match="allowed: algorithmic"):
        parse_stages("fusion,warp_magic")


def test_noise_estimate() -> None:
    assert estimate_noise([10.0]) == MIN_NOISE
    assert estimate_noise([10.0, 10.2, 9.9]) == pytest.approx(0.03)
    assert estimate_noise([10.0, 10.01], executor_floor=0.02) == 0.02
    assert estimate_noise([1.0, 5.0, 2.0]) == 0.5  # capped
    assert is_faster(9.6, 10.0, 0.03) and not is_faster(9.8, 10.0, 0.03)


def test_knowledge_selection(tmp_path: Path) -> None:
    kb = tmp_path / "triton"
    (kb / "common").mkdir(parents=True)
    (kb / "cuda" / "autotuning").mkdir(parents=True)
    (kb / "xpu").mkdir(parents=True)
    (kb / "common" / "patterns.yaml").write_text(
        "constraints:\n  - {id: c1, name: pow2, description: block sizes are powers of two, stages: [autotuning]}\n"
        "patterns:\n  - {id: p1, name: fp32, description: use fp32, stage: dtype_fix}\n"
        "  - {id: p2, name: general, description: applies everywhere}\n"
    )
    (kb / "cuda" / "autotuning" / "hopper.md").write_text("Hopper: 128x128x64 tiles, 8 warps")
    (kb / "cuda" / "dtype_fix_notes.md").write_text("cuda dtype note")
    (kb / "xpu" / "autotuning.md").write_text("XPU: grf 256")
    (kb / "common" / "broken.yaml").write_text("patterns: [unclosed\n")
    dirs = [ResourceDir(dsl="triton", path=kb), ResourceDir(dsl="gluon", path=kb)]
    tune = load_knowledge(dirs[:1], "triton", "cuda", "autotuning")
    assert tune[0].startswith("[constraint] pow2")  # constraints first
    assert any("general" in s for s in tune) and any("Hopper" in s for s in tune)
    assert not any("XPU" in s or "fp32" in s or "cuda dtype" in s for s in tune)
    assert any("cuda dtype note" in s for s in load_knowledge(dirs[:1], "triton", "cuda", "dtype_fix"))
    assert load_knowledge(dirs[:1], "triton", "cuda", "autotuning", max_chars=10) == []


def test_prompt_lookup_and_strict_rendering(tmp_path: Path) -> None:
    generic, specific = tmp_path / "generic", tmp_path / "cuda"
    generic.mkdir()
    specific.mkdir()
    (generic / "optimize.md.j2").write_text("generic {{ stage }}")
    (specific / "stage_autotuning.md.j2").write_text("tune {{ current_source }}")
    (generic / "analysis.md.j2").write_text("{{ undefined_variable }}")
    folders = [specific, generic]
    assert find_template(folders, "autotuning") == specific / "stage_autotuning.md.j2"
    assert render(folders, "fusion", {"stage": "fusion"}) == "generic fusion"
    with pytest.raises(PromptError, match="failed to render"):
        render(folders, None, {})
    with pytest.raises(PromptError, match="no prompt template"):
        render([tmp_path / "nowhere"], "fusion", {})

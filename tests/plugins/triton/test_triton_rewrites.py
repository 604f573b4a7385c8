"""Rules-engine rewrites: what autotuning and dtype_fix change, and that the results still run correctly."""

from __future__ import annotations

import ast
import textwrap

import pytest

from kernelpilot.dsl_plugins.triton.rewrite.autotune import autotune_source, build_configs, plan_kernels
from kernelpilot.dsl_plugins.triton.stages import AutotuneRulesStage, DtypeFixRulesStage
from kernelpilot.pipeline.contracts import StageContext
from kernelpilot.python_source.dtype_fix import float64_to_float32
from tests.support import REPO


def example(name: str) -> str:
    return (REPO / "examples" / name / f"{name}.py").read_text()


def launch_keywords(source: str, kernel: str) -> list[str]:
    tree = ast.parse(source)
    calls = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Subscript)
        and ast.unparse(n.func.value) == kernel
    ]
    assert calls
    return [k.arg for c in calls for k in c.keywords]


def test_gemm_blocks_tuned_grid_uses_meta_and_launch_cleaned():
    out = autotune_source(example("gemm_bias_gelu"), "cuda")
    info = out.kernels["gemm_bias_gelu_kernel"]
    assert info["tuned"] == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}
    assert info["key"] == ["M", "N", "K"]  # shape arguments only: no pointers, no strides
    assert "@triton.autotune(" in out.source
    assert "lambda META: (triton.cdiv(M, META['BLOCK_M']), triton.cdiv(N, META['BLOCK_N']))" in out.source
    assert launch_keywords(out.source, "gemm_bias_gelu_kernel") == []
    # the author's original tile is one of the configs (never worse than the start point)
    assert (
        "triton.Config({'BLOCK_M': 32, 'BLOCK_N': 32, 'BLOCK_K': 32}, num_warps=4, num_stages=3)"
        in out.source
    )
    assert "# GELU, tanh approximation" in out.source  # comments outside the edits survive


def test_attention_literal_grid_tile_is_mapped_through_program_id():
    out = autotune_source(example("attention"), "cuda")
    assert out.kernels["attention_kernel"]["tuned"] == {"BLOCK_M": 16, "BLOCK_N": 16}
    assert "triton.cdiv(S, META['BLOCK_M'])" in out.source
    # HEAD_DIM comes from the shape: it stays a launch argument
    assert launch_keywords(out.source, "attention_kernel") == ["HEAD_DIM"]


def test_shape_derived_block_is_not_tuned_but_warps_are():
    out = autotune_source(example("softmax"), "cuda")
    info = out.kernels["softmax_kernel"]
    assert info["tuned"] == {} and info["configs"] > 1
    assert launch_keywords(out.source, "softmax_kernel") == ["BLOCK_SIZE"]  # num_warps=4 removed
    assert "num_warps=16" in out.source


def test_block_variable_used_elsewhere_stays_fixed():
    src = textwrap.dedent(
        """
        import torch, triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, partial_ptr, n, BLOCK: tl.constexpr):
            pid = tl.program_id(0)
            offs = pid * BLOCK + tl.arange(0, BLOCK)
            tl.store(partial_ptr + pid, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))

        class Model(torch.nn.Module):
            def forward(self, x):
                BLOCK = 128
                partial = torch.empty(triton.cdiv(x.numel(), BLOCK), device=x.device)
                k[(triton.cdiv(x.numel(), BLOCK),)](x, partial, x.numel(), BLOCK=BLOCK)
                return partial.sum()
        """
    )
    out = autotune_source(src, "cuda")
    assert out.kernels["k"]["tuned"] == {}
    assert any("BLOCK stays fixed" in n for n in out.notes)
    assert launch_keywords(out.source, "k") == ["BLOCK"]


def test_atomics_and_already_autotuned_are_left_alone():
    src = textwrap.dedent(
        """
        import triton
        import triton.language as tl

        @triton.jit
        def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.atomic_add(out_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0)))

        def run(x, out):
            k[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
        """
    )
    out = autotune_source(src, "cuda")
    assert not out.changed and any("atomics" in n for n in out.notes)
    tuned = autotune_source(example("gemm_bias_gelu"), "cuda").source
    assert not autotune_source(tuned, "cuda").changed


def test_config_lists_depend_on_device():
    tree = ast.parse(example("gemm_bias_gelu"))
    plan = plan_kernels(tree)["gemm_bias_gelu_kernel"]
    cuda = build_configs(plan, "cuda")
    xpu = build_configs(plan, "xpu")
    assert {c["num_warps"] for c in xpu[1:]} <= {8, 16, 32}
    assert max(c["num_warps"] for c in cuda) <= 8
    assert cuda[0]["kwargs"] == {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}
    assert len(build_configs(plan, "cpu")) <= 3


def test_dtype_fix_rewrites_code_not_prose():
    src = example("layernorm")
    out = float64_to_float32(src)
    assert out.changed and "tl.float64" not in out.source and out.replacements == 7
    assert "Statistics are accumulated in float64" in out.source  # docstring untouched
    host = "import torch\nx = torch.zeros(3, dtype=torch.float64).double()  # float64 note\ny = t.to(dtype='float64')\n"
    fixed = float64_to_float32(host).source
    assert (
        fixed
        == "import torch\nx = torch.zeros(3, dtype=torch.float32).float()  # float64 note\ny = t.to(dtype='float32')\n"
    )
    assert float64_to_float32(host, host_side=False).source == host


def context(stage: str, source: str, attempt: int = 0) -> StageContext:
    return StageContext(
        stage=stage,
        dsl="triton",
        device="cuda",
        original_source=source,
        current_source=source,
        issues=[],
        spec=None,
        variant="ci",
        settings=None,
        attempt=attempt,
    )


def test_stages_fall_back_then_stop():
    src = example("gemm_bias_gelu")
    stage = AutotuneRulesStage()
    first = stage.propose(context("autotuning", src, 0))
    second = stage.propose(context("autotuning", src, 1))
    assert first and second and first != second
    assert "'BLOCK_M': 128" in first[0] and "'BLOCK_M': 128" not in second[0]  # attempt 1: warps/stages only
    assert stage.propose(context("autotuning", src, 2)) == []
    dt = DtypeFixRulesStage()
    assert dt.propose(context("dtype_fix", src)) == []  # nothing to fix
    assert dt.propose(context("dtype_fix", example("softmax")))


@pytest.mark.parametrize("name", ["gemm_bias_gelu", "attention"])
def test_autotuned_kernel_runs_correctly_under_interpreter(name, tmp_path):
    """The rewritten file really runs (every config once, on the CPU) and matches the reference."""
    pytest.importorskip("triton")
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
    from kernelpilot.spec import load_spec

    folder = REPO / "examples" / name
    ex = TritonExecutor("triton", "cpu", None, timeout_s=300)
    ex.prepare(folder / f"{name}.py", load_spec(folder / f"{name}.yaml"), "ci")
    out = autotune_source(example(name), "cpu")
    ev = ex.evaluate(out.source, seed=11)
    assert ev.verdict == "correct", ev.message
    assert ev.extra["autotune_choice"]  # the autotuner really chose a config
    ex.close()


IN_PLACE = """
import torch
import triton
import triton.language as tl


@triton.jit
def add_one_kernel(buf_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(buf_ptr + offs, tl.load(buf_ptr + offs, mask=mask) + 1.0, mask=mask)


class Model(torch.nn.Module):
    def forward(self, x):
        out = x.clone()
        add_one_kernel[(triton.cdiv(out.numel(), 64),)](out, out.numel(), BLOCK=64)
        return out
"""


def test_in_place_kernels_get_restore_value_and_stay_correct(tmp_path):
    """Autotuning runs a kernel once per config; an in-place update would be applied several times
    unless the buffer is restored between runs."""
    pytest.importorskip("triton")
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor
    from kernelpilot.spec import parse_spec

    out = autotune_source(IN_PLACE, "cpu")
    assert out.kernels["add_one_kernel"]["restore_value"] == ["buf_ptr"]
    assert "restore_value=['buf_ptr']" in out.source
    (tmp_path / "inplace.py").write_text(IN_PLACE)
    (tmp_path / "inplace_pytorch.py").write_text(
        "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x + 1.0\n"
    )
    spec = parse_spec({"inputs": {"X": {"shape": ["N"], "dtype": "float32"}}, "ci": [{"dims": {"N": 200}}]})
    ex = TritonExecutor("triton", "cpu", None, timeout_s=120)
    ex.prepare(tmp_path / "inplace.py", spec, "ci")
    assert ex.evaluate(out.source, seed=1, time_it=False).correct
    # control: without restore_value the tuning runs add 1 once per config and the oracle catches it
    broken = "\n".join(line for line in out.source.splitlines() if "restore_value" not in line)
    assert ex.evaluate(broken, seed=1, time_it=False).verdict == "incorrect"
    ex.close()

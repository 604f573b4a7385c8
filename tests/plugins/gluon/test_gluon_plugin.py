"""Gluon plugin: hooks, executor sharing, validation, dtype_fix, and a real sm_90 cross-compile."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kernelpilot.dsl_plugins.gluon.executor import JIT_DECORATORS as GLUON_JIT
from kernelpilot.dsl_plugins.gluon.executor import GluonExecutor
from kernelpilot.dsl_plugins.triton.executor import JIT_DECORATORS as TRITON_JIT
from kernelpilot.pipeline.contracts import StageContext
from kernelpilot.python_source.dtype_fix import float64_to_float32
from kernelpilot.python_source.validate import validate_model_source
from kernelpilot.spec import load_spec
from tests.support import REPO

FOLDER = REPO / "examples" / "gluon_softmax"
SOURCE = (FOLDER / "gluon_softmax.py").read_text()


def test_hooks_register_executor_stages_prompts_and_kb():
    from kernelpilot.plugins import get_registry

    registry = get_registry()
    hook = registry.hook
    stages = [s for s in registry.collect("kp_stages") if getattr(s, "dsl", None) == "gluon"]
    assert [(s.stage, s.engine) for s in stages] == [
        ("dtype_fix", "rules")
    ]  # no autotune: layouts fix the warps
    assert any(
        d.dsl == "gluon" and (Path(d.path) / "optimize.md.j2").is_file()
        for d in registry.collect("kp_prompt_dirs")
    )
    assert any(
        d.dsl == "gluon" and (Path(d.path) / "common").is_dir() for d in registry.collect("kp_knowledge_dirs")
    )
    ex = hook.kp_executor(dsl="gluon", device="cuda", settings=None)
    assert isinstance(ex, GluonExecutor) and ex.dsl == "gluon"
    tri = hook.kp_executor(dsl="triton", device="cuda", settings=None)
    assert type(tri).__name__ == "TritonExecutor" and tri.dsl == "triton"


def test_validate_and_claims_distinguish_gluon_from_triton():
    assert validate_model_source(SOURCE, decorators=GLUON_JIT, kernel_label="@gluon.jit") == []
    assert any(
        "no @triton.jit" in p
        for p in validate_model_source(SOURCE, decorators=TRITON_JIT, kernel_label="@triton.jit")
    )
    from kernelpilot.dsl_plugins.gluon.executor import claims_file

    assert claims_file(FOLDER / "gluon_softmax.py", SOURCE)
    triton_src = (REPO / "examples/softmax/softmax.py").read_text()
    assert not claims_file(Path("softmax.py"), triton_src)


def test_cpu_evaluation_says_gluon_needs_a_gpu(tmp_path):
    ex = GluonExecutor(device="cpu")
    ex.prepare(FOLDER / "gluon_softmax.py", load_spec(FOLDER / "gluon_softmax.yaml"), "ci")
    ev = ex.evaluate(SOURCE, seed=0)
    assert ev.verdict == "runtime_error" and "interpreter" in ev.message
    assert "interpreter" in ex.runnable_on("cpu") and ex.runnable_on("cuda") is None
    ex.close()


def test_dtype_fix_stage_rewrites_gl_float64():
    from kernelpilot.dsl_plugins.gluon.stages import gluon_stages

    stage = gluon_stages()[0]
    ctx = StageContext(
        stage="dtype_fix",
        dsl="gluon",
        device="cuda",
        original_source=SOURCE,
        current_source=SOURCE,
        issues=[],
        spec=None,
        variant="ci",
        settings=None,
    )
    (fixed,) = stage.propose(ctx)
    assert "gl.float64" not in fixed and ".to(gl.float32)" in fixed
    assert float64_to_float32(fixed).changed is False


def _compile_for_sm90(source: str, tmp_path: Path, name: str):
    triton = pytest.importorskip("triton")
    try:
        from triton.backends.compiler import GPUTarget
        from triton.experimental.gluon._runtime import GluonASTSource
    except ImportError:
        pytest.skip("this Triton has no Gluon AST source for ahead-of-time compiles")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        module = __import__(name)
    finally:
        sys.path.remove(str(tmp_path))
    signature = {
        "out_ptr": "*fp16",
        "in_ptr": "*fp16",
        "in_row_stride": "i32",
        "out_row_stride": "i32",
        "n_cols": "i32",
        "BLOCK_SIZE": "constexpr",
        "WARPS": "constexpr",
    }
    src = GluonASTSource(module.softmax_kernel, signature, {"BLOCK_SIZE": 1024, "WARPS": 4})
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})


def test_example_and_its_dtype_fix_compile_for_hopper(tmp_path):
    """Ahead-of-time compile to sm_90 PTX (no GPU needed): both versions are legal Gluon, and the
    rewrite really removes the double-precision arithmetic from the generated code."""
    original = _compile_for_sm90(SOURCE, tmp_path, "kp_gluon_orig")
    fixed = _compile_for_sm90(float64_to_float32(SOURCE).source, tmp_path, "kp_gluon_fixed")
    f64_ops = re.compile(r"\b(?:add|sub|mul|div|fma|ex2|max)\.[a-z.]*f64\b")
    assert f64_ops.search(original.asm["ptx"]), "the float64 draft should compute in f64"
    assert not f64_ops.search(fixed.asm["ptx"])


@pytest.mark.gpu
def test_gluon_example_runs_and_matches_reference_on_gpu():
    ex = GluonExecutor(device="cuda", timeout_s=300)
    ex.prepare(FOLDER / "gluon_softmax.py", load_spec(FOLDER / "gluon_softmax.yaml"), "bench-gpu")
    ev = ex.evaluate(SOURCE, seed=0)
    assert ev.verdict == "correct", ev.message
    ex.close()

"""The shipped examples: specs load, kernels match their PyTorch references under the interpreter, and
the rules engine's stages (dtype_fix, then autotuning) produce kernels that still match."""

from __future__ import annotations

import pytest

from kernelpilot.dsl_plugins.triton.stages import AutotuneRulesStage, DtypeFixRulesStage
from kernelpilot.pipeline.contracts import StageContext
from kernelpilot.spec import load_spec
from tests.support import REPO

EXAMPLES = ["gemm_bias_gelu", "softmax", "layernorm", "attention"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_layout_and_specs(name):
    folder = REPO / "examples" / name
    assert (folder / f"{name}_pytorch.py").is_file()
    spec = load_spec(folder / f"{name}.yaml")
    assert {"ci", "bench-gpu"} <= set(spec.variants)
    for variant in spec.variants:
        assert spec.resolve(variant).flop, f"{variant} has a FLOP formula"
    source = (folder / f"{name}.py").read_text()
    assert "@triton.autotune" not in source  # shipped untuned on purpose


@pytest.mark.parametrize("name", EXAMPLES)
def test_example_and_rules_engine_output_match_reference(name):
    pytest.importorskip("triton")
    from kernelpilot.dsl_plugins.triton.executor import TritonExecutor

    folder = REPO / "examples" / name
    spec = load_spec(folder / f"{name}.yaml")
    ex = TritonExecutor("triton", "cpu", None, timeout_s=300)
    ex.prepare(folder / f"{name}.py", spec, "ci")
    source = (folder / f"{name}.py").read_text()
    base = ex.evaluate(source, seed=0, time_it=False)
    assert base.verdict == "correct", base.message
    assert ex.oracle_kind.startswith("pytorch reference")
    current = source
    applied = []
    for stage in (DtypeFixRulesStage(), AutotuneRulesStage()):
        ctx = StageContext(
            stage=stage.stage,
            dsl="triton",
            device="cpu",
            original_source=source,
            current_source=current,
            issues=[],
            spec=spec,
            variant="ci",
            settings=None,
        )
        for candidate in stage.propose(ctx):
            ev = ex.evaluate(candidate, seed=1, time_it=False)
            assert ev.verdict == "correct", f"{stage.stage}: {ev.message}"
            current = candidate
            applied.append(stage.stage)
    assert "autotuning" in applied
    assert ("dtype_fix" in applied) == (name in ("softmax", "layernorm"))
    ex.close()

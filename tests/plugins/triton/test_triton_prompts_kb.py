"""Prompt templates and knowledge base of the Triton and Gluon plugins, through the core's loaders
(the same StrictUndefined rendering and KB selection the LLM engine uses)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest
import yaml

from kernelpilot.pipeline.contracts import STAGE_ORDER, Issue, StageContext
from kernelpilot.plugin_types import ResourceDir
from kernelpilot.spec import load_spec
from tests.support import REPO

PROMPTS = {
    dsl: Path(str(files(f"kernelpilot.dsl_plugins.{dsl}").joinpath("prompts"))) for dsl in ("triton", "gluon")
}
KB = {dsl: Path(str(files("kernelpilot.knowledge_base").joinpath(dsl))) for dsl in ("triton", "gluon")}


def context(dsl: str, stage: str, device: str, **kw) -> StageContext:
    folder = REPO / "examples" / "softmax"
    source = (folder / "softmax.py").read_text()
    return StageContext(
        stage=stage,
        dsl=dsl,
        device=device,
        original_source=source,
        current_source=kw.get("current", source),
        issues=[Issue("float64_usage", "tl.float64 in softmax_kernel", line=21, suggestion="use float32")],
        spec=load_spec(folder / "softmax.yaml"),
        variant="bench-gpu",
        settings=None,
        feedback=kw.get("feedback", []),
        knowledge=["[pattern] example snippet"],
        attempt=kw.get("attempt", 0),
        prompt_dirs=[PROMPTS[dsl]],
    )


@pytest.mark.parametrize("dsl", ["triton", "gluon"])
@pytest.mark.parametrize("device", ["cuda", "xpu", "cpu"])
def test_every_stage_and_analysis_renders(dsl, device):
    from kernelpilot.engines.llm_stage import prompt_variables
    from kernelpilot.llm.prompts import find_template, render

    for stage in [None, *STAGE_ORDER]:
        ctx = context(
            dsl, stage or "", device, feedback=["attempt 0: incorrect: output 0 mismatch"], attempt=1
        )
        assert find_template([PROMPTS[dsl]], stage) is not None
        text = render([PROMPTS[dsl]], stage, prompt_variables(ctx))
        assert "softmax_kernel" in text and "variant bench-gpu" in text
        assert "tl.float64 in softmax_kernel" in text
        if stage is not None:
            assert "output 0 mismatch" in text and "[pattern] example snippet" in text
            assert "COMPLETE kernel file" in text


def test_stage_templates_carry_stage_specific_guidance():
    from kernelpilot.engines.llm_stage import prompt_variables
    from kernelpilot.llm.prompts import render

    autotune = render(
        [PROMPTS["triton"]], "autotuning", prompt_variables(context("triton", "autotuning", "cuda"))
    )
    assert "lambda META" in autotune and "Hopper" in autotune
    xpu = render([PROMPTS["triton"]], "autotuning", prompt_variables(context("triton", "autotuning", "xpu")))
    assert "Intel Xe" in xpu and "Hopper" not in xpu
    dtype = render([PROMPTS["triton"]], "dtype_fix", prompt_variables(context("triton", "dtype_fix", "cuda")))
    assert "float64" in dtype and "lambda META" not in dtype


@pytest.mark.parametrize("dsl", ["triton", "gluon"])
def test_kb_files_are_well_formed(dsl):
    files_ = sorted(KB[dsl].rglob("*.yaml"))
    assert files_
    for path in files_:
        data = yaml.safe_load(path.read_text())
        assert set(data) <= {"patterns", "constraints", "reference_kernels"}, path
        for entry in (
            data.get("patterns", []) + data.get("constraints", []) + data.get("reference_kernels", [])
        ):
            assert (
                entry.get("id") and (entry.get("name") or entry.get("file")) and entry.get("description")
            ), (
                path,
                entry,
            )
            stages = entry.get("stages", [])
            assert set(stages) <= set(STAGE_ORDER), (path, stages)


def test_kb_selection_by_stage_and_device():
    from kernelpilot.llm.knowledge import load_knowledge

    dirs = [ResourceDir(dsl="triton", path=KB["triton"])]
    cuda_tune = "\n".join(load_knowledge(dirs, "triton", "cuda", "autotuning"))
    xpu_tune = "\n".join(load_knowledge(dirs, "triton", "xpu", "autotuning"))
    cuda_dtype = "\n".join(load_knowledge(dirs, "triton", "cuda", "dtype_fix"))
    assert "Tensor-core tiles" in cuda_tune and "GEMM configs for Xe" not in cuda_tune
    assert "GEMM configs for Xe" in xpu_tune and "Tensor-core tiles" not in xpu_tune
    assert "float32 instead of float64" in cuda_dtype and "META grid" not in cuda_dtype
    assert "Every output element is written" in cuda_dtype  # constraints apply to every stage
    gluon = "\n".join(
        load_knowledge([ResourceDir(dsl="gluon", path=KB["gluon"])], "gluon", "cuda", "device_specific")
    )
    assert "TMA + wgmma" in gluon and "16 bytes per thread" in gluon

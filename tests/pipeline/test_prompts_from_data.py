"""What the model is shown, stage by stage, recorded from a scripted OpenAI-compatible server.

The run goes through the real plugin parts (the Triton plugin's templates, stages and knowledge base,
picked by the engine selection) and the real litellm client; only the executor (timings) and the
profiler (counters, parsed from the recorded-format fixture) are doubles.  Every stage's prompt must
carry the device catalogue's numbers for the H200, the problem's sizes, footprint, FLOPs, arithmetic
intensity and roofline class, the user's tuning settings and the profile summary; the algorithmic
stage also the PyTorch reference, the autotuning stage the rules engine's config list, and the
analysis the knowledge base's constraints.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from kernelpilot.pipeline.contracts import STAGE_ORDER
from kernelpilot.pipeline.runner import Pipeline, PipelineOptions
from kernelpilot.settings import load_settings
from kernelpilot.spec import load_spec
from tests.support import REPO
from tests.support.fake_llm_server import FakeLLMServer
from tests.support.pipeline_doubles import ScriptedExecutor

pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
PROFILE = REPO / "tests" / "data" / "profiles" / "ncu_raw.csv"


def _record_prompts(tmp_path: Path) -> dict[str, str]:
    from kernelpilot.engines.selection import implemented_stages
    from kernelpilot.llm.client import LLMClient
    from kernelpilot.pipeline.setup import plugin_parts
    from kernelpilot.plugins import get_registry
    from kernelpilot.profiling.ncu import parse_raw_csv

    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(REPO / "examples" / "softmax" / name, tmp_path / name)
    kernel = tmp_path / "softmax.py"
    kernel.write_text(kernel.read_text() + "# time=2.5\n")  # the scripted executor's timing
    source = kernel.read_text()
    server = FakeLLMServer().start()
    try:
        server.script(
            json.dumps({"issues": []}),
            *[json.dumps({"explanation": "unchanged", "code": source})] * len(STAGE_ORDER),
        )
        settings = load_settings(
            cli={
                "engine": "llm",
                "llm_model": "openai/fake-model",
                "openai_api_base": server.base_url,
                "openai_api_key": "sk-x",
                "llm_cache_dir": str(tmp_path / "cache"),
                "trials_dir": str(tmp_path / "trials"),
                "log_dir": str(tmp_path / "logs"),
                "hw_device": "h200",
                "default_num_warps": 8,
                "group_size_m": 8,
                "target_dtype": "bfloat16",
            },
            env_file=None,
        )
        parts = plugin_parts(get_registry(), "triton", "cuda")
        options = PipelineOptions(
            kernel_path=kernel, spec_path=tmp_path / "softmax.yaml", variant="bench-gpu", dsl="triton",
            device="cuda", engine="llm", output=tmp_path / "out.py", stages=list(STAGE_ORDER),
            noise_repeats=1, profiler="ncu",
        )  # fmt: skip
        Pipeline(
            settings,
            options,
            spec=load_spec(tmp_path / "softmax.yaml"),
            executor=ScriptedExecutor(),
            stage_impls=implemented_stages("llm", "triton", parts.stages, parts.prompt_dirs),
            analyzers=parts.analyzers,
            prompt_dirs=parts.prompt_dirs,
            knowledge_dirs=parts.knowledge_dirs,
            llm=LLMClient(settings, backoff_s=0.01),
            profile_fn=lambda code: parse_raw_csv(PROFILE.read_text()),
        ).run()
    finally:
        server.stop()
    prompts = [r["messages"][-1]["content"] for r in server.requests]
    assert len(prompts) == 1 + len(STAGE_ORDER)
    recorded = {"analysis": prompts[0], **dict(zip(STAGE_ORDER, prompts[1:], strict=True))}
    out = tmp_path / "prompts"
    out.mkdir()
    for name, text in recorded.items():  # kept for a look when a test fails
        (out / f"{name}.md").write_text(text)
    return recorded


def test_every_prompt_is_built_from_data(tmp_path: Path) -> None:
    prompts = _record_prompts(tmp_path)
    for name, text in prompts.items():
        # device catalogue (hw_models/catalogue.yaml, h200)
        assert "NVIDIA H200 (nvidia): 132 SMs at up to 1980 MHz" in text, name
        assert "memory 151.4 GB at 4800 GB/s; L2 50 MiB" in text, name
        assert "bf16 989.4" in text and "f32 66.9" in text, name
        assert "227 KiB shared memory/SLM, 256 KiB register file" in text, name
        assert "measured on this model: bf16 790 TFLOP/s, 4300 GB/s" in text, name
        # problem context from the spec variant (8192 x 8192 fp16, 5 FLOP and 4 bytes per element)
        assert "inputs: X[8192, 8192] float16 (134 MB)" in text, name
        assert "3.355e+08 FLOP per call" in text, name
        assert "arithmetic intensity 1.25 FLOP/byte (spec)" in text, name
        assert "**memory-bound**" in text and "roofline floor 0.0559 ms" in text, name
        assert "Model init args: (none)" in text, name
        assert "the original achieves 0.134 TFLOP/s" in text, name
        # hardware counters of the stage input
        assert "ncu: hottest kernel softmax_kernel" in text and "long_scoreboard 76%" in text, name
    for stage in STAGE_ORDER:
        text = prompts[stage]
        assert "num_warps 8 (your settings)" in text and "GROUP_SIZE_M 8" in text, stage
        assert "target dtype: bfloat16" in text, stage
        assert "tile M 128 (typical default)" in text, stage
    assert "torch.softmax(x.float(), dim=-1)" in prompts["algorithmic"]
    assert "torch.softmax(x.float(), dim=-1)" in prompts["analysis"]
    # the rules engine's list for this kernel: its own launch setting first, then the hint
    assert (
        "- softmax_kernel: {}, num_warps=4, num_stages=3\n- softmax_kernel: {}, num_warps=8, num_stages=3"
        in (prompts["autotuning"])
    )
    assert "Configs the rules engine derives" not in prompts["fusion"]
    assert "Power-of-two block shapes" in prompts["analysis"]  # KB constraints reach the analysis

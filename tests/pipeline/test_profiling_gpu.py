"""On an NVIDIA GPU with Nsight Compute: `skill profile --profiler ncu` parses a real ncu run of the
softmax example, and `optimize --profile ncu`'s summary reaches the prompts (scripted LLM server)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.support import REPO, run_cli
from tests.support.fake_llm_server import FakeLLMServer

EXAMPLE = REPO / "examples" / "softmax"
ARTIFACTS = os.environ.get("KP_GPU_ARTIFACTS")  # optional folder for the raw outputs (device runs)


def _ncu_or_skip() -> str:
    found = shutil.which(os.environ.get("NCU_BIN", "ncu"))
    if found is None:
        pytest.skip("ncu (Nsight Compute) not on PATH")
    return found


def _keep(name: str, text: str) -> None:
    if ARTIFACTS:
        Path(ARTIFACTS).mkdir(parents=True, exist_ok=True)
        (Path(ARTIFACTS) / name).write_text(text)


@pytest.mark.gpu
def test_skill_profile_with_ncu(tmp_path: Path) -> None:
    _ncu_or_skip()
    done = run_cli(
        "skill", "profile", str(EXAMPLE / "softmax.py"), "-s", str(EXAMPLE / "softmax.yaml"),
        "--variant", "bench-gpu", "--device", "cuda", "--profiler", "ncu", "--repeats", "1", "--json",
        cwd=tmp_path, timeout=300,
    )  # fmt: skip
    _keep("skill_profile_ncu.json", done.stdout + "\n" + done.stderr)
    assert done.returncode == 0, done.stderr[-3000:]
    counters = json.loads(done.stdout)["counters"]
    assert counters["tool"] == "ncu" and counters["primary"] == "softmax_kernel"
    top = next(k for k in counters["kernels"] if k["name"] == "softmax_kernel")
    for key in ("sm_throughput_pct", "dram_throughput_pct", "achieved_occupancy_pct", "l2_hit_rate_pct"):
        assert 0.0 <= top["metrics"][key] <= 100.0, key
    assert top["launches"] >= 1 and top["total_us"] > 0 and top["stalls"]
    assert counters["summary"].startswith("ncu: hottest kernel softmax_kernel")


@pytest.mark.gpu
@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_optimize_profile_summary_reaches_the_next_prompt(tmp_path: Path) -> None:
    _ncu_or_skip()
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    good = (tmp_path / "softmax.py").read_text().replace(".to(tl.float64)", ".to(tl.float32)")
    server = FakeLLMServer().start()
    try:
        server.script(
            json.dumps({"issues": []}),
            json.dumps({"explanation": "fp32 after max subtraction", "code": good}),
            json.dumps({"issues": []}),
        )
        done = run_cli(
            "optimize", "-i", "softmax.py", "-s", "softmax.yaml", "--variant", "bench-gpu", "--device", "cuda",
            "--engine", "llm", "--model", "openai/fake", "--api-base", server.base_url, "--api-key", "k",
            "--stages", "dtype_fix", "--noise-repeats", "1", "--profile", "ncu", "-o", "out.py", "--json",
            cwd=tmp_path, env={"LLM_CACHE_DIR": str(tmp_path / "cache")}, timeout=600,
        )  # fmt: skip
    finally:
        server.stop()
    prompts = [r["messages"][-1]["content"] for r in server.requests]
    _keep("optimize_profile_prompts.json", json.dumps(prompts, indent=1))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((tmp_path / json.loads(done.stdout)["record"]).read_text())
    _keep("optimize_profile_record.json", json.dumps(record, indent=1))
    assert record["profiles"] and record["profiles"][0]["primary"] == "softmax_kernel"
    summary = record["profiles"][0]["summary"]
    assert summary.splitlines()[0] in prompts[0]  # the analysis of the original
    assert summary.splitlines()[0] in prompts[1]  # the dtype_fix stage's prompt
    if len(record["profiles"]) > 1:  # the stage was accepted: the re-analysis sees the new counters
        assert record["profiles"][1]["summary"].splitlines()[0] in prompts[2]

"""`kernelpilot optimize --engine llm` as a user runs it: subprocess CLI -> real litellm -> scripted
OpenAI-compatible server on 127.0.0.1 -> the Triton plugin's prompt templates -> real executor under
TRITON_INTERPRET=1.  A second identical run resumes from the trial tree and the response cache without
a single new LLM request."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from tests.support import REPO, run_cli
from tests.support.fake_llm_server import FakeLLMServer

EXAMPLE = REPO / "examples" / "softmax"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")


def test_optimize_engine_llm_via_cli(tmp_path: Path) -> None:
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    good = (tmp_path / "softmax.py").read_text().replace(".to(tl.float64)", ".to(tl.float32)")
    server = FakeLLMServer().start()
    try:
        server.script(
            json.dumps({"issues": [{"category": "float64_usage", "message": "fp64 math", "line": 18}]}),
            json.dumps({"explanation": "fp32 is enough after max subtraction", "code": good}),
            json.dumps({"issues": []}),
        )
        args = [
            "optimize",
            "-i", "softmax.py", "-s", "softmax.yaml", "--variant", "ci", "--device", "cpu",
            "--engine", "llm", "--model", "openai/fake-model", "--api-base", server.base_url,
            "--api-key", "sk-cli-secret", "--stages", "dtype_fix", "--correctness-only-stages", "dtype_fix",
            "--noise-repeats", "1", "-o", "out.py", "--json",
        ]  # fmt: skip
        env = {"LLM_CACHE_DIR": str(tmp_path / "cache")}
        done = run_cli(*args, cwd=tmp_path, env=env, timeout=600)
        assert done.returncode == 0, done.stderr + done.stdout
        summary = json.loads(done.stdout)
        assert summary["stages"] == [
            {"stage": "dtype_fix", "status": "improved", "attempts": 1, "accepted": "t1"}
        ]
        assert summary["llm_usage"]["calls"] == 3 and summary["llm_usage"]["cached_calls"] == 0
        assert (tmp_path / "out.py").read_text().strip() == good.strip()
        # what the model was shown came from the plugin's templates, with the static findings in it
        analysis_prompt = server.requests[0]["messages"][-1]["content"]
        assert "Triton kernel on cpu" in analysis_prompt and "[float64_usage]" in analysis_prompt
        stage_prompt = server.requests[1]["messages"][-1]["content"]
        assert "dtype_fix stage" in stage_prompt and "JSON schema" in stage_prompt
        record_text = (tmp_path / summary["record"]).read_text()
        assert "sk-cli-secret" not in record_text

        # same command again: baseline and candidate come from the tree, replies from the cache
        before = len(server.requests)
        again = run_cli(*args, cwd=tmp_path, env=env, timeout=600)
        assert again.returncode == 0, again.stderr
        usage = json.loads(again.stdout)["llm_usage"]
        assert len(server.requests) == before and usage["calls"] == 0 and usage["cached_calls"] == 3
    finally:
        server.stop()

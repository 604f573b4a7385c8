"""Secrets never reach what kernelpilot stores or prints, and the hybrid proposer survives an LLM error.

End to end: an OpenAI-compatible endpoint (tests/support/fake_llm_server.py) that echoes the API key
in its error message; the key (given as a flag) and a token from the environment must be absent from
stdout (the ``--json`` summary), stderr, the run record and the trial tree."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from kernelpilot.secrets import add_secret, redact, redact_obj, scrubbed_environ
from tests.support import REPO, run_cli
from tests.support.fake_llm_server import FakeLLMServer

EXAMPLE = REPO / "examples" / "softmax"
KEY = "sk-test-echoed-key-9f8e7d"
TOKEN = "tok-from-environment-4c3b2a"


def test_redact_masks_env_secrets_and_registered_keys(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_TOKEN", TOKEN)
    monkeypatch.setenv("HARMLESS", "not-a-secret-value")
    add_secret("registered-key-123456")
    text = f"a {TOKEN} b registered-key-123456 c not-a-secret-value"
    assert redact(text) == "a *** b *** c not-a-secret-value"
    assert redact_obj({"m": [text], TOKEN: 1}) == {"m": [redact(text)], "***": 1}
    env = scrubbed_environ({"OPENAI_API_KEY": "x" * 10, "PATH": "/bin", "GH_TOKEN": "y" * 10})
    assert env == {"PATH": "/bin"}


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")
def test_an_endpoint_echoing_the_key_does_not_get_it_stored_or_printed(tmp_path: Path) -> None:
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    server = FakeLLMServer().start()
    try:
        echo = {"status": 400, "content": f"invalid api key {KEY} (also saw {TOKEN})"}
        server.replies.extend([dict(echo) for _ in range(8)])
        done = run_cli(
            "optimize", "-i", "softmax.py", "-s", "softmax.yaml", "--variant", "ci", "--device", "cpu",
            "--engine", "llm", "--model", "openai/fake-model", "--api-base", server.base_url, "--api-key", KEY,
            "--stages", "dtype_fix", "--noise-repeats", "1", "-o", "out.py", "--json",
            cwd=tmp_path, env={"LLM_CACHE_DIR": str(tmp_path / "cache"), "SOME_SERVICE_TOKEN": TOKEN}, timeout=600,
        )  # fmt: skip
    finally:
        server.stop()
    assert server.requests, "the endpoint was never called"
    printed = done.stdout + done.stderr
    assert "invalid api key" in printed or list((tmp_path / "logs").glob("run-*.json")), printed
    assert KEY not in printed and TOKEN not in printed, printed
    stored = [p for p in tmp_path.rglob("*") if p.is_file() and "cache" not in p.parts]
    assert any(p.name.startswith("run-") for p in stored), [p.name for p in stored]
    for path in stored:
        data = path.read_bytes()
        assert KEY.encode() not in data and TOKEN.encode() not in data, path


def test_hybrid_proposer_falls_back_to_the_model_when_the_llm_fails():
    from kernelpilot.llm.client import LLMError
    from kernelpilot.tile_tuner.proposers import make_proposer
    from kernelpilot.tile_tuner.proposers.base import History
    from kernelpilot.tile_tuner.space import SearchSpace
    from tests.support.tuner_doubles import ToyModel

    class Failing:
        def chat(self, messages):
            raise LLMError(f"LLM call failed: echo {KEY}", kind="permanent")

    add_secret(KEY)
    space = SearchSpace(ToyModel(), "gemm", "bf16", {"M": 512, "N": 512, "K": 8}, None, None, True)
    hybrid = make_proposer("hybrid", space, 0, client=Failing())
    configs = hybrid.propose(4, History())
    model = make_proposer("model", space, 0).propose(4, History())
    assert [c.label() for c in configs] == [c.label() for c in model]
    assert hybrid.llm_error and KEY not in hybrid.llm_error and "***" in hybrid.llm_error
    assert json.dumps(hybrid.llm_error)

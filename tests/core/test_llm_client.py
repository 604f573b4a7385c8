"""The litellm client against a scripted OpenAI-compatible server on 127.0.0.1 (real HTTP, real litellm)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from kernelpilot.llm.client import LLMClient, LLMError
from kernelpilot.settings import load_settings
from tests.support.fake_llm_server import FakeLLMServer

# never pytest.importorskip("litellm"): importing it without LITELLM_LOCAL_MODEL_COST_MAP fetches a price
# list from the network; the client sets the variable and imports it lazily.
pytestmark = pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="litellm not installed")


class Answer(BaseModel):
    explanation: str
    code: str


@pytest.fixture
def server():
    srv = FakeLLMServer().start()
    yield srv
    srv.stop()


def _client(server: FakeLLMServer, tmp_path: Path, **kw) -> LLMClient:
    settings = load_settings(
        cli={
            "llm_model": "openai/fake-model",
            "openai_api_base": server.base_url,
            "openai_api_key": "sk-test-secret",
            "llm_timeout_s": kw.pop("timeout", 5.0),
            "llm_cache_dir": str(tmp_path / "cache"),
        },
        env_file=None,
    )
    return LLMClient(settings, backoff_s=0.01, **kw)


def test_reply_usage_and_cache(server: FakeLLMServer, tmp_path: Path) -> None:
    server.script("hello there kernel")
    client = _client(server, tmp_path)
    messages = [{"role": "user", "content": "say hello"}]
    assert client.chat(messages) == "hello there kernel"
    assert client.usage.calls == 1
    assert client.usage.completion_tokens == 3 and client.usage.prompt_tokens == 2
    assert client.usage.cost_unknown_calls == 1  # a fake model has no price: not counted as free
    # identical call: answered from the on-disk cache, no second request
    again = _client(server, tmp_path)
    assert again.chat(messages) == "hello there kernel"
    assert len(server.requests) == 1 and again.usage.cached_calls == 1 and again.usage.calls == 0
    assert server.requests[0]["model"] == "fake-model"
    assert server.requests[0]["messages"] == messages


def test_malformed_json_is_shown_to_the_model_and_retried(server: FakeLLMServer, tmp_path: Path) -> None:
    good = json.dumps({"explanation": "ok", "code": "print(1)"})
    server.script("here you go: {not json", '{"explanation": "missing code"}', good)
    client = _client(server, tmp_path)
    reply = client.structured([{"role": "user", "content": "optimize"}], Answer)
    assert reply.code == "print(1)"
    assert client.usage.parse_failures == 2 and len(server.requests) == 3
    second = server.requests[1]["messages"]
    assert second[-2] == {"role": "assistant", "content": "here you go: {not json"}
    assert "could not be used" in second[-1]["content"] and "invalid JSON" in second[-1]["content"]
    third = server.requests[2]["messages"][-1]["content"]
    assert "code" in third and "Field required" in third  # the schema error names the missing field


def test_gives_up_after_parse_retries(server: FakeLLMServer, tmp_path: Path) -> None:
    server.script("nope", "still nope")
    client = _client(server, tmp_path)
    with pytest.raises(LLMError, match="no parseable reply after 2 tries"):
        client.structured([{"role": "user", "content": "x"}], Answer, parse_retries=1)


def test_slow_reply_times_out_then_retry_succeeds(server: FakeLLMServer, tmp_path: Path) -> None:
    server.script({"delay": 3.0, "content": "too late"}, "in time")
    client = _client(server, tmp_path, timeout=1.0)
    assert client.chat([{"role": "user", "content": "q"}]) == "in time"
    assert client.usage.failed_calls == 1 and client.usage.calls == 1


def test_timeouts_exhaust_retries(server: FakeLLMServer, tmp_path: Path) -> None:
    server.script({"delay": 2.0, "content": "a"}, {"delay": 2.0, "content": "b"})
    client = _client(server, tmp_path, timeout=0.5, max_retries=1)
    with pytest.raises(LLMError, match="timed out after 2 attempt") as info:
        client.chat([{"role": "user", "content": "q"}])
    assert info.value.kind == "timeout"


def test_server_error_retried_but_auth_error_is_not(server: FakeLLMServer, tmp_path: Path) -> None:
    server.script({"status": 500}, "fine")
    client = _client(server, tmp_path)
    assert client.chat([{"role": "user", "content": "a"}]) == "fine"
    server.script({"status": 401, "content": "bad key"}, "never asked")
    with pytest.raises(LLMError, match="Authentication") as info:
        client.chat([{"role": "user", "content": "b"}])
    assert info.value.kind == "permanent"
    assert server.replies == [{"content": "never asked"}]  # no retry for a permanent error


def test_cost_is_totalled_for_a_priced_model(server: FakeLLMServer, tmp_path: Path) -> None:
    server.script("one two three four", "five six")
    settings = load_settings(
        cli={
            "llm_model": "openai/gpt-4o-mini",  # in litellm's local price map
            "openai_api_base": server.base_url,
            "openai_api_key": "sk-test",
            "llm_cache_dir": str(tmp_path / "cache"),
        },
        env_file=None,
    )
    client = LLMClient(settings, backoff_s=0.01)
    client.chat([{"role": "user", "content": "a b c"}])
    first = client.usage.cost_usd
    client.chat([{"role": "user", "content": "d e f g h"}])
    assert client.usage.cost_unknown_calls == 0
    assert 0 < first < client.usage.cost_usd < 0.01  # two calls, a few tokens each, priced and summed
    assert (
        client.usage.as_dict()["total_tokens"] == client.usage.prompt_tokens + client.usage.completion_tokens
    )

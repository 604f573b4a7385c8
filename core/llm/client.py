"""A litellm chat client: any provider, timeouts, retries, response cache, token and cost totals.

litellm is imported lazily (and with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` so it never fetches a price
list from the network).  Transient failures (timeouts, connection errors, rate limits, 5xx) are retried
with exponential backoff; permanent ones (bad key, bad request) fail at once.  A reply that does not
parse into the expected pydantic model is sent back to the model together with the parse error, up to
``parse_retries`` times.  Cost is what ``litellm.completion_cost`` knows; for models it has no price
for, the call is counted in ``cost_unknown_calls`` rather than pretending it was free.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from kernelpilot.errors import KernelpilotError
from kernelpilot.llm.cache import ResponseCache, cache_key
from kernelpilot.llm.structured import ReplyParseError, parse_reply, schema_instructions

T = TypeVar("T", bound=BaseModel)

_TRANSIENT = (
    "Timeout",
    "APIConnectionError",
    "RateLimitError",
    "InternalServerError",
    "ServiceUnavailableError",
)


class LLMError(KernelpilotError):
    """The LLM could not give a usable answer (after retries).

    ``kind`` lets callers decide whether another attempt can help: ``timeout`` and ``parse`` may
    succeed next time; ``connection`` (endpoint unreachable after retries) and ``permanent`` (bad
    key, bad request, litellm missing) will not.
    """

    def __init__(self, message: str, kind: str = "permanent") -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class LLMUsage:
    calls: int = 0  # requests that reached the provider and returned
    cached_calls: int = 0
    failed_calls: int = 0  # attempts that raised (each retry counts)
    parse_failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    cost_unknown_calls: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["total_tokens"] = self.prompt_tokens + self.completion_tokens
        return data


def import_litellm() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise LLMError("the LLM engine needs litellm: pip install 'kernelpilot[llm]'") from exc
    litellm.suppress_debug_info = True
    return litellm


class LLMClient:
    """Chat completions through litellm for the configured model (settings LLM_MODEL etc.)."""

    def __init__(
        self,
        settings: Any,
        *,
        cache_dir: Path | None | bool = True,
        max_retries: int = 2,
        backoff_s: float = 1.0,
        completion_fn: Callable[..., Any] | None = None,
    ) -> None:
        self.model: str = settings.llm_model
        self.api_base: str | None = settings.openai_api_base
        key = settings.openai_api_key
        self._api_key: str | None = key.get_secret_value() if key is not None else None
        self.temperature: float = settings.llm_temperature
        self.max_tokens: int = settings.llm_max_tokens
        self.timeout_s: float = settings.llm_timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        directory = settings.llm_cache_dir if cache_dir is True else (cache_dir or None)
        self.cache = ResponseCache(directory)
        self.usage = LLMUsage()
        self._completion_fn = completion_fn
        self._litellm: Any = None

    # ------------------------------------------------------------------------------------- chat
    def chat(self, messages: list[dict[str, Any]]) -> str:
        """Return the assistant text for ``messages`` (from the cache when the same call was made)."""
        key = cache_key(self.model, messages, self.temperature, self.max_tokens)
        hit = self.cache.get(key)
        if hit is not None:
            self.usage.cached_calls += 1
            return str(hit["content"])
        response = self._call_with_retries(messages)
        content = response.choices[0].message.content or ""
        usage = getattr(response, "usage", None)
        prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        self.usage.calls += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        cost = self._cost(response)
        if cost is None:
            self.usage.cost_unknown_calls += 1
        else:
            self.usage.cost_usd += cost
        self.cache.put(
            key,
            {
                "model": self.model,
                "content": content,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "created_at": time.time(),
            },
        )
        return content

    def structured(self, messages: list[dict[str, Any]], model: type[T], *, parse_retries: int = 2) -> T:
        """Ask for a JSON reply matching ``model``; on a parse error show it to the model and retry."""
        conversation = list(messages)
        conversation[-1] = {
            **conversation[-1],
            "content": f"{conversation[-1]['content']}\n\n{schema_instructions(model)}",
        }
        last_error = ""
        for _ in range(parse_retries + 1):
            text = self.chat(conversation)
            try:
                return parse_reply(text, model)
            except ReplyParseError as exc:
                self.usage.parse_failures += 1
                last_error = str(exc)
                conversation = [
                    *conversation,
                    {"role": "assistant", "content": text},
                    {
                        "role": "user",
                        "content": f"Your reply could not be used: {last_error}\n"
                        f"Answer again. {schema_instructions(model)}",
                    },
                ]
        raise LLMError(
            f"{self.model} gave no parseable reply after {parse_retries + 1} tries: {last_error}",
            kind="parse",
        )

    # -------------------------------------------------------------------------------- internals
    def _lib(self) -> Any:
        if self._litellm is None:
            self._litellm = import_litellm()
        return self._litellm

    def _call_with_retries(self, messages: list[dict[str, Any]]) -> Any:
        completion = self._completion_fn or self._lib().completion
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "timeout": self.timeout_s,
            "max_retries": 0,  # retries are ours, so they are counted and bounded in one place
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
        for attempt in range(self.max_retries + 1):
            try:
                return completion(**kwargs)
            except Exception as exc:  # litellm maps provider errors onto its own classes
                self.usage.failed_calls += 1
                names = {cls.__name__ for cls in type(exc).__mro__}
                transient = bool(names & set(_TRANSIENT))
                if not transient or attempt == self.max_retries:
                    what = "timed out" if "Timeout" in names else "failed"
                    if "Timeout" in names:
                        kind = "timeout"
                    elif transient:
                        # litellm reports a refused connection as InternalServerError("Connection error")
                        unreachable = "APIConnectionError" in names or "connection error" in str(exc).lower()
                        kind = "connection" if unreachable else "server"
                    else:
                        kind = "permanent"
                    raise LLMError(
                        f"LLM call to {self.model} {what} after {attempt + 1} attempt(s): "
                        f"{type(exc).__name__}: {str(exc)[:300]}",
                        kind=kind,
                    ) from exc
                time.sleep(self.backoff_s * (2**attempt))
        raise AssertionError("unreachable")

    def _cost(self, response: Any) -> float | None:
        try:
            cost = self._lib().completion_cost(completion_response=response)
        except Exception:  # unknown model: the price is not known, which is not zero
            return None
        return float(cost) if cost is not None else None

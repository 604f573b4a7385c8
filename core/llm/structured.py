"""Turn a model's text reply into a pydantic object, with an error message fit to show the model."""

from __future__ import annotations

import json
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


class ReplyParseError(ValueError):
    """The reply is not valid JSON for the expected schema; ``str(err)`` is shown to the model."""


def extract_json(text: str) -> object:
    """Find the JSON object in a reply: the whole text, a ```json fence, or the outermost braces."""
    candidates = [text.strip()]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(text)]
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        candidates.append(text[start : end + 1])
    last_error = "no JSON object found in the reply"
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return json.loads(candidate)
        except json.JSONDecodeError as exc:
            last_error = f"invalid JSON: {exc}"
    raise ReplyParseError(last_error)


def parse_reply(text: str, model: type[T]) -> T:
    data = extract_json(text)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()
        )
        raise ReplyParseError(f"JSON does not match the schema: {problems}") from None


def schema_instructions(model: type[BaseModel]) -> str:
    schema = json.dumps(model.model_json_schema(), indent=1)
    return (
        "Reply with ONE JSON object and nothing else (no prose before or after), matching this JSON "
        f'schema:\n{schema}\nStrings must be valid JSON strings (escape newlines as \\n and quotes as \\").'
    )

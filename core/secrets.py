"""Redact secrets (API keys, tokens) from every message kernelpilot stores or prints.

Why: an LLM endpoint that echoes the key in an error, or candidate code that prints its
environment, must not get the key into ``logs/run-*.json``, the ``--json`` summary, the trial tree
or the terminal.  The secrets are the values of environment variables whose names say they are
secret (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``) plus the values registered with
:func:`add_secret` (the configured LLM key, whatever its source: flag, ``.env`` or spec).
"""

from __future__ import annotations

import io
import os
import re
import threading
from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD)", re.IGNORECASE)
_MIN_LEN = 6  # shorter values ("1", "true") would mask ordinary text
_registered: set[str] = set()
_lock = threading.Lock()


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def add_secret(value: str | None) -> None:
    """Register a secret value (e.g. an API key given as a flag) so it is redacted everywhere."""
    if value and len(value) >= _MIN_LEN:
        with _lock:
            _registered.add(value)


def secret_values() -> list[str]:
    """Every known secret, longest first (so a key containing another is masked whole)."""
    found = {v for k, v in os.environ.items() if is_secret_name(k) and v and len(v) >= _MIN_LEN}
    with _lock:
        found |= _registered
    return sorted(found, key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every known secret replaced by ``***``."""
    if not text:
        return text
    for value in secret_values():
        if value in text:
            text = text.replace(value, MASK)
    return text


def redact_obj(obj: Any) -> Any:
    """A JSON-like structure with every string redacted (dict keys included)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact_obj(k): redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact_obj(v) for v in obj]
    return obj


def scrubbed_environ(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment without secret variables: what untrusted candidate code is started with."""
    return {k: v for k, v in (os.environ if env is None else env).items() if not is_secret_name(k)}


class RedactingStream(io.TextIOBase):
    """A text stream that redacts secrets from everything written through it (stdout, stderr)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(redact(text))
        return len(text)

    def flush(self) -> None:
        self._inner.flush()

    def isatty(self) -> bool:
        return bool(getattr(self._inner, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self._inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._inner, "encoding", "utf-8")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

"""On-disk response cache keyed by model and messages (plus the sampling settings that change replies).

Why: re-running an optimization with identical prompts (e.g. after a crash) must not pay for the same
answers again.  Entries are JSON files written atomically, sharded by the first two hex digits.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any


def cache_key(model: str, messages: list[dict[str, Any]], temperature: float, max_tokens: int) -> str:
    payload = json.dumps(
        {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class ResponseCache:
    def __init__(self, directory: Path | None) -> None:
        self.dir = Path(directory) if directory else None

    def _path(self, key: str) -> Path:
        assert self.dir is not None
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        if self.dir is None:
            return None
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # a corrupt entry is treated as a miss and overwritten

    def put(self, key: str, entry: dict[str, Any]) -> None:
        if self.dir is None:
            return
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, path)

"""Measure each config once across processes that share one results store.

Why: two ``kernelpilot tune`` runs sharing ``KERNELPILOT_HOME`` used to benchmark the same configs
side by side (three processes ran 96 benchmarks for 32 configs), each on a GPU the other was using.
Before measuring, a process takes the measurement key's lock (:mod:`kernelpilot.locks`) and looks
the key up in the store again; keys another process holds are waited for after this process's own
work, then read from the store (measured here only if the other process died before recording).
The lock is held until the result is committed, so a waiter always finds it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kernelpilot.locks import HeldLock, KeyLocks


class MeasureClaims:
    """Per-key measurement locks next to the store (``<store>.locks/``)."""

    def __init__(self, store_path: str | Path) -> None:
        self.locks = KeyLocks(Path(f"{store_path}.locks"))
        self._held: list[HeldLock] = []

    def split(
        self, requests: list[Any], key_of: Callable[[Any], str], lookup: Callable[[Any], Any]
    ) -> tuple[list[Any], list[Any], dict[int, Any]]:
        """(to measure here, held by another process, already in the store by request index)."""
        mine, theirs, found = [], [], {}
        for req in requests:
            lock = self.locks.try_acquire(key_of(req))
            if lock is None:
                theirs.append(req)
                continue
            stored = lookup(req)  # recorded by another process since this round was planned
            if stored is not None:
                lock.release()
                found[req.index] = stored
                continue
            self._held.append(lock)
            mine.append(req)
        return mine, theirs, found

    def wait(
        self,
        requests: list[Any],
        key_of: Callable[[Any], str],
        lookup: Callable[[Any], Any],
        deadline: float | None,
    ) -> tuple[list[Any], dict[int, Any]]:
        """Wait for other processes' keys: (still to measure here, found in the store by index)."""
        mine, found = [], {}
        for req in requests:
            wait = None if deadline is None else max(0.0, deadline - time.time())
            lock = self.locks.acquire(key_of(req), timeout_s=wait)
            if lock is None:
                continue  # out of time: left unmeasured, like any config past the budget
            stored = lookup(req)
            if stored is not None:
                lock.release()
                found[req.index] = stored
            else:
                self._held.append(lock)
                mine.append(req)
        return mine, found

    def release(self) -> None:
        for lock in self._held:
            lock.release()
        self._held.clear()

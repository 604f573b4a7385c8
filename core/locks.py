"""Per-key advisory file locks shared by every process (and thread) that uses one folder.

Why: several ``kernelpilot tune`` processes may share one ``KERNELPILOT_HOME``.  A config one of
them is building or measuring must be waited for by the others, not done again, and a process that
dies (even by ``kill -9``) must not leave a lock behind.  ``fcntl.flock`` on a per-key file gives
both: the kernel releases the lock when the holder's file descriptor closes, whatever the cause, and
locks taken through separate ``open`` calls exclude each other between threads too.  The lock files
themselves are empty and stay (removing one while another process waits on it would split the lock).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from pathlib import Path


class HeldLock:
    """A lock this process holds; :meth:`release` (or process exit) frees it."""

    def __init__(self, fd: int, key: str) -> None:
        self._fd: int | None = fd
        self.key = key

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> HeldLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class KeyLocks:
    """Exclusive locks named by arbitrary keys, as files under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        safe = key if key.replace("-", "").replace("_", "").isalnum() and len(key) <= 80 else None
        return self.root / f"{safe or hashlib.sha256(key.encode()).hexdigest()[:40]}.lock"

    def _open(self, key: str) -> int:
        self.root.mkdir(parents=True, exist_ok=True)
        return os.open(self._path(key), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)

    def try_acquire(self, key: str) -> HeldLock | None:
        """The lock if nobody holds it, else ``None`` at once."""
        fd = self._open(key)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return HeldLock(fd, key)

    def acquire(self, key: str, timeout_s: float | None = None) -> HeldLock | None:
        """Wait for the lock (``None`` after ``timeout_s``).  Polls, so Ctrl-C stays responsive."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        delay = 0.01
        while True:
            held = self.try_acquire(key)
            if held is not None:
                return held
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(delay)
            delay = min(delay * 1.5, 0.25)

"""Reading user files and checking output paths, with one clean error per failure class.

Why one module: every command reads user files (batch YAML, specs, kernels, tile lists, run documents)
and writes outputs (folders, stores, records).  A binary file, a directory, a missing or unreadable
path must each read as a one-line :class:`~kernelpilot.errors.InputError` naming the file and the
flag (exit 2), never a ``UnicodeDecodeError`` traceback, and an output path that cannot be written
must be found *before* a run spends minutes building and measuring.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from kernelpilot.errors import InputError


def read_text(path: str | Path, *, field: str | None = None, what: str = "file") -> str:
    """The UTF-8 text of a user file; every way the read can fail is an :class:`InputError`."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{what} not found (no such file)", file=str(p), field=field) from None
    except IsADirectoryError:
        raise InputError(f"{what} is a directory, expected a file", file=str(p), field=field) from None
    except PermissionError:
        raise InputError(f"{what} is not readable (permission denied)", file=str(p), field=field) from None
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", file=str(p), field=field) from None
    if b"\x00" in data:
        raise InputError(f"{what} is binary, expected UTF-8 text", file=str(p), field=field)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{what} is not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})",
            file=str(p),
            field=field,
        ) from None


def check_input_file(path: str | Path, *, field: str | None = None, what: str = "file") -> Path:
    """Fail now if ``path`` is not an existing, readable regular file (content is not read)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{what} not found (no such file)", file=str(p), field=field)
    if p.is_dir():
        raise InputError(f"{what} is a directory, expected a file", file=str(p), field=field)
    if not os.access(p, os.R_OK):
        raise InputError(f"{what} is not readable (permission denied)", file=str(p), field=field)
    return p


def _writable_ancestor(p: Path, field: str | None) -> None:
    """The nearest existing ancestor must be a writable directory (the rest is created later)."""
    parent = p.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot create {p}: {parent} is a file, not a folder", file=str(p), field=field)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"cannot create {p}: folder {parent} is not writable", file=str(p), field=field)


def check_output_dir(path: str | Path, *, field: str | None = None) -> Path:
    """Fail now if ``path`` cannot be used as an output folder (a file is there, or no write access)."""
    p = Path(path)
    if p.exists():
        if not p.is_dir():
            raise InputError("is a file, expected a folder for outputs", file=str(p), field=field)
        if not os.access(p, os.W_OK | os.X_OK):
            raise InputError("output folder is not writable", file=str(p), field=field)
        return p
    _writable_ancestor(p, field)
    return p


def check_output_file(path: str | Path, *, field: str | None = None) -> Path:
    """Fail now if ``path`` cannot be written as a file (a folder is there, or no write access)."""
    p = Path(path)
    if p.exists():
        if p.is_dir():
            raise InputError("is a folder, expected a file path", file=str(p), field=field)
        if not os.access(p, os.W_OK):
            raise InputError("file is not writable", file=str(p), field=field)
        return p
    _writable_ancestor(p, field)
    return p


def check_number(
    value: float | int | None,
    field: str,
    *,
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
) -> None:
    """A numeric flag must be finite and inside its range; ``None`` (not given) passes."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(f"must be a finite number, got {value}", field=field)
    if exclusive_minimum is not None and not value > exclusive_minimum:
        raise InputError(f"must be > {exclusive_minimum}, got {value}", field=field)
    if minimum is not None and value < minimum:
        raise InputError(f"must be >= {minimum}, got {value}", field=field)
    if maximum is not None and value > maximum:
        raise InputError(f"must be <= {maximum}, got {value}", field=field)

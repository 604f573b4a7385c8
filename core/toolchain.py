"""Locate external tools and header trees (nvcc, icpx, cmake, ninja, CUTLASS, sycl-tla).

Both the ``nvidia-cutlass`` and the ``sycl-tla`` wheels install a top-level ``cutlass_library`` with
headers under ``cutlass_library/source/include``; they must never share an environment.  We therefore
look at explicit folders first (``CUTLASS_DIR`` / ``SYCL_TLA_DIR``, a checkout or a ``pip install
--target`` folder) and only then at an importable ``cutlass_library``, and we tell the two flavours
apart by a header only sycl-tla has.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SYCL_MARKER = Path("cute/atom/mma_traits_xe.hpp")  # present in sycl-tla only
CUTLASS_MARKER = Path("cutlass/cutlass.h")


@dataclass(frozen=True)
class HeaderTree:
    """A CUTLASS-style header tree: ``include`` (cutlass/, cute/) plus optional ``tools`` includes."""

    include: Path
    flavour: str  # "cutlass" or "sycl-tla"
    version: str
    source: str  # how we found it

    @property
    def extra_includes(self) -> list[Path]:
        """tools/util/include and the applications folder (sycl-tla's flash attention lives there)."""
        root = self.include.parent
        return [p for p in (root / "tools" / "util" / "include", root) if p.exists()]


def which(tool: str) -> str | None:
    return shutil.which(tool)


def tool_version(tool: str, flag: str = "--version") -> str | None:
    path = which(tool)
    if path is None:
        return None
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[-1] if tool == "nvcc" and text else (text[0] if text else "")


def _version_from_header(include: Path) -> str:
    version_h = include / "cutlass" / "version.h"
    if not version_h.exists():
        return "unknown"
    text = version_h.read_text(errors="replace")
    parts = [re.search(rf"#define CUTLASS_{k}\s+(\d+)", text) for k in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) for m in parts if m) or "unknown"


def _tree_from(candidate: Path, source: str) -> HeaderTree | None:
    for include in (
        candidate / "include",
        candidate / "cutlass_library" / "source" / "include",
        candidate / "source" / "include",
        candidate,
    ):
        if (include / CUTLASS_MARKER).exists():
            flavour = "sycl-tla" if (include / SYCL_MARKER).exists() else "cutlass"
            return HeaderTree(
                include=include.resolve(),
                flavour=flavour,
                version=_version_from_header(include),
                source=source,
            )
    return None


def _importable_cutlass_library() -> Path | None:
    spec = importlib.util.find_spec("cutlass_library")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).parent


def find_headers(flavour: str, explicit: str | os.PathLike[str] | None = None) -> HeaderTree | None:
    """Find a header tree of ``flavour`` ("cutlass" or "sycl-tla").

    Order: the explicit folder, then ``CUTLASS_DIR`` / ``SYCL_TLA_DIR``, then ``./.deps/cutlass`` /
    ``./.deps/sycl-tla`` (where the README's setup puts them), then an importable ``cutlass_library``
    wheel of the right flavour.  Returns ``None`` when nothing matches.
    """
    env_var = "CUTLASS_DIR" if flavour == "cutlass" else "SYCL_TLA_DIR"
    candidates: list[tuple[Path, str]] = []
    if explicit:
        candidates.append((Path(explicit), "explicit path"))
    if os.environ.get(env_var):
        candidates.append((Path(os.environ[env_var]), env_var))
    # the folder README's setup command installs the headers into (pip install --target .deps/...)
    local = Path.cwd() / ".deps" / ("cutlass" if flavour == "cutlass" else "sycl-tla")
    if local.is_dir():
        candidates.append((local, f"./.deps/{local.name}"))
    wheel_root = _importable_cutlass_library()
    if wheel_root is not None:
        candidates.append((wheel_root, "cutlass_library wheel"))
    for path, source in candidates:
        tree = _tree_from(path, source)
        if tree is not None and tree.flavour == flavour:
            return tree
    return None


def cmake_path() -> str | None:
    """cmake from PATH, or from the ``cmake`` PyPI package that kernelpilot depends on."""
    found = which("cmake")
    if found:
        return found
    try:
        import cmake  # type: ignore[import-not-found]

        return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
    except ImportError:
        return None


def ninja_path() -> str | None:
    found = which("ninja")
    if found:
        return found
    try:
        import ninja  # type: ignore[import-not-found]

        return str(Path(ninja.BIN_DIR) / "ninja")
    except ImportError:
        return None

"""Helpers shared by the test modules: the repository root and a real-subprocess CLI runner.

Test modules import these as ``from tests.support import ...`` (the suite is a package, so both
``pytest`` and ``python -m pytest`` resolve it from the repository root).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m kernelpilot ARGS`` in a subprocess (real exit codes, real stdout)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "kernelpilot", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


def package_folders() -> dict[str, str]:
    """setup.py's FOLDERS (import package -> folder), read without running setup(), so tests that walk
    the package see exactly the folders the distribution ships."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FOLDERS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py defines no FOLDERS")

"""The type checker runs on ``core/`` and ``tile_tuner/`` as part of the suite (so CI runs it).

mypy cannot see the editable install's ``kernelpilot`` -> ``core/`` mapping (an import hook), so the test
lays out the import package the way ``setup.py`` does -- ``kernelpilot/`` holding symlinks to ``core/``'s
entries plus one per mapped folder -- and checks the files of ``core/`` and ``tile_tuner/`` there.  The
other folders are followed for types but not reported (``follow_imports = "silent"`` in pyproject.toml).
The cache lives in the ignored ``.mypy_cache/`` of the repository, so a second run is incremental.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, package_folders

CHECKED = ("core", "tile_tuner")


def lay_out_package(root: Path) -> list[Path]:
    """``root/kernelpilot`` as installed; returns the paths of the checked folders' entries there."""
    package = root / "kernelpilot"
    package.mkdir(parents=True)
    folders = package_folders()
    assert folders["kernelpilot"] == "core"
    targets = []
    for entry in sorted((REPO / "core").iterdir()):
        if entry.name == "__pycache__":
            continue
        (package / entry.name).symlink_to(entry)
        if entry.suffix == ".py" or (entry / "__init__.py").is_file():
            targets.append(package / entry.name)
    for dotted, folder in folders.items():
        if dotted != "kernelpilot":
            (package / dotted.split(".", 1)[1]).symlink_to(REPO / folder)
    return [*targets, package / "tile_tuner"]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is in the dev extra")
def test_mypy_on_core_and_tile_tuner(tmp_path: Path) -> None:
    targets = lay_out_package(tmp_path)
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(REPO / "pyproject.toml"),
        "--cache-dir",
        str(REPO / ".mypy_cache"),
        *[str(t.relative_to(tmp_path)) for t in targets],
    ]
    result = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=1800)
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]


def test_no_checked_module_is_exempt_from_type_errors() -> None:
    """Every module of ``core/`` and ``tile_tuner/`` is checked in full: no ``ignore_errors`` override
    (a module that needs one has a typing defect to fix, not to hide)."""
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    exempt = [
        module
        for override in config["tool"]["mypy"].get("overrides", [])
        if override.get("ignore_errors")
        for module in ([override["module"]] if isinstance(override["module"], str) else override["module"])
        if module.startswith("kernelpilot")
    ]
    assert exempt == []

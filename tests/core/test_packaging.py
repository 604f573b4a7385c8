"""The wheel ships every data file and works when installed into a fresh venv outside the repo;
``kernelpilot new-dsl`` scaffolds a package that pip installs and kernelpilot discovers."""

from __future__ import annotations

import json
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.support import REPO

DATA_FOLDERS = {"cpp_templates": "kernelpilot/cpp_templates", "knowledge_base": "kernelpilot/knowledge_base"}
DATA_SUFFIXES = {".yaml", ".yml", ".json", ".j2", ".md", ".txt", ".cu", ".cpp", ".hpp", ".cmake"}


def _venv_python(path: Path, system_site: bool) -> Path:
    # With the system site-packages the venv uses the outer pip/setuptools (a venv's bundled
    # setuptools can be too old to build a pyproject-only package without network access).
    venv.EnvBuilder(with_pip=not system_site, system_site_packages=system_site).create(path)
    return path / "bin" / "python"


@pytest.mark.slow
def test_wheel_contains_data_and_installs_in_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(dist), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    wheel = next(dist.glob("kernelpilot-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package_path in DATA_FOLDERS.items():
        expected = {
            f"{package_path}/{p.relative_to(REPO / folder).as_posix()}"
            for p in (REPO / folder).rglob("*")
            if p.is_file() and p.suffix in DATA_SUFFIXES and "__pycache__" not in p.parts
        }
        assert expected, f"{folder} holds no data files"
        assert expected <= names, f"missing from wheel: {sorted(expected - names)[:5]}"
    for package in (
        "kernelpilot/cli/__init__.py",
        "kernelpilot/tile_tuner/__init__.py",
        "kernelpilot/hw_models/__init__.py",
        "kernelpilot/dsl_plugins/triton/plugin.py",
    ):
        assert package in names

    python = _venv_python(tmp_path / "venv", system_site=False)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    probe = (
        "import json, kernelpilot; from importlib.resources import files;"
        "t=[p.name for p in files('kernelpilot.cpp_templates').joinpath('cuda').iterdir()];"
        "kb=sorted(str(p) for p in __import__('pathlib').Path(str(files('kernelpilot.knowledge_base'))).rglob('*') if p.is_file());"
        "print(json.dumps({'file': kernelpilot.__file__, 'templates': t, 'kb': kb}))"
    )
    out = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    found = json.loads(out.stdout)
    assert str(REPO) not in found["file"], "imported the source tree instead of the installed wheel"
    assert any(name.endswith(".cu.j2") for name in found["templates"]), found["templates"]
    assert any(p.endswith(".yaml") for p in found["kb"]), "no knowledge-base YAML in the installed wheel"


@pytest.mark.slow
def test_new_dsl_scaffold_installs_and_is_discovered(tmp_path: Path) -> None:
    from tests.support import run_cli

    result = run_cli("new-dsl", "tilelang", "-o", str(tmp_path / "kp-tilelang"))
    assert result.returncode == 0, result.stderr
    again = run_cli("new-dsl", "tilelang", "-o", str(tmp_path / "kp-tilelang"))
    assert again.returncode == 2 and "not empty" in again.stderr
    bad = run_cli("new-dsl", "Bad-Name", "-o", str(tmp_path / "x"))
    assert bad.returncode == 2 and "must match" in bad.stderr

    python = _venv_python(tmp_path / "venv", system_site=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(tmp_path / "kp-tilelang"),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    listed = subprocess.run(
        [str(python), "-m", "kernelpilot", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    records = {r["name"]: r for r in json.loads(listed.stdout)}
    assert records["tilelang"]["loaded"] and records["tilelang"]["distribution"] == "kernelpilot-tilelang"
    assert "kp_prompt_dirs" in records["tilelang"]["hooks"]
    own_test = subprocess.run(
        [
            str(python),
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(tmp_path / "kp-tilelang" / "tests"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path / "kp-tilelang",
    )
    assert own_test.returncode == 0, own_test.stdout + own_test.stderr

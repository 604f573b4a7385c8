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


def _venv_python(path: Path) -> Path:
    """A fresh venv with its own pip, seeing nothing of the environment running the tests."""
    venv.EnvBuilder(with_pip=True).create(path)
    return path / "bin" / "python"


def _venv_over_this_environment(path: Path) -> Path:
    """A fresh venv layered over the environment running the tests: what is installed here
    (kernelpilot, possibly editable; pip; setuptools; pytest) is visible there, and what is installed
    there stays there.

    ``system_site_packages=True`` is not that: it exposes the *base* interpreter's site-packages, which
    inside a virtualenv lacks this environment's kernelpilot and build tools.  Instead each
    site-packages folder on this interpreter's path is added with ``site.addsitedir`` from a ``.pth``
    file, so their own ``.pth`` files (an editable install's import hook) are processed as well.
    """
    venv.EnvBuilder(with_pip=False).create(path)
    python = path / "bin" / "python"
    inner_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    outer = [p for p in sys.path if Path(p).name in ("site-packages", "dist-packages") and Path(p).is_dir()]
    lines = [f"import site; site.addsitedir({p!r})" for p in dict.fromkeys(outer)]
    (Path(inner_site) / "zz_outer_environment.pth").write_text("\n".join(lines) + "\n")
    return python


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

    python = _venv_python(tmp_path / "venv")
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

    python = _venv_over_this_environment(tmp_path / "venv")
    install = subprocess.run(
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
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
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
    assert "kp_target_models" in records["tilelang"]["hooks"] and records["tilelang"]["available"]
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

"""Third-party plugins are found through pip-installed entry points; a broken one never breaks the rest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support import run_cli


def _write_package(root: Path, dist: str, module: str, body: str) -> Path:
    project = root / dist
    (project / module).mkdir(parents=True)
    (project / module / "__init__.py").write_text("")
    (project / module / "plugin.py").write_text(textwrap.dedent(body))
    (project / "pyproject.toml").write_text(
        textwrap.dedent(f"""
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "{dist}"
        version = "1.2.3"
        [project.entry-points."kernelpilot.plugins"]
        {module} = "{module}.plugin"
        [tool.setuptools]
        packages = ["{module}"]
        """)
    )
    return project


def _pip_install_target(project: Path, target: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(project),
        ],
        check=True,
        capture_output=True,
        text=True,
    )


GOOD = """
from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import PluginInfo

@hookimpl
def kp_plugin_info():
    return PluginInfo(name="extdsl", description="third party", dsls=("extdsl",))

@hookimpl
def kp_stages():
    return ["a-stage"]
"""

BROKEN = """
raise RuntimeError("this plugin is broken on purpose")
"""


def test_external_and_broken_plugins(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _pip_install_target(_write_package(tmp_path, "kp-extdsl", "kp_extdsl", GOOD), site)
    _pip_install_target(_write_package(tmp_path, "kp-broken", "kp_broken", BROKEN), site)
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    result = run_cli("plugins", "--json", env=env)
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}

    ext = records["kp_extdsl"]
    assert ext["loaded"] and ext["available"]
    assert ext["distribution"] == "kp-extdsl" and ext["version"] == "1.2.3"
    assert ext["hooks"] == ["kp_plugin_info", "kp_stages"]

    broken = records["kp_broken"]
    assert not broken["loaded"] and not broken["available"]
    assert "this plugin is broken on purpose" in broken["reason"]

    for name in ("triton", "gluon", "sycl", "cuda"):
        assert records[name]["loaded"], f"{name} must still load next to a broken plugin"

    # the table view shows the failure too (and does not crash)
    table = run_cli("plugins", env=env)
    assert table.returncode == 0 and "kp_broken" in table.stdout


def test_registry_collect_flattens_contributions() -> None:
    from kernelpilot.hookspecs import hookimpl
    from kernelpilot.plugins import PluginRegistry

    class One:
        @hookimpl
        def kp_stages(self):
            return ["a", "b"]

    class Two:
        @hookimpl
        def kp_stages(self):
            return None

    registry = PluginRegistry()
    registry.register(One(), "one")
    registry.register(Two(), "two")
    assert sorted(registry.collect("kp_stages")) == ["a", "b"]

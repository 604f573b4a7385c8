"""The plugin contract is validated and documented: the hook list comes from the specification module,
every hook is documented with its signature, and a plugin with a misspelled hook is reported, not
silently loaded without it."""

from __future__ import annotations

import inspect
import json
import os
import re
import textwrap
from pathlib import Path

from kernelpilot import hookspecs
from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugins import PluginRegistry
from tests.support import REPO, run_cli

DOCS = (REPO / "docs" / "plugins.md").read_text(encoding="utf-8")


def _specified() -> dict[str, inspect.Signature]:
    marker = f"{hookspecs.PROJECT}_spec"
    return {
        name: inspect.signature(fn)
        for name, fn in vars(hookspecs).items()
        if inspect.isfunction(fn) and hasattr(fn, marker)
    }


def test_hook_names_are_derived_from_the_specification_module() -> None:
    assert set(hookspecs.HOOK_NAMES) == set(_specified())
    assert {"kp_doctor_checks", "kp_analyzers", "kp_claim_file"} <= set(hookspecs.HOOK_NAMES)


def test_every_hook_is_documented_with_its_signature() -> None:
    documented = set(re.findall(r"`(kp_\w+)\(([^)]*)\)`", DOCS))
    for name, signature in _specified().items():
        params = ", ".join(signature.parameters)
        assert (name, params) in documented, f"docs/plugins.md lacks `{name}({params})`"
    assert {name for name, _ in documented} <= set(hookspecs.HOOK_NAMES), "documented hook without a spec"


def test_hook_specs_name_real_types_not_any() -> None:
    for name, signature in _specified().items():
        assert signature.return_annotation not in ("Any", inspect.Signature.empty), name
        assert "Any" not in str(signature.return_annotation), name


class Misspelled:
    @hookimpl
    def kp_tile_kernel(self) -> list[object]:  # the hook is kp_tile_kernels
        return []

    @hookimpl
    def kp_stages(self) -> list[object]:
        return ["would-be-stage"]


class NewerHook:
    @hookimpl(optionalhook=True)
    def kp_from_the_future(self) -> None:
        return None


def test_misspelled_hook_is_recorded_as_an_error_and_the_plugin_unregistered() -> None:
    registry = PluginRegistry()
    record = registry.register(Misspelled(), "typo")
    assert not record.loaded and not record.available
    assert "unknown hook kp_tile_kernel (did you mean kp_tile_kernels?)" in record.reason
    assert registry.collect("kp_stages") == []  # none of its hooks run
    assert record.as_dict()["available"] is False

    fine = registry.register(NewerHook(), "newer")  # optionalhook: allowed, and nothing else is hit
    assert fine.loaded and fine.available and fine.error is None


PLUGIN = """
from kernelpilot.hookspecs import hookimpl

@hookimpl
def kp_target_model():
    return []
"""


def test_kernelpilot_plugins_reports_an_installed_plugin_with_a_misspelled_hook(tmp_path: Path) -> None:
    """Through entry-point discovery, as a user sees it: a dist-info with an entry point on the path."""
    site = tmp_path / "site"
    (site / "kp_typo").mkdir(parents=True)
    (site / "kp_typo" / "__init__.py").write_text(textwrap.dedent(PLUGIN))
    info = site / "kp_typo-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: kp-typo\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kernelpilot.plugins]\nkp_typo = kp_typo\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    result = run_cli("plugins", "--json", env=env)
    assert result.returncode == 0, result.stderr
    records = {r["name"]: r for r in json.loads(result.stdout)}
    assert records["kp_typo"]["available"] is False
    assert "kp_target_model (did you mean kp_target_models?)" in records["kp_typo"]["reason"]
    assert all(records[name]["available"] for name in ("triton", "gluon", "cuda"))

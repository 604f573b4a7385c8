"""Plugins stand alone: no module of one DSL plugin imports another plugin.

A third-party DSL must be writable against the core alone, so the built-in plugins are held to the same
rule: everything two plugins share lives in the core (``kernelpilot.*`` outside ``dsl_plugins``).  The
scan reads every ``import`` and ``from ... import`` in ``dsl_plugins/<name>/`` -- including imports
inside functions -- with ``ast``, so an import hidden in a function body is caught as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PLUGINS_ROOT = Path(__file__).resolve().parents[2] / "dsl_plugins"
PLUGINS = sorted(p.name for p in PLUGINS_ROOT.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in the file (``from x import y`` also gives ``x.y``)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def foreign_plugin(module: str, own: str) -> str | None:
    """The other plugin ``module`` belongs to, or None (core, third-party or the plugin itself)."""
    for prefix in ("kernelpilot.dsl_plugins.", "dsl_plugins."):
        if module.startswith(prefix):
            name = module[len(prefix) :].split(".")[0]
            return name if name in PLUGINS and name != own else None
    return None


def violations(plugin: str) -> list[str]:
    out = []
    for path in sorted((PLUGINS_ROOT / plugin).rglob("*.py")):
        for line, module in imported_modules(path):
            other = foreign_plugin(module, plugin)
            if other is not None:
                out.append(
                    f"{path.relative_to(PLUGINS_ROOT.parent)}:{line} imports {module} ({other} plugin)"
                )
    return sorted(set(out))


def test_all_builtin_plugins_are_scanned() -> None:
    assert {"cuda", "gluon", "sycl", "triton"} <= set(PLUGINS)


@pytest.mark.parametrize("plugin", PLUGINS)
def test_plugin_imports_only_the_core_and_itself(plugin: str) -> None:
    assert violations(plugin) == []


def test_the_scan_catches_a_cross_plugin_import(tmp_path: Path) -> None:
    """The checker itself: a function-local import of a sibling plugin is reported, a core import is not."""
    path = tmp_path / "mod.py"
    path.write_text(
        "from kernelpilot.execution import JobExecutor\n"
        "def f():\n"
        "    from kernelpilot.dsl_plugins.triton import worker\n"
        "    import kernelpilot.dsl_plugins.cuda.source_abi\n"
    )
    modules = [m for _, m in imported_modules(path)]
    assert [foreign_plugin(m, "sycl") for m in modules if foreign_plugin(m, "sycl")] == [
        "triton",
        "triton",
        "cuda",
    ]
    assert foreign_plugin("kernelpilot.dsl_plugins.sycl.source_build", "sycl") is None
    assert foreign_plugin("kernelpilot.execution.job_executor", "sycl") is None

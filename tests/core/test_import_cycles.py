"""The ``kernelpilot`` package has no import cycle.

A cycle makes import order matter (a half-initialised module hands out missing names) and is usually
papered over with an import inside a function, so imports inside functions count too: a lazy import
is fine for an optional or heavy dependency, but it must still point down the layers.  The graph is
built from the source tree with ``ast``, mapping each folder onto its subpackage as ``setup.py`` does;
``if TYPE_CHECKING:`` blocks are skipped because they never run.  A package's ``__init__`` importing its
own modules is not a cycle (Python runs the ``__init__`` first), so the implicit child -> parent edge
of every submodule import is not drawn.
"""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from tests.support import REPO, package_folders


def _modules(root: Path = REPO) -> dict[str, Path]:
    """Module name -> source file of every module of the distribution."""
    out: dict[str, Path] = {}
    for package, folder in package_folders().items():
        base = root / folder
        for path in base.rglob("*.py"):
            rel = path.relative_to(base).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if any(not p.isidentifier() for p in parts):
                continue  # templates and data files shipped as .py, never imported by name
            name = ".".join([package, *parts])
            if path.name == "__init__.py" or name not in out:
                out[name] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement, also inside functions, except under ``if TYPE_CHECKING:`` (never runs)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def import_graph(root: Path = REPO) -> dict[str, set[str]]:
    """Module -> the kernelpilot modules it imports (``from pkg import mod`` counts as mod)."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                # ``from pkg import mod`` imports the submodule; any other name comes from pkg itself
                targets = [
                    f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                    for alias in node.names
                ]
            for target in targets:
                if target in modules and target != name:
                    graph[name].add(target)
    return graph


def test_graph_sees_the_package() -> None:
    """The walk finds the real modules and their imports (else an empty graph would pass)."""
    graph = import_graph()
    assert len(graph) > 150
    assert "kernelpilot.tile_tuner.backends" in graph["kernelpilot.tile_tuner.engine"]
    assert "kernelpilot.hw_models.sm90.gemm" in graph["kernelpilot.hw_models.sm90.model"]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (first module repeated at the end), or None when the graph is acyclic."""
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as exc:
        return list(exc.args[1])
    return None


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_detects_a_cycle(tmp_path: Path) -> None:
    """Two modules importing each other are reported, also through a function-local import; an import
    under ``if TYPE_CHECKING`` is not an edge."""
    pkg = tmp_path / "core"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from kernelpilot import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nimport kernelpilot.a\nif TYPE_CHECKING:\n    import kernelpilot.c\n"
    )
    (pkg / "c.py").write_text("def f():\n    import kernelpilot.b\n")
    graph = import_graph(tmp_path)
    assert graph == {
        "kernelpilot": set(),
        "kernelpilot.a": {"kernelpilot.b"},
        "kernelpilot.b": {"kernelpilot.a"},
        "kernelpilot.c": {"kernelpilot.b"},
    }
    assert set(find_cycle(graph) or []) == {"kernelpilot.a", "kernelpilot.b"}
    graph["kernelpilot.b"] = set()
    assert find_cycle(graph) is None
    graph["kernelpilot.b"] = {"kernelpilot.c"}  # b -> c -> b: closed by c's function-local import
    assert set(find_cycle(graph) or []) == {"kernelpilot.b", "kernelpilot.c"}

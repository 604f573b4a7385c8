"""Scaffold a pip-installable kernelpilot plugin package for a new DSL.

The package declares an entry point in the ``kernelpilot.plugins`` group, exactly like the built-in
plugins, so ``pip install`` is all it takes for kernelpilot to find it.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from kernelpilot.errors import InputError

NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="DSL name: lower case letters, digits and _ (e.g. 'tilelang')")
    parser.add_argument("-o", "--output", default=None, help="target folder (default: ./kernelpilot-NAME)")
    parser.add_argument("--force", action="store_true", help="write into an existing non-empty folder")


def scaffold(name: str, output: Path, force: bool = False) -> list[Path]:
    """Write the package; return the files written."""
    if not NAME_RE.match(name):
        raise InputError(f"DSL name {name!r} must match {NAME_RE.pattern}", field="name")
    if output.exists() and any(output.iterdir()) and not force:
        raise InputError(f"{output} exists and is not empty (use --force)", field="--output")
    from importlib.resources import files

    import jinja2

    package = f"kernelpilot_{name}"
    context = {
        "name": name,
        "package": package,
        "dist_name": f"kernelpilot-{name.replace('_', '-')}",
        "class_prefix": "".join(part.capitalize() for part in name.split("_")),
    }
    templates = files("kernelpilot.scaffold")
    layout = {
        "pyproject.toml": "pyproject.toml.j2",
        f"src/{package}/__init__.py": None,
        f"src/{package}/plugin.py": "plugin.py.j2",
        f"src/{package}/target.py": "target.py.j2",
        f"src/{package}/prompts/optimize.md.j2": "prompt.md.j2",
        f"src/{package}/knowledge_base/README.md": None,
        "tests/test_plugin.py": "test_plugin.py.j2",
    }
    written = []
    for rel, template in layout.items():
        path = output / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if template is None:
            text = (
                f'"""{name} plugin for kernelpilot."""\n'
                if rel.endswith(".py")
                else f"# {name} knowledge base\n"
            )
        else:
            source = templates.joinpath(template).read_text()
            text = jinja2.Template(source, keep_trailing_newline=True).render(**context)
        path.write_text(text)
        written.append(path)
    return written


def run(args: argparse.Namespace) -> int:
    output = Path(args.output or f"kernelpilot-{args.name}")
    written = scaffold(args.name, output, args.force)
    print(f"created {output} ({len(written)} files); install with: pip install -e {output}")
    return 0

"""Jinja2 prompt templates from the DSL plugins' prompt folders (``kp_prompt_dirs``).

Lookup order for a stage: ``stage_<stage>.md.j2``, then ``optimize.md.j2``; for analysis
``analysis.md.j2``.  Folders registered for the run's device come before device-neutral ones, so a
plugin can override one template for one device.  Rendering uses ``StrictUndefined``: a template that
uses a variable the core does not supply fails loudly instead of rendering an empty string.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelpilot.errors import KernelpilotError

SYSTEM_PROMPT = (
    "You are an expert GPU kernel engineer. You improve kernels while keeping them numerically "
    "equivalent to the original: the result is checked against a reference on random inputs and "
    "timed; wrong or slower code is rejected."
)


class PromptError(KernelpilotError):
    """No template, or a template that does not render."""


def prompt_dirs_for(dirs: list[Any], dsl: str, device: str) -> list[Path]:
    """Folders (from ``ResourceDir`` objects) for ``dsl``: device-specific first."""
    specific = [Path(d.path) for d in dirs if d.dsl == dsl and d.device == device]
    generic = [Path(d.path) for d in dirs if d.dsl == dsl and d.device is None]
    return [p for p in specific + generic if p.is_dir()]


def template_names(stage: str | None) -> list[str]:
    if stage is None:
        return ["analysis.md.j2"]
    return [f"stage_{stage}.md.j2", "optimize.md.j2"]


def find_template(folders: list[Path], stage: str | None) -> Path | None:
    for name in template_names(stage):
        for folder in folders:
            if (folder / name).is_file():
                return folder / name
    return None


def render(folders: list[Path], stage: str | None, variables: dict[str, Any]) -> str:
    import jinja2

    path = find_template(folders, stage)
    if path is None:
        raise PromptError(
            f"no prompt template {' or '.join(template_names(stage))} in {', '.join(map(str, folders)) or '(none)'}"
        )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(f) for f in folders]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    try:
        return env.get_template(path.name).render(**variables)
    except jinja2.TemplateError as exc:
        raise PromptError(f"prompt template {path} failed to render: {exc}") from exc

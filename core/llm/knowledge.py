"""Knowledge-base snippets for one (dsl, device, stage) from the plugins' KB folders.

Layout: ``<kb>/common/**`` applies to every device, ``<kb>/<device>/**`` to one (a ``ResourceDir``
with ``device`` set is already that device's folder).  Formats:

* ``*.yaml``: ``patterns:`` / ``constraints:`` lists of entries with ``name``/``id``, ``description``,
  ``stages`` (list) or ``stage`` (missing: all stages), optional ``before``/``after``/``rationale``.
* ``*.md``: for stage S if the stem starts with S or a parent folder is named S; stems starting with
  ``common``/``general`` apply to all stages.

Selection is deterministic (sorted paths) and capped by ``max_chars`` so prompts stay bounded;
constraints come before patterns because breaking a constraint wastes a whole attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelpilot.pipeline.contracts import STAGE_ORDER


@dataclass(frozen=True)
class UserKnowledgeDir:
    """``KNOWLEDGE_DIR``: the user's folder.  Files directly in it apply everywhere, like ``common/``;
    a ``<dsl>/`` subfolder (the built-in layout, e.g. a copied ``knowledge_base/``) is used if present."""

    dsl: str
    path: Path
    device: str | None = None
    flat: bool = True


def user_knowledge_dir(path: Path, dsl: str) -> UserKnowledgeDir:
    from kernelpilot.errors import InputError

    if not path.is_dir():
        raise InputError("KNOWLEDGE_DIR is not a folder", file=str(path), field="KNOWLEDGE_DIR")
    return UserKnowledgeDir(dsl=dsl, path=path / dsl if (path / dsl).is_dir() else path)


def kb_files(dirs: list[Any], dsl: str, device: str) -> list[tuple[Path, Path]]:
    """(root, file) pairs in a stable order: plugin folders first, then the user's."""
    out: list[tuple[Path, Path]] = []
    for root in kb_roots(dirs, dsl, device):
        out += [(root, p) for p in sorted(root.rglob("*")) if p.is_file()]
    for d in dirs:
        if getattr(d, "flat", False) and d.dsl == dsl:
            out += [(Path(d.path), p) for p in sorted(Path(d.path).iterdir()) if p.is_file()]
    return out


def kb_roots(dirs: list[Any], dsl: str, device: str) -> list[Path]:
    roots: list[Path] = []
    for d in dirs:
        if d.dsl != dsl:
            continue
        path = Path(d.path)
        if d.device is not None:
            if d.device == device:
                roots.append(path)
            continue
        roots += [path / "common", path / device]
    return [r for r in roots if r.is_dir()]


def _applies_md(path: Path, root: Path, stage: str) -> bool:
    stem = path.stem.lower()
    if stem.startswith(("common", "general")):
        return True
    if stem.startswith(stage):
        return True
    parents = {p.name for p in path.relative_to(root).parents}
    if stage in parents:
        return True
    # a markdown file named for no stage at all is general advice
    return not any(stem.startswith(s) for s in STAGE_ORDER) and not (parents & set(STAGE_ORDER))


def _entry_stages(entry: dict[str, Any]) -> list[str] | None:
    stages = entry.get("stages", entry.get("stage"))
    if stages is None:
        return None
    return [stages] if isinstance(stages, str) else [str(s) for s in stages]


def _format_entry(kind: str, entry: dict[str, Any]) -> str:
    title = entry.get("name") or entry.get("id") or kind
    parts = [f"[{kind}] {title}: {str(entry.get('description', '')).strip()}"]
    for key in ("rationale", "before", "after"):
        if entry.get(key):
            parts.append(f"{key}:\n{str(entry[key]).rstrip()}")
    return "\n".join(parts)


def _format_reference(entry: dict[str, Any], folder: Path, max_code: int = 2500) -> str:
    """A reference kernel: what it is, what to copy from it, and its code (without the docstring)."""
    name = entry.get("id") or entry.get("file", "?")
    head = f"[reference kernel] {name} ({entry.get('file', '')}): {str(entry.get('description', '')).strip()}"
    if entry.get("shows"):
        head += f"\nshows: {entry['shows']}"
    path = folder / str(entry.get("file", ""))
    if not path.is_file():
        return head
    code = path.read_text(encoding="utf-8")
    if code.startswith('"""'):
        code = code.split('"""', 2)[2].lstrip("\n")
    if len(code) > max_code:
        code = code[:max_code] + "\n# ... (cut)"
    return f"{head}\n```python\n{code.rstrip()}\n```"


def load_knowledge(
    dirs: list[Any], dsl: str, device: str, stage: str | None, *, max_chars: int = 12000
) -> list[str]:
    """Snippets for ``stage``; ``stage=None`` (the analysis) gets the constraints of every stage, since
    the analyst should not propose what a constraint forbids, and no patterns."""
    import yaml

    constraints: list[str] = []
    patterns: list[str] = []
    references: list[str] = []
    for root, path in kb_files(dirs, dsl, device):
        if path.suffix in (".yaml", ".yml"):
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except yaml.YAMLError:
                continue  # a broken KB file must not break optimization; `skill validate` reports it
            if not isinstance(data, dict):
                continue
            if stage is not None:
                for entry in data.get("reference_kernels", []) or []:
                    stages = _entry_stages(entry) if isinstance(entry, dict) else []
                    if isinstance(entry, dict) and (stages is None or stage in stages):
                        references.append(_format_reference(entry, path.parent))
            for kind, bucket in (("constraint", constraints), ("pattern", patterns)):
                if stage is None and kind == "pattern":
                    continue
                for entry in data.get(f"{kind}s", []) or []:
                    if not isinstance(entry, dict):
                        continue
                    stages = _entry_stages(entry)
                    if stage is None or stages is None or stage in stages:
                        bucket.append(_format_entry(kind, entry))
        elif path.suffix == ".md" and stage is not None and _applies_md(path, root, stage):
            patterns.append(path.read_text(encoding="utf-8").strip())
    snippets: list[str] = []
    used = 0
    for text in constraints + patterns + references:
        if used + len(text) > max_chars:
            continue
        snippets.append(text)
        used += len(text)
    return snippets

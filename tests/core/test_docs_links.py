"""Every link and repository path the documentation cites exists.

Scanned: README.md, docs/**/*.md, benchmarks/README.md and tests/data/README.md -- Markdown links
(``[text](target)``, relative to the file, ``#anchor`` checked against the target's headings) and
repository paths in code spans and code blocks (``core/pipeline/contracts.py:120``,
``docs/tile_tuner.md#builds``; a ``:line`` suffix must not point past the end of the file) -- plus the
``docs/...`` references in the product's Python, YAML, shell and template files.

Upstream CUTLASS and sycl-tla paths share two top-level names with this repository (their numbered
``examples/NN_...`` and sycl-tla's ``benchmarks/gemm/``, ``benchmarks/flash_attention/``); those are
recognised explicitly, so any other path under a top-level name of this repository must exist here.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO

#: top-level names of the repository a cited path may start with (hidden tool folders excluded)
TOP_LEVEL = {
    p.name
    for p in REPO.iterdir()
    if (not p.name.startswith(".") or p.name in {".ci", ".env.example", ".gitignore"})
    and not p.name.endswith(".egg-info")
    and p.name not in {"build", "dist", "kp_runs", "__pycache__"}
}
#: paths of upstream repositories (CUTLASS, sycl-tla) that look like ours
UPSTREAM = re.compile(r"^(examples/(\d|cute/|common\b)|benchmarks/(gemm|flash_attention)/)")
#: a placeholder inside a cited path (``<kernel>``, ``$OUT``, ``...``): only the fixed prefix is checked
PLACEHOLDER = re.compile(r"<|>|\$|\.\.\.|\bN\b")
SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", "build", "dist", "kp_runs", ".deps"}


def _markdown_files() -> list[Path]:
    files = [REPO / "README.md", REPO / "benchmarks" / "README.md", REPO / "tests" / "data" / "README.md"]
    files += sorted((REPO / "docs").rglob("*.md"))
    return [f for f in files if f.is_file()]


def _product_text_files() -> list[Path]:
    out = []
    for root, dirs, files in os.walk(REPO):
        # prune environments, caches and build output (hidden folders too, except .ci)
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIP_DIRS and not d.endswith(".egg-info") and (not d.startswith(".") or d == ".ci")
        ]
        for name in files:
            path = Path(root) / name
            if path.suffix in {".py", ".yaml", ".yml", ".sh", ".j2", ".toml"} and path != Path(__file__):
                out.append(path)  # (this file holds examples of bad references on purpose)
    return sorted(out)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def split_fences(text: str) -> tuple[list[str], list[str]]:
    """(prose lines, code-block lines) of a Markdown text."""
    prose, code, fenced = [], [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        (code if fenced else prose).append(line)
    return prose, code


def anchors(md: Path) -> set[str]:
    prose, _ = split_fences(md.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out = set()
    for line in prose:
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _expand_braces(path: str) -> list[str]:
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return list(
        itertools.chain.from_iterable(
            _expand_braces(path[: m.start()] + alt + path[m.end() :]) for alt in m.group(1).split(",")
        )
    )


def check_target(target: Path, anchor: str | None, line: int | None) -> str | None:
    """None when ``target`` (a path, possibly a glob) exists and has the anchor / line; else why not."""
    text = str(target)
    if any(ch in text for ch in "*?["):
        if not glob.glob(text):
            return "no file matches"
        return None
    if not target.exists():
        return "does not exist"
    if anchor and target.suffix == ".md" and anchor not in anchors(target):
        return f"has no heading for #{anchor}"
    if line is not None and target.is_file():
        n_lines = target.read_text(encoding="utf-8", errors="replace").count("\n") + 1
        if line > n_lines:
            return f"has {n_lines} lines, the citation points at line {line}"
    return None


def repo_path_problem(token: str) -> str | None:
    """Check one path-like token cited in a doc; None when it is fine or not a path of this repository."""
    token = token.strip("()[]{}\"'`,;.:")
    if "=" in token:
        token = token.split("=", 1)[1]
    token = token.removeprefix("./")
    if not token or "://" in token or re.split(r"[/:#]", token, maxsplit=1)[0] not in TOP_LEVEL:
        return None
    if UPSTREAM.match(token):
        return None
    if "::" in token:  # a pytest node id: the file must define the test
        file, _, name = token.partition("::")
        why = check_target(REPO / file, None, None)
        if why or re.search(rf"def {re.escape(name.split('[')[0])}\(", (REPO / file).read_text()) is None:
            return f"{file}: {why or 'defines no ' + name}"
        return None
    path, _, anchor = token.partition("#")
    m = re.match(r"^(.*?):(\d+)(?:-(\d+))?(?:,[\d,-]+)?$", path)
    line = None
    if m:
        path = m.group(1)
        line = int(m.group(3) or m.group(2))
    if PLACEHOLDER.search(path):
        fixed = []
        for part in path.split("/"):
            if PLACEHOLDER.search(part):
                break
            fixed.append(part)
        path, anchor, line = "/".join(fixed), "", None
    checked = [(p, check_target(REPO / p, anchor or None, line)) for p in _expand_braces(path)]
    bad = [f"{p}: {why}" for p, why in checked if why]
    return "; ".join(bad) or None


def markdown_problems(md: Path) -> list[str]:
    text = md.read_text(encoding="utf-8")
    prose, code = split_fences(text)
    rel = md.relative_to(REPO)
    out = []
    prose_text = "\n".join(prose)
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", prose_text):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        dest = md if not path else (md.parent / path)
        why = check_target(dest, anchor or None, None)
        if why:
            out.append(f"{rel}: link ({target}) {why}")
    spans = re.findall(r"`([^`\n]+)`", prose_text)
    tokens = [tok for span in spans for tok in span.split()]
    tokens += [tok for line in code for tok in line.split()]
    for tok in tokens:
        why = repo_path_problem(tok)
        if why:
            out.append(f"{rel}: `{tok}` -> {why}")
    return out


@pytest.mark.parametrize("md", _markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_markdown_links_and_paths_resolve(md: Path) -> None:
    assert markdown_problems(md) == []


def test_doc_references_in_code_resolve() -> None:
    problems = []
    for path in _product_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in re.finditer(r"(?<![\w/.-])docs/[\w./-]*[\w/](?:#[\w-]+)?", text):
            why = repo_path_problem(m.group(0))
            if why:
                line = text.count("\n", 0, m.start()) + 1
                problems.append(f"{path.relative_to(REPO)}:{line}: {m.group(0)} -> {why}")
    assert problems == []


def test_checker_catches_what_it_should() -> None:
    """The checker is not vacuous: missing files, anchors and lines are reported, upstream paths not."""
    assert repo_path_problem("docs/no_such_doc.md") == "docs/no_such_doc.md: does not exist"
    assert "has no heading" in repo_path_problem("docs/tile_tuner.md#no-such-section")
    assert "lines" in repo_path_problem("README.md:99999")
    assert repo_path_problem("docs/tile_tuner.md#benchmark-program-contract") is None
    assert repo_path_problem("examples/88_hopper_fmha/88_hopper_fmha.cu:911") is None  # CUTLASS
    assert repo_path_problem("include/cutlass/gemm/collective/xe_mma.hpp:89") is None  # upstream
    assert repo_path_problem("knowledge_base/<dsl>/<device>/") is None
    assert "no_such" in repo_path_problem("dsl_plugins/{cuda,no_such}/source_worker.py")
    assert "defines no test_gone" in repo_path_problem("tests/core/test_docs_links.py::test_gone")
    assert slug("The CUTLASS sm90a GEMM program (cpp_templates/cuda/gemm_sm90.cu.j2)") == (
        "the-cutlass-sm90a-gemm-program-cpp_templatescudagemm_sm90cuj2"
    )


def _readme_output_paths() -> list[str]:
    _, code = split_fences((REPO / "README.md").read_text(encoding="utf-8"))
    out = []
    for line in code:
        out += re.findall(r"(?:--out|-o|--store|--cache-dir|--record|--workspace)[ =](\S+)", line)
    return out


def test_readme_commands_write_only_to_ignored_places() -> None:
    """README's commands, run in a clean clone, must not leave untracked files (outputs are gitignored)."""
    paths = _readme_output_paths()
    assert paths, "README has no command with an output flag: update this test"
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    res = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths], cwd=REPO, capture_output=True, text=True
    )
    ignored = set(res.stdout.split())
    assert [p for p in paths if p not in ignored] == []

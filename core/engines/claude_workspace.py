"""The ``claude`` engine: write an agent workspace that drives ``kernelpilot skill`` commands.

The workspace holds the kernel, spec and reference, a copy of the DSL's knowledge base, instructions
(``CLAUDE.md``), a ``config.yaml``, a slash command (``.claude/commands/optimize-kernel.md``), a
tool-runner sub-agent (``.claude/agents/tool-runner.md``) and a ``.claude/settings.json`` that allows
exactly the ``kernelpilot skill`` commands and file edits -- permission checks stay ON for everything
else.  Correctness is enforced by the commands, not by the prompt: ``skill trial add`` always checks
the candidate against the oracle before recording a time.

``launch_claude`` starts ``claude -p`` headless only when asked and only if the CLI exists; it never
passes ``--dangerously-skip-permissions`` and reports "launched", not "succeeded" (Xe-Forge returned
success before anything had run).
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

from kernelpilot.pipeline.contracts import STAGE_ORDER

TEMPLATES = {
    "CLAUDE.md": "CLAUDE.md.j2",
    "config.yaml": "config.yaml.j2",
    ".claude/commands/optimize-kernel.md": "optimize-kernel.md.j2",
    ".claude/agents/tool-runner.md": "tool-runner.md.j2",
}
ALLOWED_TOOLS = ["Bash(kernelpilot skill:*)", "Read", "Edit", "Write", "Glob", "Grep"]


@dataclass
class WorkspaceInfo:
    path: Path
    kernel_name: str
    files: list[str]


@dataclass
class LaunchResult:
    launched: bool
    message: str
    pid: int | None = None
    command: list[str] | None = None


def write_workspace(
    workspace: Path,
    *,
    kernel_path: Path,
    spec_path: Path,
    variant: str,
    dsl: str,
    device: str,
    settings: Any,
    registry: Any = None,
    knowledge_dirs: list[Any] | None = None,
) -> WorkspaceInfo:
    import jinja2

    workspace = Path(workspace)
    (workspace / "kernels").mkdir(parents=True, exist_ok=True)
    (workspace / "candidates").mkdir(exist_ok=True)
    kernel_name = kernel_path.stem
    shutil.copy2(kernel_path, workspace / "kernels" / kernel_path.name)
    shutil.copy2(spec_path, workspace / "kernels" / spec_path.name)
    reference = kernel_path.with_name(f"{kernel_path.stem}_pytorch.py")  # the oracle is PyTorch for every DSL
    if reference.is_file():
        shutil.copy2(reference, workspace / "kernels" / reference.name)
    if knowledge_dirs is None and registry is not None:
        knowledge_dirs = registry.collect("kp_knowledge_dirs")
    kb_target = workspace / "knowledge_base"
    for kb in knowledge_dirs or []:
        if kb.dsl == dsl and Path(kb.path).is_dir():
            shutil.copytree(kb.path, kb_target / dsl, dirs_exist_ok=True)
    variables = {
        "kernel_name": kernel_name,
        "kernel_file": kernel_path.name,
        "suffix": kernel_path.suffix or ".txt",
        "spec_file": spec_path.name,
        "reference_file": reference.name,
        "has_reference": reference.is_file(),
        "variant": variant,
        "dsl": dsl,
        "device": device,
        "max_trials": settings.max_trials,
        "trials_dir": "trials",
        "rtol": settings.correctness_rtol,
        "atol": settings.correctness_atol,
        "stage_order": list(STAGE_ORDER),
    }
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    template_dir = files("kernelpilot.engines").joinpath("claude_templates")
    written = []
    for target, template in TEMPLATES.items():
        text = env.from_string(template_dir.joinpath(template).read_text(encoding="utf-8")).render(
            **variables
        )
        path = workspace / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(target)
    settings_path = workspace / ".claude" / "settings.json"
    settings_path.write_text(
        json.dumps({"permissions": {"allow": ALLOWED_TOOLS}}, indent=2), encoding="utf-8"
    )
    written.append(".claude/settings.json")
    return WorkspaceInfo(path=workspace, kernel_name=kernel_name, files=written)


def claude_command(info: WorkspaceInfo, max_turns: int = 80) -> list[str]:
    """The headless command line; deliberately without --dangerously-skip-permissions."""
    return ["claude", "-p", f"/optimize-kernel {info.kernel_name}", "--max-turns", str(max_turns)]


def launch_claude(info: WorkspaceInfo, *, max_turns: int = 80, which: Any = shutil.which) -> LaunchResult:
    executable = which("claude")
    command = claude_command(info, max_turns)
    if executable is None:
        return LaunchResult(
            False,
            f"`claude` CLI not found on PATH; the workspace {info.path} is ready: run "
            f"`cd {shlex.quote(str(info.path))} && {shlex.join(command)}`",
            command=command,
        )
    log = open(info.path / "claude_run.log", "w", encoding="utf-8")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        [executable, *command[1:]],
        cwd=info.path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return LaunchResult(
        True,
        f"launched claude (pid {proc.pid}) in {info.path}; output goes to claude_run.log. This says only that "
        "it started: check `kernelpilot skill trial status` for what it achieved.",
        pid=proc.pid,
        command=command,
    )


def git_init(path: Path) -> str:
    """WORKSPACE_GIT_INIT=true: make the workspace a git repository with the starting files committed,
    so every change the agent makes shows in ``git diff``."""
    if shutil.which("git") is None:
        return f"WORKSPACE_GIT_INIT: git not found on PATH; {path} is not a repository"
    if (path / ".git").exists():
        return f"{path} is already a git repository"
    steps = [
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        [
            "git",
            "-c",
            "user.name=kernelpilot",
            "-c",
            "user.email=kernelpilot@localhost",
            "commit",
            "-q",
            "-m",
            "workspace as written by kernelpilot",
        ],
    ]
    for step in steps:
        done = subprocess.run(step, cwd=path, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return f"WORKSPACE_GIT_INIT: `{shlex.join(step)}` failed: {done.stderr.strip()[:300]}"
    return f"{path} is a git repository (initial commit of the workspace)"

"""docs/migrating_from_xe_forge.md: its kernel and Xe-Forge-format spec, and every quick-start command
in it, run as written on a machine without a GPU; every command parses."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

DOC = (REPO / "docs" / "migrating_from_xe_forge.md").read_text()


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.S)


def _quick_start() -> list[list[str]]:
    (block,) = [b for b in _blocks("bash") if "kernelpilot optimize --input kernel.py" in b]
    return [shlex.split(line)[1:] for line in block.splitlines() if line.startswith("kernelpilot ")]


def _workdir(tmp_path: Path) -> Path:
    (kernel,) = _blocks("python")
    (spec,) = _blocks("yaml")
    (tmp_path / "kernel.py").write_text(kernel)
    (tmp_path / "spec.yaml").write_text(spec)
    return tmp_path


def test_every_quick_start_command_parses() -> None:
    from kernelpilot.cli import build_parser

    commands = _quick_start()
    assert len(commands) >= 15
    parser = build_parser()
    for args in commands:
        parser.parse_args(args)  # argparse exits (SystemExit) on an unknown flag


def test_the_spec_loads_and_a_cpu_run_picks_ci(tmp_path: Path) -> None:
    from kernelpilot.pipeline.session import choose_variant
    from kernelpilot.spec import load_spec

    spec = load_spec(_workdir(tmp_path) / "spec.yaml")
    assert choose_variant(spec, None, "cpu") == "ci"
    assert spec.resolve("ci").init_args == (64,)


@pytest.mark.slow
def test_quick_start_runs_unchanged_on_cpu(tmp_path: Path) -> None:
    work = _workdir(tmp_path)
    env = {"OPENAI_API_BASE": "", "OPENAI_API_KEY": "", "TRIALS_DIR": str(work / "trials")}
    for args in _quick_start():
        done = run_cli(*args, cwd=work, env=env, timeout=900)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    assert (work / "optimized_kernel.py").is_file() and (work / "output.py").is_file()
    assert (work / "workspace" / "CLAUDE.md").is_file()

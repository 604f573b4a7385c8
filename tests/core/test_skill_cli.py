"""`kernelpilot skill ...` and `kernelpilot optimize` as users run them (subprocess, real exit codes),
with the real Triton executor under TRITON_INTERPRET=1 on CPU."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from tests.support import REPO, run_cli

EXAMPLE = REPO / "examples" / "softmax"

pytestmark = pytest.mark.skipif(shutil.which("python") is None, reason="needs python")


@pytest.fixture
def work(tmp_path: Path) -> Path:
    for name in ("softmax.py", "softmax_pytorch.py", "softmax.yaml"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    return tmp_path


def _wrong(work: Path) -> Path:
    path = work / "wrong.py"
    path.write_text((work / "softmax.py").read_text().replace("y = num / den", "y = num / (den + 1.0)"))
    return path


def test_analyze_and_validate(work: Path) -> None:
    done = run_cli("skill", "analyze", str(work / "softmax.py"), "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["dsl"] == "triton"
    assert {(i["category"], i["stage"]) for i in data["issues"]} >= {
        ("float64_usage", "dtype_fix"),
        ("missing_autotune", "autotuning"),
    }
    broken = work / "broken.py"
    broken.write_text(
        (work / "softmax.py").read_text().replace("def forward(self, x):", "def forward(self, x)")
    )
    done = run_cli("skill", "validate", str(broken), "--dsl", "triton", cwd=work)
    assert done.returncode == 1 and "syntax" in done.stdout.lower()
    assert run_cli("skill", "validate", str(work / "softmax.py"), cwd=work).returncode == 0


def test_benchmark_always_checks_correctness(work: Path) -> None:
    args = ["-s", str(work / "softmax.yaml"), "--variant", "ci", "--device", "cpu", "--json"]
    done = run_cli("skill", "benchmark", str(work / "softmax.py"), str(_wrong(work)), *args, cwd=work)
    assert done.returncode == 4, done.stderr
    data = json.loads(done.stdout)
    assert data["baseline"]["verdict"] == "correct" and data["candidate"]["verdict"] == "incorrect"
    assert data["speedup"] is None and "pytorch reference" in data["oracle"]
    assert data["side_by_side"] is True  # one worker, same inputs, interleaved timing
    good = work / "good.py"
    good.write_text((work / "softmax.py").read_text().replace(".to(tl.float64)", ".to(tl.float32)"))
    done = run_cli("skill", "benchmark", str(work / "softmax.py"), str(good), *args[:-1], cwd=work)
    assert done.returncode == 0, done.stderr + done.stdout
    assert "candidate" in done.stdout and "correctness PASSED" in done.stdout and "interpreter" in done.stdout


def test_trial_workflow(work: Path) -> None:
    tree = ["--trials-dir", str(work / "trials"), "--name", "sm"]
    spec = ["-s", str(work / "softmax.yaml"), "--variant", "ci", "--device", "cpu"]
    done = run_cli(
        "skill", "trial", "init", str(work / "softmax.py"), *spec, *tree, cwd=work, env={"MAX_TRIALS": "3"}
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert "t0 (baseline" in done.stdout and "correct" in done.stdout
    done = run_cli(
        "skill", "trial", "add", str(_wrong(work)), "--parent", "t0", "--stage", "dtype_fix", *tree
    )
    assert done.returncode == 4 and "incorrect" in done.stdout
    good = work / "good.py"
    good.write_text((work / "softmax.py").read_text().replace(".to(tl.float64)", ".to(tl.float32)"))
    done = run_cli("skill", "trial", "add", str(good), "--parent", "t0", "--stage", "dtype_fix", *tree)
    assert done.returncode == 0 and "t2 (dtype_fix, parent t0): correct" in done.stdout
    assert run_cli("skill", "trial", "add", str(good), "--parent", "t9", *tree).returncode == 2
    # MAX_TRIALS (3, fixed at init) is enforced by the command, not just asked for in a prompt
    third = run_cli("skill", "trial", "add", str(good), "--parent", "t2", "--stage", "autotuning", *tree)
    assert third.returncode == 0, third.stdout + third.stderr
    fourth = run_cli("skill", "trial", "add", str(good), "--parent", "t2", *tree)
    assert fourth.returncode == 2 and "trial budget exhausted: 3 of MAX_TRIALS=3" in fourth.stderr
    status = run_cli("skill", "trial", "status", *tree)
    assert "[x] t1 dtype_fix incorrect" in status.stdout and "[+] t2 dtype_fix correct" in status.stdout
    shown = run_cli("skill", "trial", "show", "t1", *tree)
    assert shown.returncode == 0 and "message:" in shown.stdout and "t1.py" in shown.stdout
    assert run_cli("skill", "trial", "show", "t42", *tree).returncode == 2
    best = json.loads(run_cli("skill", "trial", "best", *tree, "--json").stdout)
    assert best["best"]["verdict"] == "correct"
    done = run_cli("skill", "trial", "finalize", "-o", str(work / "final.py"), "--node", "t1", *tree)
    assert done.returncode == 2 and "only a correct trial" in done.stderr
    done = run_cli("skill", "trial", "finalize", "-o", str(work / "final.py"), "--node", "t2", *tree)
    assert done.returncode == 0 and (work / "final.py").read_text() == good.read_text()
    # another kernel under the same tree name is refused
    other = ["-s", str(work / "softmax.yaml"), "--variant", "ci", "--device", "cpu"]
    done = run_cli("skill", "trial", "init", str(good), *other, *tree, cwd=work)
    assert done.returncode == 2 and "kernel_sha" in done.stderr


def test_optimize_rules_engine_end_to_end(work: Path) -> None:
    out = work / "out.py"
    done = run_cli(
        "optimize",
        "-i",
        str(work / "softmax.py"),
        "-s",
        str(work / "softmax.yaml"),
        "--variant",
        "ci",
        "--device",
        "cpu",
        "-o",
        str(out),
        "--correctness-only-stages",
        "all",
        "--json",
        cwd=work,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    summary = json.loads(done.stdout)
    assert {s["stage"]: s["status"] for s in summary["stages"]} == {
        "dtype_fix": "improved",
        "autotuning": "improved",
    }
    text = out.read_text()
    assert "tl.float64" not in text and "@triton.autotune" in text
    assert summary["final"][0]["verdict"] == "correct" and summary["final"][0]["interpreter"] is True
    record = json.loads(Path(work / summary["record"]).read_text())
    assert record["status"] == "done" and record["engine"] == "rules" and record["llm_usage"] is None
    # the result independently passes the always-checking benchmark skill
    check = run_cli(
        "skill", "benchmark", str(work / "softmax.py"), str(out), "-s", str(work / "softmax.yaml"),
        "--variant", "ci", "--device", "cpu", "--seed", "777", cwd=work,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    # an agent can continue the pipeline's tree with the checking `trial add`
    tree = ["--trials-dir", str(work / "trials"), "--name", "softmax"]
    added = run_cli("skill", "trial", "add", str(_wrong(work)), "--parent", "t0", "--stage", "fusion", *tree)
    assert added.returncode == 4 and "incorrect" in added.stdout, added.stderr
    assert "fusion incorrect" in run_cli("skill", "trial", "status", *tree).stdout


def test_optimize_input_errors(work: Path) -> None:
    base = ["optimize", "-i", str(work / "softmax.py"), "-s", str(work / "softmax.yaml"), "--device", "cpu"]
    done = run_cli(*base, "--no-correctness", cwd=work)
    assert done.returncode == 2 and "never" not in done.stdout and "--no-correctness" in done.stderr
    done = run_cli(*base, "--no-trials", cwd=work)
    assert done.returncode == 2 and "--trials-dir" in done.stderr
    done = run_cli(*base, "--stages", "dtype_fix,speedup", cwd=work)
    assert done.returncode == 2 and "speedup" in done.stderr and "autotuning" in done.stderr
    done = run_cli(*base, "--variant", "nope", cwd=work)
    assert done.returncode == 2 and "softmax.yaml" in done.stderr and "bench-gpu" in done.stderr
    done = run_cli("optimize", "-i", str(work / "missing.py"), "-s", str(work / "softmax.yaml"), cwd=work)
    assert done.returncode == 2 and "missing.py" in done.stderr


def test_claude_engine_writes_workspace_and_launches_only_when_asked(work: Path) -> None:
    ws = work / "ws"
    base = ["optimize", "-i", str(work / "softmax.py"), "-s", str(work / "softmax.yaml"), "--device", "cpu"]
    env = {"PATH": os.environ["PATH"].replace(str(Path.home() / ".local/bin"), "")}
    done = run_cli(*base, "--engine", "claude", "--workspace", str(ws), cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    assert "not launched" in done.stdout
    for rel in (
        "CLAUDE.md",
        "config.yaml",
        ".claude/commands/optimize-kernel.md",
        ".claude/agents/tool-runner.md",
        ".claude/settings.json",
        "kernels/softmax.py",
        "kernels/softmax_pytorch.py",
        "kernels/softmax.yaml",
    ):
        assert (ws / rel).is_file(), rel
    claude_md = (ws / "CLAUDE.md").read_text()
    assert "kernelpilot skill trial add" in claude_md and "softmax_pytorch.py" in claude_md
    allow = json.loads((ws / ".claude/settings.json").read_text())["permissions"]["allow"]
    assert "Bash(kernelpilot skill:*)" in allow and "Bash" not in allow

    # --auto-launch without `claude` on PATH: says so, exit 1, the workspace stays usable
    import sys

    bare = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    done = run_cli(*base, "--engine", "claude", "--workspace", str(ws), "--auto-launch", cwd=work, env=bare)
    assert done.returncode == 1 and "`claude` CLI not found" in done.stdout

    # a fake `claude` on PATH records how it was started
    bin_dir = work / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(f'#!/bin/sh\necho "$@" > {work / "claude_args.txt"}\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = run_cli(*base, "--engine", "claude", "--workspace", str(ws), "--auto-launch", cwd=work, env=env)
    assert done.returncode == 0 and "launched claude" in done.stdout and "succeeded" not in done.stdout
    for _ in range(50):
        if (work / "claude_args.txt").exists():
            break
        import time

        time.sleep(0.1)
    args = (work / "claude_args.txt").read_text()
    assert "-p /optimize-kernel softmax" in args and "dangerously" not in args


def test_profile_reports_spread_and_marks_interpreter(work: Path) -> None:
    spec = ["-s", str(work / "softmax.yaml"), "--variant", "ci", "--device", "cpu"]
    done = run_cli("skill", "profile", str(work / "softmax.py"), *spec, "--repeats", "2", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert len(data["runs"]) == 2 and all(
        r["verdict"] == "correct" and r["interpreter"] for r in data["runs"]
    )
    assert data["median_ms"] > 0 and data["spread"] >= 0
    # checked against the ORIGINAL's oracle (softmax_pytorch.py), not against itself
    wrong = _wrong(work)
    done = run_cli("skill", "profile", str(wrong), "--original", str(work / "softmax.py"), *spec, cwd=work)
    assert done.returncode == 4 and "FAILED (incorrect)" in done.stdout


def test_dsl_detection_and_unknown_dsl(work: Path) -> None:
    gluon = REPO / "examples" / "gluon_softmax" / "gluon_softmax.py"
    done = run_cli("skill", "analyze", str(gluon), "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["dsl"] == "gluon"  # not claimed by the Triton plugin
    plain = work / "plain.py"
    plain.write_text("print('no kernel here')\n")
    done = run_cli("skill", "analyze", str(plain), cwd=work)
    assert done.returncode == 2 and "no plugin claims it" in done.stderr and "--dsl" in done.stderr
    done = run_cli("skill", "validate", str(plain), "--dsl", "fortran", cwd=work)
    assert done.returncode == 2 and "unknown dsl 'fortran'" in done.stderr and "triton" in done.stderr

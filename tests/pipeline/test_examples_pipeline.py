"""`kernelpilot optimize` (the core pipeline) with the Triton plugin's rules engine on a shipped example,
under the CPU interpreter: the output is verified, float64 is gone and the kernel is autotuned."""

from __future__ import annotations

import json

import pytest

from tests.support import REPO


@pytest.mark.slow
def test_optimize_layernorm_with_rules_engine_on_cpu(cli, tmp_path):
    pytest.importorskip("triton")
    folder = REPO / "examples" / "layernorm"
    out = tmp_path / "layernorm_opt.py"
    record = tmp_path / "record.json"
    result = cli(
        "optimize",
        "-i",
        str(folder / "layernorm.py"),
        "-s",
        str(folder / "layernorm.yaml"),
        "--variant",
        "ci",
        "--device",
        "cpu",
        "--engine",
        "rules",
        "--correctness-only-stages",
        "all",
        "--trials-dir",
        str(tmp_path / "trials"),
        "--record",
        str(record),
        "-o",
        str(out),
        cwd=tmp_path,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    optimized = out.read_text()
    assert "tl.float64" not in optimized and "@triton.autotune(" in optimized
    data = json.loads(record.read_text())
    assert data["dsl"] == "triton" and data["engine"] == "rules"
    final = data["final"][0]
    assert final["verdict"] == "correct" and final["interpreter"] is True
    accepted = {s["stage"] for s in data["stages"] if s.get("accepted")}
    assert {"dtype_fix", "autotuning"} <= accepted, data["stages"]

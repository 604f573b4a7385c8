"""Profiler output in one schema: Nsight Compute's raw CSV and VTune's hotspots table (formats in
tests/data/profiles/), the summary the prompts get, the profiler commands, and the refusals."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernelpilot.errors import InputError, ToolMissingError
from kernelpilot.profiling import ncu, vtune
from kernelpilot.profiling.collect import check_tool
from kernelpilot.settings import load_settings
from tests.support import REPO, run_cli

DATA = REPO / "tests" / "data" / "profiles"


def test_ncu_raw_csv_per_kernel_counters_and_stall_shares() -> None:
    report = ncu.parse_raw_csv((DATA / "ncu_raw.csv").read_text())
    top = report.primary
    assert top is not None and top.name == "softmax_kernel" and top.launches == 2
    assert top.total_us == pytest.approx(41.21 + 40.89)  # ns with thousands separators -> us
    assert top.metrics["sm_throughput_pct"] == pytest.approx(12.0)
    assert top.metrics["dram_throughput_pct"] == pytest.approx(82.0)
    assert top.metrics["achieved_occupancy_pct"] == pytest.approx(45.0)
    assert top.metrics["l2_hit_rate_pct"] == pytest.approx(13.0)
    # shares of stall cycles; "selected" is issuing, not a stall
    assert set(top.stalls) == {"long_scoreboard", "wait", "barrier"}
    assert top.stalls["long_scoreboard"] == pytest.approx(100 * 6.0 / 7.9)
    assert len(report.kernels) == 2  # the fill kernel, name cut at its argument list
    assert report.kernels[1].name.startswith("void at::native::vectorized_elementwise_kernel<4")


def test_ncu_summary_reads_like_a_diagnosis() -> None:
    summary = ncu.parse_raw_csv((DATA / "ncu_raw.csv").read_text()).summary()
    first, *rest = summary.splitlines()
    assert first.startswith("ncu: hottest kernel softmax_kernel (2 launch(es), 41.05 us each")
    assert "DRAM throughput 82%" in summary and "SM throughput 12%" in summary
    assert "top stall reasons: long_scoreboard 76%" in summary
    assert "memory-bound" in summary and "long_scoreboard dominates" in summary
    assert len(summary.splitlines()) <= 8


def test_vtune_hotspots_table() -> None:
    report = vtune.parse_hotspots_csv((DATA / "vtune_hotspots.tsv").read_text())
    names = [k.name for k in report.kernels]
    assert names == ["softmax_kernel", "at::native::FillFunctor"]  # [Outside any task] skipped
    top = report.primary
    assert top.launches == 22 and top.total_us == pytest.approx(4430.0)
    assert top.metrics["xve_stalled_pct"] == 63.9  # the heavier SIMD-width variant's ratios
    assert top.metrics["mem_read_gbs"] == 402.1
    summary = report.summary()
    assert "XVE stalled 64%" in summary and "XVE stalled more than active" in summary
    assert "poor cache reuse" in summary  # L3 miss 71 %


def test_empty_outputs_say_so() -> None:
    assert ncu.parse_raw_csv("==PROF== nothing\n").warnings
    assert vtune.parse_hotspots_csv("").summary() == "vtune: no kernel was captured"


def test_ncu_command_keeps_clocks_and_collects_only_the_measured_launches() -> None:
    cmd = ncu.command("ncu", ["python", "t.py"])
    joined = " ".join(cmd)
    assert "--clock-control none" in joined and "--profile-from-start off" in joined
    assert "--page raw" in joined and "--csv" in cmd and cmd[-2:] == ["python", "t.py"]
    assert "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" in joined


def test_tool_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings(cli={"ncu_bin": "/nonexistent/ncu"}, env_file=None)
    with pytest.raises(InputError, match="ncu profiles cuda kernels; this run's device is cpu"):
        check_tool("ncu", "cpu", settings)
    with pytest.raises(ToolMissingError, match="NCU_BIN"):
        check_tool("ncu", "cuda", settings)


def test_skill_profile_with_ncu_on_cpu_exits_2(tmp_path: Path) -> None:
    example = REPO / "examples" / "softmax"
    done = run_cli(
        "skill", "profile", str(example / "softmax.py"), "-s", str(example / "softmax.yaml"),
        "--variant", "ci", "--device", "cpu", "--profiler", "ncu", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "ncu profiles cuda kernels" in done.stderr


@pytest.mark.parametrize("style", ["module", "method"])
def test_profile_target_runs_the_kernel_with_example_inputs(tmp_path: Path, style: str) -> None:
    """The program the profiler runs, on the CPU (no collection): Model built, inputs from the spec or
    from get_example_inputs (a module function, or Xe-Forge's Model method)."""
    kernel = tmp_path / "k.py"
    maker = "def get_example_inputs():\n    return [torch.ones(3, 4)]\n" if style == "module" else ""
    method = (
        "    @staticmethod\n    def get_example_inputs():\n        return [torch.ones(3, 4)]\n"
        if style == "method"
        else ""
    )
    kernel.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n"
        f"{method}"
        "    def forward(self, x):\n        open(__file__ + '.ran', 'a').write('x')\n        return x * 2\n\n\n"
        f"{maker}"
    )
    job = {
        "kernel_path": str(kernel), "original_path": str(kernel),
        "variant": {"inputs": [], "init_args": [], "dtype": None}, "device": "cpu",
        "warmup": 2, "iters": 3, "tool": "none", "vtune_bin": "", "result_dir": "", "seed": 0,
    }  # fmt: skip
    (tmp_path / "job.json").write_text(json.dumps(job))
    done = subprocess.run(
        [sys.executable, "-m", "kernelpilot.profiling.target", str(tmp_path / "job.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.py.ran").read_text() == "x" * 5

"""Command-line flags of `optimize` and `skill profile` reach what they claim to set."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kernelpilot.settings import load_settings
from tests.support import REPO, run_cli

DATA = REPO / "tests" / "data" / "profiles"


def _optimize_args(*extra: str):
    from kernelpilot.cli import build_parser

    return build_parser().parse_args(["optimize", "-i", "k.py", "-s", "k.yaml", *extra])


def test_hint_flags_become_settings_and_autotune_hints() -> None:
    from kernelpilot.cli.optimize_cmd import cli_settings
    from kernelpilot.dsl_plugins.triton.rewrite.autotune import TuneHints

    args = _optimize_args("--num-warps", "16", "--tile-size", "64", "--target-dtype", "bfloat16",
                          "--target-speedup", "1.5", "--engine", "dspy", "--auto-launch")  # fmt: skip
    settings = load_settings(cli=cli_settings(args), env_file=None)
    hints = TuneHints.from_settings(settings)
    assert (hints.num_warps, hints.tile_m, hints.tile_n) == (16, 64, 64)
    assert settings.target_dtype == "bfloat16" and settings.target_speedup == 1.5
    assert settings.engine == "llm" and settings.auto_launch is True


def test_profile_flag_needs_a_gpu(tmp_path: Path) -> None:
    example = REPO / "examples" / "softmax"
    done = run_cli(
        "optimize", "-i", str(example / "softmax.py"), "-s", str(example / "softmax.yaml"),
        "--variant", "ci", "--device", "cpu", "--profile", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2 and "--profile needs a GPU" in done.stderr


def test_vtune_warmup_and_iters_reach_the_profiled_program(monkeypatch: pytest.MonkeyPatch) -> None:
    """The VTune path without VTune: the commands are captured, the report is the recorded format."""
    from kernelpilot.profiling import collect
    from kernelpilot.spec import load_spec

    seen: list[list[str]] = []
    jobs: list[dict] = []

    def fake_run(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        if "-collect" in cmd:
            jobs.append(json.loads(Path(cmd[-1]).read_text()))
            return subprocess.CompletedProcess(cmd, 0, "", "")
        return subprocess.CompletedProcess(cmd, 0, (DATA / "vtune_hotspots.tsv").read_text(), "")

    monkeypatch.setattr(collect, "_run", fake_run)
    settings = load_settings(
        cli={"vtune_bin": "/bin/true", "vtune_warmup": 7, "vtune_iters": 11}, env_file=None
    )
    example = REPO / "examples" / "softmax"
    report = collect.profile(
        (example / "softmax.py").read_text(), original_path=example / "softmax.py",
        variant=load_spec(example / "softmax.yaml").variant("ci"), device="xpu", tool="vtune", settings=settings,
    )  # fmt: skip
    assert (jobs[0]["warmup"], jobs[0]["iters"], jobs[0]["tool"]) == (7, 11, "vtune")
    assert seen[0][1:4] == ["-collect", "gpu-offload", "-start-paused"]
    assert seen[1][1:3] == ["-report", "hotspots"]
    assert report.primary.name == "softmax_kernel"


def test_intel_prompt_facts_carry_grf_mode_and_xe_numbers() -> None:
    from kernelpilot.llm import prompt_context as pc

    settings = load_settings(cli={"grf_mode": "128", "hw_device": "arc_b580"}, env_file=None)
    hw = pc.hw_facts(pc.catalogue_device(settings, None))
    device = pc.device_text(hw, "xpu")
    assert "Intel Arc B580 (intel): 20 Xe-cores" in device and "456 GB/s" in device
    assert "128 KiB shared memory/SLM, 512 KiB register file" in device and "sub-group size 16" in device
    tuning = pc.tuning_text(pc.tuning_facts(settings, hw["vendor"], "xpu"))
    assert "GRF mode 128" in tuning and "num_warps 32 (typical default)" in tuning
    cuda = pc.tuning_text(pc.tuning_facts(load_settings(env_file=None), "nvidia", "cuda"))
    assert "GRF" not in cuda
    assert "not found in the device catalogue" in pc.device_text({}, "cuda")

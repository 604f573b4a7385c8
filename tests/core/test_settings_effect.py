"""Every setting a user brings from Xe-Forge takes effect or is refused (exit 2) with the reason.

Settings that only make sense inside a run (knowledge base, intermediates, target speedup, hints)
are proven in tests/pipeline/test_settings_in_pipeline.py; here: the refusals, the aliases and the
device/variant choices made before a run starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.errors import InputError
from kernelpilot.settings import Settings, load_settings, parse_device_index
from tests.support import REPO, run_cli

SEED_NAMES = (
    "MAX_ATTEMPTS_PER_STAGE",
    "VALIDATE_EACH_STAGE",
    "USE_COVER",
    "TRIALS_ENABLED",
    "MKL_INCLUDE",
    "AUTO_LOAD_KNOWLEDGE",
    "KERNELPILOT_LLM_MODEL",
    "LLM_MODLE",
)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [*Settings.model_fields, *SEED_NAMES]:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("MAX_ATTEMPTS_PER_STAGE", "5", "AGENT_MAX_ITERATIONS is the number of attempts"),
        ("VALIDATE_EACH_STAGE", "false", "checked against the oracle"),
        ("USE_COVER", "false", "--engine claude"),
        ("TRIALS_ENABLED", "false", "interrupted run resume"),
        ("MKL_INCLUDE", "/opt/mkl/include", "do not use MKL headers"),
        ("AGENT_STRATEGY", "react", "not offered"),
        ("REQUIRE_CORRECTNESS", "false", "never accepts a candidate without a correctness check"),
        ("KERNELPILOT_LLM_MODEL", "openai/x", "set LLM_MODEL instead"),
        ("LLM_MODLE", "openai/x", "did you mean LLM_MODEL"),
        ("LLM_MODEL", "", "at least 1 character"),
    ],
)
def test_variables_without_effect_are_refused_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, reason: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InputError) as info:
        load_settings(env_file=None)
    assert name in str(info.value) and reason in str(info.value)


def test_refusal_names_the_dotenv_file_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("USE_COVER=false\n")
    done = run_cli("doctor", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "USE_COVER='false' (.env file .env)" in done.stderr


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("VALIDATE_EACH_STAGE", "true"),
        ("USE_COVER", "true"),
        ("TRIALS_ENABLED", "1"),
        ("AGENT_STRATEGY", "cover"),
    ],
)
def test_the_value_that_matches_what_kernelpilot_does_is_accepted(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    load_settings(env_file=None)


def test_renamed_and_aliased_values_take_effect_with_a_notice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kernelpilot.migration as migration

    monkeypatch.setattr(migration, "_noticed", set())  # once per process: earlier tests may have printed it
    monkeypatch.setenv("AUTO_LOAD_KNOWLEDGE", "false")
    monkeypatch.setenv("ENGINE", "dspy")
    settings = load_settings(env_file=None)
    assert settings.knowledge_base_enabled is False
    assert settings.engine == "llm"
    err = capsys.readouterr().err
    assert "AUTO_LOAD_KNOWLEDGE is now KNOWLEDGE_BASE_ENABLED" in err
    assert "ENGINE=dspy is now ENGINE=llm" in err
    assert err.count("\n") == 2  # one line each


def test_stage_alias_xpu_specific() -> None:
    from kernelpilot.pipeline.planner import parse_stages

    assert parse_stages("dtype_fix,xpu_specific") == ["dtype_fix", "device_specific"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("xpu", ("xpu", None)), ("xpu:1", ("xpu", 1)), ("cuda:0", ("cuda", 0)), ("3", (None, 3))],
)
def test_xpu_device_values(text: str, expected: tuple) -> None:
    assert parse_device_index(text) == expected


def test_bad_xpu_device_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XPU_DEVICE", "gpu1")
    with pytest.raises(InputError, match="XPU_DEVICE='gpu1'"):
        load_settings(env_file=None)


def test_xpu_device_picks_device_and_restricts_workers_to_that_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.pipeline.session import open_session

    monkeypatch.setenv("XPU_DEVICE", "xpu:1")
    monkeypatch.delenv("ZE_AFFINITY_MASK", raising=False)
    example = REPO / "examples" / "softmax"
    session = open_session(
        example / "softmax.py",
        example / "softmax.yaml",
        variant="ci",
        device=None,
        dsl="triton",
        cli_settings={},
        prepare=False,
    )
    getattr(session.executor, "close", lambda: None)()
    import os

    assert session.device == "xpu" and os.environ["ZE_AFFINITY_MASK"] == "1"
    # the command line still wins over the variable
    session = open_session(
        example / "softmax.py", example / "softmax.yaml", variant="ci", device="cpu", dsl="triton",
        cli_settings={}, prepare=False,
    )  # fmt: skip
    getattr(session.executor, "close", lambda: None)()
    assert session.device == "cpu"


def test_device_index_conflicting_with_the_users_own_mask_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelpilot.pipeline.session import select_device_index

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(InputError, match="CUDA_VISIBLE_DEVICES=0 is already set"):
        select_device_index("cuda", 2)


def test_cpu_run_without_variant_prefers_a_cpu_sized_variant(capsys: pytest.CaptureFixture[str]) -> None:
    from kernelpilot.pipeline.session import choose_variant
    from kernelpilot.spec import load_spec

    spec = load_spec(REPO / "examples" / "softmax" / "softmax.yaml")
    assert choose_variant(spec, None, "cpu") == "ci"
    assert "no GPU: using spec variant 'ci'" in capsys.readouterr().err
    assert choose_variant(spec, None, "cuda") == "bench-gpu"
    assert choose_variant(spec, "bench-gpu-1", "cpu") == "bench-gpu-1"  # the user's choice stands


def test_workspace_git_init_and_auto_launch_settings(tmp_path: Path) -> None:
    example = REPO / "examples" / "softmax"
    env = {
        "WORKSPACE_GIT_INIT": "true",
        "AUTO_LAUNCH": "true",
        "WORKSPACE": str(tmp_path / "my ws"),
        "PATH": str(Path(__import__("sys").executable).parent) + ":/usr/bin:/bin",
    }
    done = run_cli(
        "optimize", "-i", str(example / "softmax.py"), "-s", str(example / "softmax.yaml"),
        "--variant", "ci", "--device", "cpu", "--engine", "claude", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert (tmp_path / "my ws" / ".git").is_dir(), done.stdout + done.stderr
    # AUTO_LAUNCH=true tried to launch; without `claude` on PATH it says so, with a quoted command
    assert done.returncode == 1, done.stdout + done.stderr
    assert "`claude` CLI not found" in done.stdout
    assert f"cd '{tmp_path / 'my ws'}' && claude -p '/optimize-kernel softmax'" in done.stdout

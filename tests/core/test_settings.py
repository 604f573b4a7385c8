"""Settings priority: CLI > spec file > environment (.env) > defaults; errors name the variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelpilot.errors import InputError
from kernelpilot.settings import Settings, load_settings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in Settings.model_fields:
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults_match_documented_values() -> None:
    s = load_settings(env_file=None)
    assert s.correctness_rtol == 1e-2 and s.correctness_atol == 1e-5
    assert s.agent_max_iterations == 5 and s.best_k == 1
    assert s.resolved_engine() == "rules"  # no LLM configured -> rules


def test_priority_cli_over_spec_over_env_over_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CORRECTNESS_RTOL", "0.5")
    assert load_settings(env_file=None).correctness_rtol == 0.5
    assert load_settings(spec={"correctness_rtol": 0.25}, env_file=None).correctness_rtol == 0.25
    s = load_settings(cli={"CORRECTNESS_RTOL": 0.125}, spec={"correctness_rtol": 0.25}, env_file=None)
    assert s.correctness_rtol == 0.125
    # an unset CLI flag (None) does not mask the spec
    assert (
        load_settings(cli={"correctness_rtol": None}, spec={"correctness_rtol": 0.25}).correctness_rtol
        == 0.25
    )


def test_dotenv_file_is_read_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_file = tmp_path / ".env"
    env_file.write_text("LLM_MODEL=openai/from-dotenv\nBEST_K=3\n")
    s = load_settings(env_file=env_file)
    assert s.llm_model == "openai/from-dotenv" and s.best_k == 3
    monkeypatch.setenv("BEST_K", "4")
    assert load_settings(env_file=env_file).best_k == 4


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("CORRECTNESS_RTOL", "abc", "valid number"),
        ("ENGINE", "bogus", "'auto', 'llm', 'rules' or 'claude'"),
        ("LOG_LEVEL", "LOUD", "'DEBUG'"),
        ("GRF_MODE", "512", "'256'"),
        ("AGENT_MAX_ITERATIONS", "0", "greater than or equal to 1"),
    ],
)
def test_invalid_env_value_names_variable_and_allowed(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(InputError) as info:
        load_settings(env_file=None)
    assert name in str(info.value) and expected in str(info.value)
    assert f"environment variable {name}" in str(info.value)
    assert info.value.exit_code == 2


def test_unknown_spec_setting_is_an_error() -> None:
    with pytest.raises(InputError, match="unknown setting"):
        load_settings(spec={"correctnes_rtol": 1}, spec_file="spec.yaml", env_file=None)


def test_api_key_never_in_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret")
    s = load_settings(env_file=None)
    assert s.llm_configured() and s.resolved_engine() == "llm"
    assert "sk-very-secret" not in repr(s)
    assert "sk-very-secret" not in str(s.public_dict())
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "sk-very-secret"

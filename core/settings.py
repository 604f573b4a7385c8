"""Settings from defaults, environment, ``.env``, spec files and CLI flags.

Priority (highest first): **CLI flags > spec file > environment (incl. ``.env``) > defaults.**  The
variable names are the ones users already write in their ``.env`` files (LLM_MODEL, OPENAI_API_BASE,
CORRECTNESS_RTOL, ...).  A bad value is an :class:`~kernelpilot.errors.InputError` that names the
variable, where it came from, and the allowed values; it is never replaced by a default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kernelpilot.errors import InputError

Engine = Literal["auto", "llm", "rules", "claude"]
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
GrfMode = Literal["default", "128", "256", "auto"]
TargetDtype = Literal["float16", "bfloat16", "float32"]


class Settings(BaseSettings):
    """All user-tunable settings.  Field names are the environment variable names, lower-cased."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        case_sensitive=False,
        extra="ignore",
        validate_default=True,
    )

    # --- LLM (litellm) ---
    llm_model: str = Field("openai/gpt-4o", description="litellm model name, e.g. openai/gpt-4o")
    openai_api_base: str | None = Field(None, description="OpenAI-compatible endpoint base URL")
    openai_api_key: SecretStr | None = Field(None, description="API key (never logged)")
    llm_temperature: float = Field(0.1, ge=0.0, le=2.0)
    llm_max_tokens: int = Field(8192, gt=0)
    llm_timeout_s: float = Field(300.0, gt=0)
    llm_cache_dir: Path = Field(Path(".kernelpilot/llm_cache"))

    # --- optimization pipeline ---
    engine: Engine = Field("auto", description="auto = llm when LLM_MODEL has an endpoint/key, else rules")
    agent_max_iterations: int = Field(5, ge=1)
    best_k: int = Field(1, ge=1)
    require_correctness: bool = True
    correctness_rtol: float = Field(1e-2, ge=0.0)
    correctness_atol: float = Field(1e-5, ge=0.0)
    target_dtype: TargetDtype | None = Field(None, description="None keeps the kernel's own dtype")

    # --- device defaults fed to prompts and rules (None: the device catalogue decides) ---
    default_num_warps: int | None = Field(None, ge=1, le=64)
    default_num_stages: int | None = Field(None, ge=1, le=8)
    preferred_tile_m: int | None = Field(None, ge=1)
    preferred_tile_n: int | None = Field(None, ge=1)
    preferred_tile_k: int | None = Field(None, ge=1)
    group_size_m: int = Field(4, ge=1)
    grf_mode: GrfMode = "256"

    # --- trials, logs, outputs ---
    max_trials: int = Field(10, ge=1)
    trials_dir: Path = Path("trials")
    log_level: LogLevel = "INFO"
    save_intermediate: bool = False
    log_dir: Path = Path("logs")
    kernel_dir: Path = Path("optimized_kernels")

    # --- VTune (Intel profiler) ---
    vtune_enabled: bool = False
    vtune_bin: str = "vtune"

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("engine", mode="before")
    @classmethod
    def _lower_engine(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    def llm_configured(self) -> bool:
        """True when an LLM endpoint or key is set; default flows never need one."""
        return bool(self.openai_api_base or self.openai_api_key)

    def resolved_engine(self) -> str:
        if self.engine != "auto":
            return self.engine
        return "llm" if self.llm_configured() else "rules"

    def public_dict(self) -> dict[str, Any]:
        """Settings safe to print or store: secrets are masked."""
        data = self.model_dump(mode="json")
        if self.openai_api_key is not None:
            data["openai_api_key"] = "***"
        return data


def _describe_source(name: str, spec: dict[str, Any], cli: dict[str, Any], spec_file: str | None) -> str:
    if name in cli:
        return "command-line flag"
    if name in spec:
        return f"spec file {spec_file}" if spec_file else "spec file"
    if name.upper() in os.environ or name in os.environ:
        return f"environment variable {name.upper()}"
    return "default or .env"


def load_settings(
    cli: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    *,
    spec_file: str | None = None,
    env_file: str | Path | None = ".env",
) -> Settings:
    """Build settings honouring CLI > spec file > environment/.env > defaults.

    ``cli`` and ``spec`` map setting names (either case) to values; ``None`` values are ignored so an
    unset flag never masks the environment.
    """
    normalized_spec = {k.lower(): v for k, v in (spec or {}).items() if v is not None}
    normalized_cli = {k.lower(): v for k, v in (cli or {}).items() if v is not None}
    unknown = sorted((set(normalized_spec) | set(normalized_cli)) - set(Settings.model_fields))
    if unknown:
        raise InputError(
            f"unknown setting(s) {', '.join(unknown)}; known: {', '.join(sorted(Settings.model_fields))}",
            file=spec_file,
        )
    merged = {**normalized_spec, **normalized_cli}
    if env_file is not None and Path(env_file).exists():
        from kernelpilot.fileio import read_text

        read_text(env_file, what=".env file")  # a binary, unreadable or folder .env: a clean message
    try:
        return Settings(_env_file=env_file, **merged)  # type: ignore[call-arg]
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "?"
            source = _describe_source(name, normalized_spec, normalized_cli, spec_file)
            shown = "***" if "key" in name else repr(err.get("input"))
            problems.append(f"{name.upper()}={shown} ({source}): {err['msg']}")
        raise InputError("invalid setting: " + "; ".join(problems), field=None) from None

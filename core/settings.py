"""Settings from defaults, environment, ``.env``, spec files and CLI flags.

Priority (highest first): **CLI flags > spec file > environment (incl. ``.env``) > defaults.**  The
variable names are the ones users already write in their ``.env`` files (LLM_MODEL, OPENAI_API_BASE,
CORRECTNESS_RTOL, ...).  A bad value is an :class:`~kernelpilot.errors.InputError` that names the
variable, where it came from, and the allowed values; it is never replaced by a default.  Names that
would have no effect (Xe-Forge variables it never read, a ``KERNELPILOT_`` prefix, a typo of a
setting) are refused too (:mod:`kernelpilot.migration`); other environment variables are not ours
to judge and are left alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kernelpilot.errors import InputError

Engine = Literal["auto", "llm", "rules", "claude"]
Device = Literal["cuda", "xpu", "cpu"]
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
    llm_model: str = Field(
        "openai/gpt-4o", min_length=1, description="litellm model name, e.g. openai/gpt-4o"
    )
    openai_api_base: str | None = Field(None, description="OpenAI-compatible endpoint base URL")
    openai_api_key: SecretStr | None = Field(None, description="API key (never logged)")
    llm_temperature: float = Field(0.1, ge=0.0, le=2.0)
    llm_max_tokens: int = Field(8192, gt=0)
    llm_timeout_s: float = Field(300.0, gt=0)
    llm_cache_dir: Path = Field(Path(".kernelpilot/llm_cache"))

    # --- optimization pipeline ---
    engine: Engine = Field("auto", description="auto = llm when LLM_MODEL has an endpoint/key, else rules")
    agent_max_iterations: int = Field(5, ge=1)
    agent_strategy: Literal["cover"] = Field(
        "cover", description="generate -> check against the oracle -> retry with the verdict (the only loop)"
    )
    best_k: int = Field(1, ge=1)
    target_speedup: float | None = Field(
        None, gt=1.0, description="stop running further stages once the kernel is this much faster"
    )
    require_correctness: Literal[True] = True
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
    device_type: Device | None = Field(None, description="default of --device")
    dsl: str | None = Field(None, description="default of --dsl")
    xpu_device: str | None = Field(
        None, description="device and index: xpu, xpu:1, cuda:0 or a bare index (the default of --device)"
    )
    hw_device: str | None = Field(
        None, description="device-catalogue entry the prompts describe (default: the detected GPU)"
    )

    # --- knowledge base ---
    knowledge_base_enabled: bool = True
    knowledge_dir: Path | None = Field(
        None, description="a folder of your own KB files, used with the built-in"
    )

    # --- trials, logs, outputs ---
    max_trials: int = Field(10, ge=1)
    trials_dir: Path = Path("trials")
    log_level: LogLevel = "INFO"
    save_intermediate: bool = False
    log_dir: Path = Path("logs")
    kernel_dir: Path = Path("optimized_kernels")

    # --- claude engine ---
    auto_launch: bool = False
    workspace: Path | None = None
    workspace_git_init: bool = False

    # --- profilers ---
    vtune_enabled: bool = False
    vtune_bin: str = "vtune"
    vtune_warmup: int = Field(5, ge=0)
    vtune_iters: int = Field(20, ge=1)
    ncu_bin: str = "ncu"

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_log_level(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("engine", mode="before")
    @classmethod
    def _lower_engine(cls, value: Any) -> Any:
        value = value.lower() if isinstance(value, str) else value
        if value == "dspy":
            from kernelpilot.migration import notice

            notice("ENGINE=dspy is now ENGINE=llm (the same LLM pipeline, through litellm)")
            return "llm"
        return value

    @field_validator("agent_strategy", mode="before")
    @classmethod
    def _strategy(cls, value: Any) -> Any:
        text = str(value).strip().lower()
        if text in ("react", "hybrid"):
            raise ValueError(
                f"{text!r} is not offered: the llm engine's loop is generate -> check against the oracle -> "
                "retry with the verdict (cover); for an agent that calls tools itself use --engine claude"
            )
        return text

    @field_validator("require_correctness", mode="before")
    @classmethod
    def _correctness(cls, value: Any) -> Any:
        if str(value).strip().lower() in ("false", "0", "no", "off"):
            raise ValueError(
                "kernelpilot never accepts a candidate without a correctness check; "
                "loosen CORRECTNESS_RTOL/CORRECTNESS_ATOL instead"
            )
        return True

    @field_validator("dsl", "hw_device", "xpu_device", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("xpu_device")
    @classmethod
    def _device_index(cls, value: str | None) -> str | None:
        if value is not None:
            parse_device_index(value)
        return value

    def device_and_index(self) -> tuple[str | None, int | None]:
        """``XPU_DEVICE`` (or ``DEVICE_TYPE``) as (device, index); index None = the default GPU."""
        if self.xpu_device is not None:
            device, index = parse_device_index(self.xpu_device)
            return device or self.device_type, index
        return self.device_type, None

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


def parse_device_index(text: str) -> tuple[str | None, int | None]:
    """``xpu`` -> (xpu, None); ``xpu:1`` -> (xpu, 1); ``2`` -> (None, 2); anything else: ValueError."""
    head, _, tail = str(text).strip().lower().partition(":")
    if head.isdigit() and not tail:
        return None, int(head)
    if head not in ("cuda", "xpu", "cpu"):
        raise ValueError(f"{text!r}: use cuda, xpu or cpu, optionally with ':<index>', or a bare index")
    if not tail:
        return head, None
    if not tail.isdigit():
        raise ValueError(f"{text!r}: the index after ':' must be a non-negative integer")
    return head, int(tail)


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
    from kernelpilot.migration import check_variables, user_variables

    if env_file is not None and Path(env_file).exists():
        from kernelpilot.fileio import read_text

        read_text(env_file, what=".env file")  # a binary, unreadable or folder .env: a clean message
    renamed = check_variables(user_variables(env_file), Settings.model_fields)
    merged = {**renamed, **normalized_spec, **normalized_cli}
    try:
        settings = Settings(_env_file=env_file, **merged)  # type: ignore[call-arg]
        if settings.openai_api_key is not None:  # from a flag, the spec or .env: redacted everywhere
            from kernelpilot.secrets import add_secret

            add_secret(settings.openai_api_key.get_secret_value())
        return settings
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            name = str(err["loc"][0]) if err["loc"] else "?"
            source = _describe_source(name, normalized_spec, normalized_cli, spec_file)
            shown = "***" if "key" in name else repr(err.get("input"))
            problems.append(f"{name.upper()}={shown} ({source}): {err['msg']}")
        raise InputError("invalid setting: " + "; ".join(problems), field=None) from None

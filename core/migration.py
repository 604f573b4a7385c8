"""Names users bring from Xe-Forge: accepted aliases (with a one-line notice) and refused ones (with why).

Xe-Forge (IntelLabs/Xe-Forge v0.2.0, ``src/xe_forge/config.py`` and ``.env.example``) read its settings
from environment variables, several of which it parsed and never used.  A user's ``.env`` carries them
over.  Here every such name either maps onto a kernelpilot setting or stops the run with exit code 2
and the reason, so nothing is accepted without effect.  The same goes for settings spelled with a
``KERNELPILOT_`` prefix, which kernelpilot does not use for settings, and for names one typo away from
a setting (``LLM_MODLE``).
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from kernelpilot.errors import InputError

# Xe-Forge variable -> kernelpilot setting it now is (the value carries over unchanged).
RENAMED: dict[str, str] = {
    "AUTO_LOAD_KNOWLEDGE": "KNOWLEDGE_BASE_ENABLED",
}

# Xe-Forge variable -> why kernelpilot refuses it when it is set to anything but the harmless value.
# ``None`` as the accepted value means any value is refused.
REFUSED: dict[str, tuple[str | None, str]] = {
    "MAX_ATTEMPTS_PER_STAGE": (
        None,
        "Xe-Forge parsed it but never used it; AGENT_MAX_ITERATIONS is the number of attempts per stage",
    ),
    "VALIDATE_EACH_STAGE": (
        "true",
        "every candidate of every stage is checked against the oracle; this cannot be turned off",
    ),
    "USE_COVER": (
        "true",
        "the llm engine's loop is always generate -> check -> retry with the verdict; "
        "for an agent that calls tools itself use --engine claude",
    ),
    "TRIALS_ENABLED": (
        "true",
        "the trial tree is what lets an interrupted run resume; point TRIALS_DIR at a scratch folder instead",
    ),
    "MKL_INCLUDE": (
        None,
        "kernelpilot's SYCL builds do not use MKL headers (sycl-tla's own headers come from SYCL_TLA_DIR)",
    ),
}

_TRUE = ("true", "1", "yes", "on")
_noticed: set[str] = set()


def notice(message: str) -> None:
    """Print a one-line deprecation notice to stderr, once per process."""
    if message in _noticed:
        return
    _noticed.add(message)
    print(f"kernelpilot: deprecated: {message}", file=sys.stderr)


def _dotenv(env_file: str | Path | None) -> dict[str, str]:
    if env_file is None or not Path(env_file).is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(env_file).items() if v is not None}


def user_variables(env_file: str | Path | None) -> dict[str, tuple[str, str]]:
    """Variables the user set: name -> (value, where).  The real environment beats ``.env``."""
    found = {k.upper(): (v, f".env file {env_file}") for k, v in _dotenv(env_file).items()}
    for key, value in os.environ.items():
        found[key.upper()] = (value, f"environment variable {key}")
    return found


def check_variables(variables: Mapping[str, tuple[str, str]], settings: Iterable[str]) -> dict[str, str]:
    """Refuse names without effect; return renamed ones as ``{new_setting_name: value}``."""
    known = {s.upper() for s in settings}
    renamed: dict[str, str] = {}
    problems: list[str] = []
    for name, (value, where) in sorted(variables.items()):
        if name in RENAMED:
            new = RENAMED[name]
            notice(f"{name} is now {new} (value {value!r} used)")
            if new not in variables:
                renamed[new.lower()] = value
            continue
        if name in REFUSED:
            harmless, why = REFUSED[name]
            if harmless is None or str(value).strip().lower() not in (
                _TRUE if harmless == "true" else (harmless,)
            ):
                problems.append(f"{name}={value!r} ({where}) is not supported: {why}")
            continue
        if name.startswith("KERNELPILOT_"):
            bare = name.removeprefix("KERNELPILOT_")
            if bare in known:
                problems.append(f"{name} ({where}): settings have no prefix; set {bare} instead")
            continue
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.88)
        if close and _looks_like_setting(name):
            problems.append(f"{name} ({where}) is not a setting; did you mean {close[0]}?")
    if problems:
        raise InputError("; ".join(problems), field="settings")
    return renamed


def _looks_like_setting(name: str) -> bool:
    """Only names in our settings' vocabulary are typo candidates (PATH is not a typo of LOG_DIR)."""
    words = {
        "LLM",
        "OPENAI",
        "AGENT",
        "CORRECTNESS",
        "TARGET",
        "DEFAULT",
        "PREFERRED",
        "TILE",
        "GROUP",
        "GRF",
        "TRIALS",
        "TRIAL",
        "KNOWLEDGE",
        "VTUNE",
        "NCU",
        "BEST",
        "MAX",
        "SAVE",
        "KERNEL",
        "ENGINE",
        "WORKSPACE",
        "XPU",
        "HW",
    }
    return name.split("_", 1)[0] in words


def stage_alias(name: str) -> str:
    """Xe-Forge's ``xpu_specific`` stage is ``device_specific`` (it serves NVIDIA GPUs too)."""
    if name == "xpu_specific":
        notice("stage xpu_specific is now device_specific")
        return "device_specific"
    return name

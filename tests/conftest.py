"""Shared fixtures and the GPU / icpx skip logic."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _has_cuda_gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_gpu = _has_cuda_gpu()
    has_icpx = shutil.which("icpx") is not None
    for item in items:
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(
                pytest.mark.skip(reason="needs an NVIDIA GPU (torch.cuda.is_available() is False)")
            )
        if "icpx" in item.keywords and not has_icpx:
            item.add_marker(
                pytest.mark.skip(reason="needs Intel oneAPI icpx and an Intel GPU (icpx not on PATH)")
            )


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m kernelpilot ARGS`` in a subprocess (real exit codes, real stdout)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "kernelpilot", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli

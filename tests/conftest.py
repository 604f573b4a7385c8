"""Shared fixtures and the GPU / icpx skip logic."""

from __future__ import annotations

import os
import shutil

import pytest

# Triton 3.9 (the CPU interpreter these tests run) warns that its floating-point fusion default turns
# off in 3.10.  Pin today's default, fusion on (also what the device's Triton 3.6 does), so a newer
# Triton changes no test's numerics; a value the caller set is kept.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

from tests.support import REPO, run_cli  # noqa: F401  (REPO re-exported for fixtures)


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


@pytest.fixture
def cli():
    return run_cli

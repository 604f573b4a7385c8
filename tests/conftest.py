"""Shared fixtures and the GPU / icpx skip logic."""

from __future__ import annotations

import shutil

import pytest

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

"""Xe-Forge kernel files run unchanged: inputs from ``Model.get_example_inputs()`` (a method, as in
Xe-Forge's kernels) as well as the module function, and a Model whose ``inits`` are missing from the
spec fails with a hint, not a bare TypeError."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelpilot.worker_kit.model import build_model, example_inputs, load_module

KERNEL = """import torch

class Model(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(hidden))

    @staticmethod
    def get_example_inputs():
        return [torch.randn(2, 8)]

    def forward(self, x):
        return x * self.w
"""


def test_example_inputs_from_a_model_method(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text(KERNEL)
    first = example_inputs(torch, {"original_path": str(path)}, 7, "cpu")
    again = example_inputs(torch, {"original_path": str(path)}, 7, "cpu")
    assert first[0].shape == (2, 8) and torch.equal(first[0], again[0])  # seeded: reproducible


def test_missing_inits_get_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "k.py"
    path.write_text(KERNEL)
    module = load_module(str(path), "kp_test_inits")
    with pytest.raises(TypeError, match=r"missing 1 required positional argument.*'inits:'.*dim: IN"):
        build_model(torch, module, {"init_args": [], "dtype": None}, "cpu")
    model = build_model(torch, module, {"init_args": [8], "dtype": None}, "cpu")
    assert model(torch.ones(2, 8)).shape == (2, 8)

"""Generic modules ask the target model for a target's family instead of keeping lists of target names."""

from __future__ import annotations

import json

import pytest

from kernelpilot.export import exportable_targets
from kernelpilot.targets import list_target_models, target_family
from kernelpilot.tile_tuner import report


def test_family_comes_from_the_registered_target_model():
    assert {name: target_family(name) for name in ("bmg", "pvc", "xe2_igpu", "sm90")} == {
        "bmg": "xe", "pvc": "xe", "xe2_igpu": "xe", "sm90": "sm90"}  # fmt: skip
    assert target_family("no_such_target") is None and target_family(None) is None


def test_exportable_targets_are_the_installed_targets_of_exportable_families():
    models = list_target_models()
    assert exportable_targets() == sorted(n for n, m in models.items() if m.family in ("sm90", "xe"))
    assert {"sm90", "bmg"} <= set(exportable_targets())


def _doc(target: str) -> dict:
    config = {"kernel": "gemm", "dtype": "bf16", "wg": [256, 128, 32], "sg": [8, 4, 1], "stages": 3}
    best = {"config": config, "label": "x", "time_ms": 1.0}
    return {"target": target, "workloads": [{"name": "w", "best": best, "tried": []}]}


def test_tile_shapes_are_written_for_xe_family_runs_only(tmp_path):
    paths = report.write_all(_doc("pvc"), tmp_path / "xe", plots=False)
    assert json.loads((tmp_path / "xe" / "tile_shapes.json").read_text()) == [
        {"wg": [256, 128, 32], "sg": [8, 4, 1]}
    ]
    assert "tile_shapes" in paths
    for target in ("sm90", "a_target_no_plugin_provides"):
        paths = report.write_all(_doc(target), tmp_path / target, plots=False)
        assert "tile_shapes" not in paths and not (tmp_path / target / "tile_shapes.json").exists()


def test_device_pinning_variable_comes_from_a_registered_targets_vendor(monkeypatch):
    """The optimize pipeline pins XPU_DEVICE=<type>:N through the vendor of an installed target, so a
    plugin that registers a target with a new vendor gets its device pinned without core changes."""
    import kernelpilot.targets as targets
    from kernelpilot.errors import InputError
    from kernelpilot.hw_models.base import GpuVendor, TargetModel
    from kernelpilot.pipeline.session import select_device_index

    assert targets.visible_devices_variable("cuda") == "CUDA_VISIBLE_DEVICES"
    assert targets.visible_devices_variable("xpu") == "ZE_AFFINITY_MASK"
    assert targets.visible_devices_variable("npu") is None
    with pytest.raises(InputError, match="needs a GPU device"):
        select_device_index("npu", 1)

    class NpuVendor(GpuVendor):
        name = "npu"
        visible_devices_env = "NPU_VISIBLE_DEVICES"
        torch_device = "npu"

    class NpuTarget(TargetModel):
        name = "npu1"
        vendor = NpuVendor()

    installed = dict(list_target_models())
    monkeypatch.setattr(targets, "list_target_models", lambda: {**installed, "npu1": NpuTarget()})
    import os

    monkeypatch.delenv("NPU_VISIBLE_DEVICES", raising=False)
    try:
        select_device_index("npu", 1)
        assert os.environ["NPU_VISIBLE_DEVICES"] == "1"
    finally:
        os.environ.pop("NPU_VISIBLE_DEVICES", None)

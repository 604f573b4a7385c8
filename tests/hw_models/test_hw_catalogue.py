"""Device catalogue: loading, lookup, derived/measured bookkeeping, detection that respects the user."""

from __future__ import annotations

import sys
import types

import pytest

from kernelpilot.errors import InputError
from kernelpilot.hw_models import catalogue
from kernelpilot.hw_models.catalogue import detect_device, get_device, load_catalogue, match_device_name

REQUIRED = {
    "arc_b580": ("bmg", "bmg-g21"),
    "arc_b570": ("bmg", "bmg-g21"),
    "arc_pro_b60": ("bmg", "bmg-g21"),
    "arc_pro_b70": ("bmg", "bmg-g31"),
    "max_1550": ("pvc", "pvc"),
    "max_1100": ("pvc", "pvc"),
    "lnl_xe2_igpu": ("xe2_igpu", "lnl-m"),
    "h100_sxm": ("sm90", None),
    "h200": ("sm90", None),
}


def test_every_required_device_is_there_with_target_and_aot_name() -> None:
    devices = load_catalogue()
    for key, (target, aot) in REQUIRED.items():
        dev = devices[key]
        assert dev.target == target
        assert dev.aot_name == aot
        assert dev.cores > 0 and dev.mem_bandwidth_gbs > 0 and dev.l2_bytes > 0
        assert dev.peak("bf16") > 0
        assert dev.sources, f"{key} cites no source"


def test_derived_names_point_at_real_fields() -> None:
    """`derived` must name fields that exist (``peak_tflops.bf16`` style for dict entries)."""
    for dev in load_catalogue().values():
        data = dev.model_dump()
        for name in dev.derived:
            head, _, sub = name.partition(".")
            assert head in data, f"{dev.key}: derived names unknown field {name}"
            if sub:
                assert sub in data[head], f"{dev.key}: derived names unknown entry {name}"


def test_h200_figures_and_measured_kept_apart() -> None:
    h200 = get_device("h200")
    assert h200.cores == 132
    assert h200.peak("bf16") == pytest.approx(989.4, rel=0.01)
    assert h200.mem_bandwidth_gbs == pytest.approx(4800)
    assert h200.measured is not None
    assert h200.peak("bf16", measured=True) == pytest.approx(790)
    assert h200.bandwidth_gbs(measured=True) == pytest.approx(4300)
    assert h200.bandwidth_gbs() == pytest.approx(4800)  # datasheet unless measured is asked for
    assert h200.smem_per_core_bytes == 232448


def test_get_device_by_display_name_and_unknown_lists_known() -> None:
    assert get_device("Intel Arc B580").key == "arc_b580"
    with pytest.raises(InputError) as err:
        get_device("rtx 4090")
    assert "arc_b580" in str(err.value) and "h200" in str(err.value)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA H100 80GB HBM3", "h100_sxm"),
        ("Intel(R) Arc(TM) B580 Graphics", "arc_b580"),
        ("Intel(R) Arc(TM) Pro B60 Graphics", "arc_pro_b60"),
        ("Intel(R) Data Center GPU Max 1550", "max_1550"),
        ("Intel(R) Arc(TM) 140V GPU (16GB)", "lnl_xe2_igpu"),
    ],
)
def test_match_driver_names(name: str, key: str) -> None:
    assert match_device_name(name).key == key


def test_match_pci_id_and_unknown() -> None:
    assert match_device_name("", "e20b").key == "arc_b580"
    assert match_device_name("NVIDIA GeForce RTX 4090") is None


def test_user_target_wins_without_probing(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom() -> list:
        raise AssertionError("detection must not probe when the user set a target")

    monkeypatch.setattr(catalogue, "_live_device_names", boom)
    assert detect_device("pvc").key == "max_1550"
    assert detect_device("sm90", user_device="h100_sxm").key == "h100_sxm"
    with pytest.raises(InputError):
        detect_device("gfx942")


def test_detect_from_fake_torch_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = types.SimpleNamespace(
        is_available=lambda: True, device_count=lambda: 1, get_device_name=lambda i: "NVIDIA H200"
    )
    fake = types.SimpleNamespace(cuda=cuda, xpu=None)
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert detect_device().key == "h200"


def test_detect_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalogue, "_live_device_names", lambda: [("Some Unknown GPU", None)])
    assert detect_device() is None

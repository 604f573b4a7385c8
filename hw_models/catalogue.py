"""Device catalogue: typed loader over ``catalogue.yaml`` plus live-device detection.

The cost model and the build system need per-device numbers (cores, peak rates, bandwidth, AOT
name).  They live in data so adding a device is a YAML edit; figures computed rather than published
are named in ``derived`` and our own measurements sit apart under ``measured``, so nobody mistakes a
datasheet figure for a measurement or the reverse.

Detection never overrides the user: :func:`detect_device` with a ``user_target`` returns that
target's default device (or the named device) and does not touch torch at all.
"""

from __future__ import annotations

import functools
import re
from importlib.resources import files
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from kernelpilot.errors import InputError
from kernelpilot.hw_models.dtypes import INTEGER, parse_dtype


class Measured(BaseModel):
    """Figures this project measured on the real device (kept apart from the datasheet)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    peak_tflops: dict[str, float] = {}
    mem_bandwidth_gbs: float | None = None
    source: str = ""


def peak_key(dtype: Any) -> str:
    """The catalogue's peak_tflops key for a problem's input types.  Equal types: that type.  Mixed:
    integer x integer runs on the integer unit at the wider type's rate; anything with a float side is
    upconverted to a 16-bit float operation (bf16 when either side is bf16, else f16)."""
    try:
        pair = parse_dtype(dtype)
    except InputError:
        if isinstance(dtype, str):  # a catalogue-only key such as f32
            return dtype
        raise
    if pair.same:
        return pair.a
    if pair.a in INTEGER and pair.b in INTEGER:
        return pair.a if pair.bits_a >= pair.bits_b else pair.b
    return "bf16" if "bf16" in (pair.a, pair.b) else "f16"


class Device(BaseModel):
    """One device of the catalogue."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    name: str
    vendor: str
    target: str
    aot_name: str | None
    cores: int
    base_clock_mhz: float | None = None
    boost_clock_mhz: float | None = None
    peak_tflops: dict[str, float]
    mem_bandwidth_gbs: float
    memory_bytes: int | None = None
    l2_bytes: int
    smem_per_core_bytes: int
    registers_per_core_bytes: int
    grf_per_thread: int
    hw_threads_per_core: int
    subgroup_size: int
    max_wg_size: int
    match_names: list[str] = []
    pci_ids: list[str] = []
    derived: list[str] = []
    measured: Measured | None = None
    notes: str = ""
    sources: list[str] = []

    def peak(self, dtype: Any, *, measured: bool = False) -> float:
        """Peak dense TFLOP/s (TOP/s) for the input types of a problem: ``"s8"``, ``{a: bf16, b: s8}`` or a
        DTypePair.  Mixed inputs run at the rate of the operation that does the math (see peak_key);
        types without their own entry fall back to the rate of the unit that runs them: 4-bit integers
        to the 8-bit integer rate (the integer DPAS; no separate int4 figure is published), other types
        to the 16-bit float rate (Xe fp8/fp4 inputs are upconverted, sycl-tla xe_mma_builder.inl:44-53)."""
        key = peak_key(dtype)
        table = self.measured.peak_tflops if (measured and self.measured) else self.peak_tflops
        if key in table:
            return table[key]
        if measured:
            return self.peak(key, measured=False)
        fallbacks = ("s8", "u8", "bf16", "f16") if key in INTEGER else ("bf16", "f16")
        for fallback in fallbacks:
            if fallback in table:
                return table[fallback]
        raise KeyError(key)

    def bandwidth_gbs(self, *, measured: bool = False) -> float:
        if measured and self.measured and self.measured.mem_bandwidth_gbs:
            return self.measured.mem_bandwidth_gbs
        return self.mem_bandwidth_gbs


@functools.lru_cache(maxsize=1)
def _load() -> dict[str, Device]:
    text = files("kernelpilot.hw_models").joinpath("catalogue.yaml").read_text(encoding="utf-8")
    raw = yaml.safe_load(text) or {}
    devices: dict[str, Device] = {}
    for key, entry in (raw.get("devices") or {}).items():
        try:
            devices[key] = Device(key=key, **entry)
        except ValidationError as exc:  # a broken catalogue is a packaging bug, say where
            raise InputError(f"device {key}: {exc}", file="catalogue.yaml") from exc
    return devices


def load_catalogue() -> dict[str, Device]:
    """All devices by key (``arc_b580``, ``h200`` ...).  Returns a fresh dict each call."""
    return dict(_load())


#: target name -> the catalogue key its models use when no device is given
DEFAULT_DEVICE = {"bmg": "arc_b580", "pvc": "max_1550", "xe2_igpu": "lnl_xe2_igpu", "sm90": "h200"}


def _norm(text: str) -> str:
    return re.sub(r"[\s_\-]+", " ", text.strip().lower())


def get_device(name: str) -> Device:
    """Look a device up by key or by (case-insensitive) display name; unknown -> InputError."""
    catalogue = _load()
    if name in catalogue:
        return catalogue[name]
    wanted = _norm(name)
    for device in catalogue.values():
        if _norm(device.key) == wanted or _norm(device.name) == wanted:
            return device
    raise InputError(
        f"unknown device {name!r}; known devices: {', '.join(sorted(catalogue))}", field="device"
    )


def match_device_name(text: str, pci_id: str | None = None) -> Device | None:
    """Map a driver-reported device name (or PCI device id) onto a catalogue entry, or None."""
    catalogue = _load()
    if pci_id:
        pid = pci_id.lower()
        if not pid.startswith("0x"):
            pid = "0x" + pid
        for device in catalogue.values():
            if pid in device.pci_ids:
                return device
    wanted = _norm(text or "")
    if not wanted:
        return None
    # Longest alias first so "h100 80gb hbm3" beats "h100" and "arc pro b60" beats "b60".
    best: tuple[int, Device] | None = None
    for device in catalogue.values():
        for alias in device.match_names:
            alias_n = _norm(alias)
            if alias_n in wanted and (best is None or len(alias_n) > best[0]):
                best = (len(alias_n), device)
    return best[1] if best else None


def _live_device_names() -> list[tuple[str, str | None]]:
    """(name, pci id) of visible GPUs: torch.cuda, then torch.xpu, then dpctl.  Imports lazily."""
    found: list[tuple[str, str | None]] = []
    try:
        import torch

        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                found.append((torch.cuda.get_device_name(i), None))
        xpu: Any = getattr(torch, "xpu", None)
        if xpu is not None and xpu.is_available():
            for i in range(xpu.device_count()):
                props = xpu.get_device_properties(i)
                pci = getattr(props, "device_id", None)
                found.append((xpu.get_device_name(i), hex(pci) if isinstance(pci, int) else None))
    except Exception:  # noqa: BLE001 - detection is best effort; an absent or broken torch means "none"
        pass
    if not found:
        try:
            import dpctl  # type: ignore[import-not-found]

            for dev in dpctl.get_devices(device_type="gpu"):
                found.append((dev.name, None))
        except Exception:  # noqa: BLE001
            pass
    return found


def detect_device(user_target: str | None = None, user_device: str | None = None) -> Device | None:
    """The device to model.

    A device or target the user set always wins and no probing happens: ``user_device`` names a
    catalogue entry, ``user_target`` (``bmg``/``pvc``/``sm90``/``xe2_igpu``) picks that target's
    default device.  Otherwise the first live GPU that matches the catalogue is returned, or None.
    """
    if user_device:
        return get_device(user_device)
    if user_target:
        if user_target not in DEFAULT_DEVICE:
            raise InputError(
                f"unknown target {user_target!r}; known targets: {', '.join(sorted(DEFAULT_DEVICE))}",
                field="target",
            )
        return get_device(DEFAULT_DEVICE[user_target])
    for name, pci in _live_device_names():
        device = match_device_name(name, pci)
        if device is not None:
            return device
    return None

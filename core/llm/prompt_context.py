"""Prompt facts computed from data, not prose: the device's catalogue numbers, the problem's sizes,
footprint, FLOPs, arithmetic intensity and roofline class, the user's tuning settings.

Every prompt template gets these as ready-made Markdown blocks (``device_text``, ``problem_text``,
``tuning_text``) and as plain dicts (``hw``, ``problem``, ``tuning``), so a DSL plugin's template only
places them.  Numbers come from ``hw_models/catalogue.yaml`` (datasheet figures, with our measured
ones beside them when we have them) and from the spec variant; nothing is guessed: a device that is
not in the catalogue is reported as unknown.
"""

from __future__ import annotations

from typing import Any

# torch dtype name -> catalogue peak_tflops key
PEAK_KEY = {
    "float16": "f16",
    "bfloat16": "bf16",
    "float32": "f32",
    "float64": "f64",
    "int8": "s8",
    "uint8": "u8",
    "float8_e4m3fn": "e4m3",
    "float8_e5m2": "e5m2",
}
ITEMSIZE = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "float64": 8,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "bool": 1,
}
# Typical Triton starting points per vendor when the user set none (the Triton matmul tutorial's
# Hopper configs; Intel's large work-groups).  Shown as defaults, the user's settings replace them.
VENDOR_DEFAULTS = {
    "nvidia": {"num_warps": 4, "num_stages": 3, "tile_m": 128, "tile_n": 128, "tile_k": 64},
    "intel": {"num_warps": 32, "num_stages": 2, "tile_m": 256, "tile_n": 256, "tile_k": 32},
}


def catalogue_device(settings: Any, device_name: str | None) -> Any | None:
    """HW_DEVICE (a catalogue key) > the GPU the worker reported > None (not guessed)."""
    try:
        from kernelpilot.hw_models.catalogue import get_device, match_device_name
    except ImportError:  # the catalogue is part of the distribution; a broken install says nothing
        return None
    key = getattr(settings, "hw_device", None)
    if key:
        return get_device(key)
    if device_name:
        return match_device_name(device_name)
    return None


def hw_facts(device: Any | None) -> dict[str, Any]:
    if device is None:
        return {}
    facts = {
        "key": device.key,
        "name": device.name,
        "vendor": device.vendor,
        "cores": device.cores,
        "core_name": "SMs" if device.vendor == "nvidia" else "Xe-cores",
        "boost_clock_mhz": device.boost_clock_mhz,
        "memory_gb": round(device.memory_bytes / 1e9, 1) if device.memory_bytes else None,
        "mem_bandwidth_gbs": device.mem_bandwidth_gbs,
        "l2_mb": round(device.l2_bytes / 2**20, 1),
        "smem_per_core_kb": device.smem_per_core_bytes // 1024,
        "registers_per_core_kb": device.registers_per_core_bytes // 1024,
        "grf_per_thread": device.grf_per_thread,
        "subgroup_size": device.subgroup_size,
        "max_wg_size": device.max_wg_size,
        "peak_tflops": dict(device.peak_tflops),
    }
    if device.measured is not None:
        facts["measured"] = {
            "peak_tflops": dict(device.measured.peak_tflops),
            "mem_bandwidth_gbs": device.measured.mem_bandwidth_gbs,
        }
    return facts


def tuning_facts(settings: Any, vendor: str | None, device: str) -> dict[str, Any]:
    """The user's settings; where unset, the vendor's usual starting point, marked as a default."""
    defaults = VENDOR_DEFAULTS.get(vendor or {"cuda": "nvidia", "xpu": "intel"}.get(device, ""), {})
    chosen = {
        "num_warps": getattr(settings, "default_num_warps", None),
        "num_stages": getattr(settings, "default_num_stages", None),
        "tile_m": getattr(settings, "preferred_tile_m", None),
        "tile_n": getattr(settings, "preferred_tile_n", None),
        "tile_k": getattr(settings, "preferred_tile_k", None),
    }
    facts: dict[str, Any] = {}
    for key, value in chosen.items():
        if value is not None:
            facts[key] = value
            facts[f"{key}_from"] = "your settings"
        elif key in defaults:
            facts[key] = defaults[key]
            facts[f"{key}_from"] = "typical default"
    if settings is not None:
        facts["group_size_m"] = getattr(settings, "group_size_m", None)
        if (vendor or "") == "intel" or device == "xpu":
            facts["grf_mode"] = getattr(settings, "grf_mode", None)
        facts["target_dtype"] = getattr(settings, "target_dtype", None)
    return facts


def problem_facts(
    spec: Any, variant: str, hw: dict[str, Any], baseline_ms: float | None, interpreter: bool
) -> dict[str, Any]:
    try:
        resolved = spec.variant(variant)
    except Exception:  # a spec object we do not know: say nothing rather than guess
        return {}
    inputs = []
    input_bytes = 0
    dtypes = []
    for item in resolved.inputs:
        size = item.numel * ITEMSIZE.get(item.dtype, 4)
        input_bytes += size
        dtypes.append(item.dtype)
        inputs.append({"name": item.name, "shape": list(item.shape), "dtype": item.dtype, "bytes": size})
    facts: dict[str, Any] = {
        "variant": resolved.name,
        "dims": dict(resolved.dims),
        "inputs": inputs,
        "init_args": list(resolved.init_args),
        "input_bytes": input_bytes,
        "flop": resolved.flop,
        "bytes": resolved.bytes,
        "bytes_source": "spec" if resolved.bytes else "inputs only (outputs not counted)",
    }
    traffic = resolved.bytes or input_bytes or None
    if resolved.flop and traffic:
        facts["arithmetic_intensity"] = resolved.flop / traffic
    compute_dtype = next((d for d in dtypes if d in PEAK_KEY and d.startswith(("float", "bfloat"))), None)
    compute_dtype = resolved.dtype or compute_dtype or (dtypes[0] if dtypes else None)
    facts["compute_dtype"] = compute_dtype
    peak = _peak(hw, compute_dtype)
    if peak and hw.get("mem_bandwidth_gbs"):
        ridge = peak * 1e12 / (hw["mem_bandwidth_gbs"] * 1e9)
        facts["ridge_flop_per_byte"] = ridge
        facts["peak_tflops"] = peak
        if "arithmetic_intensity" in facts:
            facts["bound"] = "compute" if facts["arithmetic_intensity"] >= ridge else "memory"
            # the roofline's time floor for this problem on this device
            facts["roofline_ms"] = (
                max(resolved.flop / (peak * 1e12), traffic / (hw["mem_bandwidth_gbs"] * 1e9)) * 1e3
            )
    if baseline_ms and not interpreter:
        if resolved.flop:
            facts["achieved_tflops"] = resolved.flop / (baseline_ms * 1e-3) / 1e12
        if traffic:
            facts["achieved_gbs"] = traffic / (baseline_ms * 1e-3) / 1e9
        if facts.get("roofline_ms"):
            facts["roofline_fraction"] = facts["roofline_ms"] / baseline_ms
    return facts


def _peak(hw: dict[str, Any], dtype: str | None) -> float | None:
    """The catalogue's peak for the dtype; None when it lists none (no roofline rather than a wrong one)."""
    return (hw.get("peak_tflops") or {}).get(PEAK_KEY.get(dtype or "", ""))


def _num(value: float | None, fmt: str = ".3g") -> str:
    return "?" if value is None else format(value, fmt)


def device_text(hw: dict[str, Any], device: str) -> str:
    if not hw:
        if device == "cpu":
            return "CPU run under the Triton interpreter: no GPU numbers (set HW_DEVICE to describe the target GPU)."
        return f"{device} device not found in the device catalogue: no numbers (set HW_DEVICE to a catalogue key)."
    peaks = ", ".join(f"{k} {v:g}" for k, v in sorted(hw["peak_tflops"].items()))
    lines = [
        f"{hw['name']} ({hw['vendor']}): {hw['cores']} {hw['core_name']}"
        + (f" at up to {hw['boost_clock_mhz']:g} MHz" if hw.get("boost_clock_mhz") else ""),
        f"- memory {_num(hw.get('memory_gb'), '.4g')} GB at {hw['mem_bandwidth_gbs']:g} GB/s; L2 {hw['l2_mb']:g} MiB",
        f"- peak dense TFLOP/s (datasheet): {peaks}",
        f"- per {hw['core_name'][:-1]}: {hw['smem_per_core_kb']} KiB shared memory/SLM, "
        f"{hw['registers_per_core_kb']} KiB register file; {hw['grf_per_thread']} registers per thread; "
        f"{'warp' if hw['vendor'] == 'nvidia' else 'sub-group'} size {hw['subgroup_size']}; "
        f"at most {hw['max_wg_size']} threads per block/work-group",
    ]
    measured = hw.get("measured")
    if measured:
        parts = [f"{k} {v:g} TFLOP/s" for k, v in measured["peak_tflops"].items()]
        if measured.get("mem_bandwidth_gbs"):
            parts.append(f"{measured['mem_bandwidth_gbs']:g} GB/s")
        lines.append(f"- measured on this model: {', '.join(parts)}")
    return "\n".join(lines)


def problem_text(problem: dict[str, Any]) -> str:
    if not problem:
        return "(no spec summary)"
    shapes = ", ".join(
        f"{i['name']}{i['shape']} {i['dtype']} ({i['bytes'] / 1e6:.3g} MB)" for i in problem["inputs"]
    )
    lines = [
        f"- variant {problem['variant']}: dims {problem['dims']}",
        f"- inputs: {shapes or '(from get_example_inputs())'}",
    ]
    lines.append(f"- Model init args: {problem['init_args'] or '(none)'}")
    lines.append(f"- input footprint {problem['input_bytes'] / 1e6:.4g} MB")
    if problem.get("flop"):
        lines.append(f"- {problem['flop']:.4g} FLOP per call")
    if problem.get("bytes"):
        lines.append(f"- {problem['bytes'] / 1e6:.4g} MB moved per call (spec)")
    if "arithmetic_intensity" in problem:
        text = f"- arithmetic intensity {problem['arithmetic_intensity']:.3g} FLOP/byte ({problem['bytes_source']})"
        if "bound" in problem:
            text += (
                f"; ridge point {problem['ridge_flop_per_byte']:.3g} FLOP/byte at {problem['peak_tflops']:g} "
                f"TFLOP/s {problem['compute_dtype']} -> **{problem['bound']}-bound**; roofline floor "
                f"{problem['roofline_ms']:.3g} ms"
            )
        lines.append(text)
    if "achieved_tflops" in problem or "achieved_gbs" in problem:
        parts = []
        if "achieved_tflops" in problem:
            parts.append(f"{problem['achieved_tflops']:.3g} TFLOP/s")
        if "achieved_gbs" in problem:
            parts.append(f"{problem['achieved_gbs']:.4g} GB/s")
        if "roofline_fraction" in problem:
            parts.append(f"{problem['roofline_fraction']:.0%} of the roofline")
        lines.append(f"- the original achieves {', '.join(parts)}")
    return "\n".join(lines)


def tuning_text(tuning: dict[str, Any]) -> str:
    if not tuning:
        return "(none)"
    parts = []
    for key, label in (
        ("num_warps", "num_warps"),
        ("num_stages", "num_stages"),
        ("tile_m", "tile M"),
        ("tile_n", "tile N"),
        ("tile_k", "tile K"),
    ):
        if key in tuning:
            parts.append(f"{label} {tuning[key]} ({tuning[f'{key}_from']})")
    if tuning.get("group_size_m"):
        parts.append(f"GROUP_SIZE_M {tuning['group_size_m']}")
    if tuning.get("grf_mode"):
        parts.append(f"GRF mode {tuning['grf_mode']}")
    text = "; ".join(parts)
    if tuning.get("target_dtype"):
        text += (
            f"\n- target dtype: {tuning['target_dtype']} (compute in it where the tolerance allows; "
            "the output dtype stays what the reference returns)"
        )
    return text

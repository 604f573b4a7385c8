"""What the Xe (sycl-tla) backend needs on this machine, and what is missing -- for ``kernelpilot doctor``.

Building needs icpx (oneAPI >= 2025.1) with ``ocloc`` (the AOT device compiler icpx calls for
``spir64_gen``) and the sycl-tla headers; flash attention needs a sycl-tla checkout of a supported
release; running needs a Level Zero GPU.  oneMKL is *not* needed: our programs fill data themselves.
Every probe is cheap and never raises: a missing piece becomes a line in ``missing`` with its fix.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from kernelpilot.dsl_plugins.sycl import sycl_tla


def level_zero_gpus() -> tuple[list[str], str]:
    """Level Zero GPUs as ``sycl-ls`` lists them (it ships with the oneAPI compiler), and a note on why
    the list is empty.  ``sycl-ls`` honours ONEAPI_DEVICE_SELECTOR, so it sees what the programs will see."""
    from kernelpilot import toolchain

    path = toolchain.which("sycl-ls")
    if path is None:
        return [], "sycl-ls not found (part of the oneAPI DPC++ compiler)"
    try:
        out = subprocess.run([path], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"sycl-ls failed: {exc}"
    gpus = [line.strip() for line in out.stdout.splitlines() if "level_zero:gpu" in line]
    return gpus, "" if gpus else "sycl-ls lists no level_zero:gpu device"


def _sycl_ls() -> dict[str, Any]:
    from kernelpilot import toolchain

    gpus, note = level_zero_gpus()
    return {"path": toolchain.which("sycl-ls"), "gpus": gpus, "note": note}


def sycl_doctor(probe_devices: bool = True) -> dict[str, Any]:
    """A JSON-able report: tools, headers, devices, runtime environment, and the list of what is missing."""
    from kernelpilot import toolchain

    missing: list[str] = []
    icpx = sycl_tla.find_icpx()
    icpx_info: dict[str, Any] = {"path": icpx, "version": None}
    if icpx is None:
        missing.append(
            "icpx: install the oneAPI Base Toolkit >= 2025.1 and `source /opt/intel/oneapi/setvars.sh`"
        )
    else:
        banner = sycl_tla.icpx_version(icpx)
        icpx_info["version"] = banner
        release = sycl_tla.parse_icpx_release(banner)
        if release is not None and release < (2025, 1):
            missing.append(f"icpx {banner}: sycl-tla needs 2025.1 or newer")
    ocloc = toolchain.which("ocloc")
    if ocloc is None:
        missing.append(
            "ocloc (AOT compiler for -fsycl-targets=spir64_gen): install intel-ocloc / the GPU driver's ocloc"
        )

    tree = sycl_tla.find_sycl_tla()
    headers: dict[str, Any] = {"include": None}
    if tree is None:
        missing.append(
            "sycl-tla headers: set SYCL_TLA_DIR to a checkout or a `pip install --target DIR sycl-tla` folder"
        )
    else:
        headers = {
            "include": str(tree.include),
            "version": tree.version,
            "cutlass_version": tree.cutlass_version,
            "source": tree.source,
            "kinds": {},
        }
        for kind in ("gemm", "grouped_gemm", "moe_gemm", "fa_prefill"):
            try:
                sycl_tla.check_tree_for_kind(tree, kind)
                headers["kinds"][kind] = "ok"
            except Exception as exc:  # noqa: BLE001 - reported, not raised
                headers["kinds"][kind] = str(exc)
                missing.append(f"{kind}: {exc}")

    devices = _sycl_ls() if probe_devices else {"path": None, "gpus": [], "note": "not probed"}
    if probe_devices and not devices["gpus"]:
        missing.append(f"Intel GPU: {devices['note']} (benchmarks need one; dry runs do not)")
    env = {
        k: os.environ.get(k)
        for k in ("ONEAPI_DEVICE_SELECTOR", "IGC_ExtraOCLOptions", "SYCL_TLA_DIR", "KERNELPILOT_AOT_DEVICE")
    }
    return {
        "icpx": icpx_info,
        "ocloc": ocloc,
        "sycl_tla": headers,
        "onemkl": "not needed (kernelpilot's programs fill data without oneMKL)",
        "devices": devices,
        "environment": env,
        "runtime_env": sycl_tla.runtime_env(),
        "ocloc_options": sycl_tla.ocloc_options("gemm"),
        "missing": missing,
    }

"""Check what this machine offers kernelpilot: GPUs, compilers, build tools, headers, LLM setup."""

from __future__ import annotations

import argparse
import json
from typing import Any


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON")


def _gpus() -> dict[str, Any]:
    """GPUs through torch.cuda, torch.xpu and dpctl; each probe reports why it could not look."""
    found: dict[str, Any] = {"cuda": [], "xpu": [], "dpctl": [], "notes": []}
    try:
        import torch

        if torch.cuda.is_available():
            found["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        else:
            found["notes"].append("torch.cuda: no CUDA device")
        xpu = getattr(torch, "xpu", None)
        if xpu is not None and xpu.is_available():
            found["xpu"] = [xpu.get_device_name(i) for i in range(xpu.device_count())]
    except ImportError:
        found["notes"].append("torch not installed (pip install 'kernelpilot[triton]')")
    try:
        import dpctl  # type: ignore[import-not-found]

        found["dpctl"] = [d.name for d in dpctl.get_devices() if d.is_gpu]
    except ImportError:
        found["notes"].append("dpctl not installed (pip install 'kernelpilot[intel]')")
    except Exception as exc:  # dpctl raises runtime errors without a SYCL runtime
        found["notes"].append(f"dpctl: {exc}")
    return found


def _backend_checks() -> list[dict[str, Any]]:
    """Checks plugins contribute through ``kp_doctor_checks``; a failing plugin becomes a failed check."""
    from dataclasses import asdict

    from kernelpilot.plugins import get_registry

    registry = get_registry()
    checks: list[dict[str, Any]] = []
    for record in registry.records:
        if "kp_doctor_checks" not in record.hooks:
            continue
        plugin = registry.manager.get_plugin(record.name)
        if plugin is None:
            continue
        try:
            checks.extend(asdict(c) for c in plugin.kp_doctor_checks() or [])
        except Exception as exc:  # a plugin's probe must not take doctor down
            checks.append(
                {
                    "plugin": record.name,
                    "name": "doctor checks",
                    "ok": False,
                    "detail": f"failed: {exc}",
                    "data": {},
                }
            )
    return checks


def collect() -> dict[str, Any]:
    from kernelpilot import toolchain
    from kernelpilot.settings import load_settings

    report: dict[str, Any] = {"gpus": _gpus(), "tools": {}, "headers": {}}
    for tool in ("nvcc", "icpx"):
        report["tools"][tool] = {"path": toolchain.which(tool), "version": toolchain.tool_version(tool)}
    for tool, finder in (("cmake", toolchain.cmake_path), ("ninja", toolchain.ninja_path)):
        report["tools"][tool] = {"path": finder()}
    for flavour, env in (("cutlass", "CUTLASS_DIR"), ("sycl-tla", "SYCL_TLA_DIR")):
        tree = toolchain.find_headers(flavour)
        found: dict[str, Any] = (
            {"include": str(tree.include), "version": tree.version, "source": tree.source}
            if tree
            else {"include": None, "hint": f"set {env} or pip install --target DIR the wheel"}
        )
        report["headers"][flavour] = found
    settings = load_settings()
    report["backends"] = _backend_checks()
    report["llm"] = {
        "configured": settings.llm_configured(),
        "model": settings.llm_model,
        "api_base": settings.openai_api_base,
        "api_key_set": settings.openai_api_key is not None,
        "engine": settings.resolved_engine(),
    }
    return report


def run(args: argparse.Namespace) -> int:
    report = collect()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kernelpilot doctor")
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail")
    gpus = report["gpus"]
    all_gpus = gpus["cuda"] + gpus["xpu"] + gpus["dpctl"]
    from rich.markup import escape

    table.add_row(
        "GPUs", "ok" if all_gpus else "none", escape(", ".join(all_gpus) or "; ".join(gpus["notes"]))
    )
    for tool, info in report["tools"].items():
        table.add_row(tool, "ok" if info["path"] else "missing", info.get("version") or info["path"] or "")
    for flavour, info in report["headers"].items():
        table.add_row(
            f"{flavour} headers",
            "ok" if info["include"] else "missing",
            f"{info['include']} ({info['version']})" if info["include"] else info["hint"],
        )
    for check in report["backends"]:
        table.add_row(check["name"], "ok" if check["ok"] else "missing", escape(check["detail"]))
    llm = report["llm"]
    table.add_row(
        "LLM",
        "configured" if llm["configured"] else "not configured",
        f"model {llm['model']}, engine {llm['engine']}",
    )
    Console(highlight=False).print(table)
    return 0

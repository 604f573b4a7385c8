"""Intel VTune: the collection and report commands and the parser of the hotspots CSV.

The format is the one ``vtune -report hotspots -group-by computing-task -format csv -csv-delimiter
tab`` prints after a ``gpu-offload`` collection: optional ``war:`` lines, then a tab-separated table
whose first column is ``Computing Task`` and whose percentage columns carry a ``(%)`` suffix
(``XVE Array:Active(%)``).  Xe-Forge parses the same report (IntelLabs/Xe-Forge v0.2.0,
``src/xe_forge/core/profiler.py`` lines 33-60 list the columns, 316-330 skip to the header); the
collection is started paused and resumed by the target after warm-up, as Xe-Forge does.
"""

from __future__ import annotations

import csv
import io

from kernelpilot.profiling.schema import KernelProfile, ProfileReport

COLUMNS = {
    "XVE Array:Active": "xve_active_pct",
    "XVE Array:Stalled": "xve_stalled_pct",
    "XVE Array:Idle": "xve_idle_pct",
    "XVE Threads Occupancy": "xve_occupancy_pct",
    "Peak XVE Threads Occupancy": "xve_peak_occupancy_pct",
    "GPU L3:Miss Ratio": "l3_miss_pct",
    "GPU Load Store Cache:Miss Ratio": "lsc_miss_pct",
    "GPU Memory Bandwidth, GB/sec:Read": "mem_read_gbs",
    "GPU Memory Bandwidth, GB/sec:Write": "mem_write_gbs",
}


def collect_command(vtune_bin: str, result_dir: str, target: list[str]) -> list[str]:
    return [vtune_bin, "-collect", "gpu-offload", "-start-paused", "-result-dir", result_dir, "--", *target]


def report_command(vtune_bin: str, result_dir: str) -> list[str]:
    return [
        vtune_bin,
        "-report",
        "hotspots",
        "-result-dir",
        result_dir,
        "-group-by",
        "computing-task",
        "-format",
        "csv",
        "-csv-delimiter",
        "tab",
    ]


def _number(text: str | None) -> float | None:
    try:
        return float(str(text).replace(",", "").rstrip("%").strip())
    except (TypeError, ValueError):
        return None


def parse_hotspots_csv(text: str) -> ProfileReport:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Computing Task")), None)
    report = ProfileReport(tool="vtune", kernels=[])
    if start is None:
        report.warnings.append("no 'Computing Task' table in the VTune report (no GPU kernel captured?)")
        return report
    kernels: dict[str, KernelProfile] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:])), delimiter="\t"):
        name = (row.get("Computing Task") or "").strip()
        if not name or name.startswith("["):  # [Outside any task] and similar pseudo rows
            continue
        seconds = _number(row.get("Computing Task:Total Time")) or 0.0
        count = int(_number(row.get("Computing Task:Instance Count")) or 0)
        profile = kernels.setdefault(name, KernelProfile(name=name))
        heavier = seconds * 1e6 > profile.total_us  # per-SIMD-width variants: keep the heaviest's ratios
        profile.total_us += seconds * 1e6
        profile.launches += count
        for column, key in COLUMNS.items():
            value = _number(row.get(f"{column}(%)", row.get(column)))
            if value is not None and (heavier or key not in profile.metrics):
                profile.metrics[key] = value
    report.kernels = list(kernels.values())
    return report

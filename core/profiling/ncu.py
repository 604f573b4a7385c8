"""Nsight Compute: the command line and the parser of its ``--csv --page raw`` output.

``ncu --page raw --csv`` prints one header row (``"ID","Process ID",...,"Kernel Name",...`` then one
column per metric), one row of units, then one row per profiled kernel launch (Nsight Compute CLI
documentation, "Command Line Options: --page, --csv, --print-units").  ``--clock-control none`` keeps
the GPU at its normal clocks (ncu locks them to base clock by default, which makes durations
incomparable with our timings); ``--profile-from-start off`` with ``torch.cuda.profiler.start/stop``
in the target limits collection to the measured launches, after warm-up and compilation.
"""

from __future__ import annotations

import csv
import io

from kernelpilot.profiling.schema import KernelProfile, ProfileReport

METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "lts__t_sector_hit_rate.pct": "l2_hit_rate_pct",
    "launch__registers_per_thread": "registers_per_thread",
}
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "wait",
    "barrier",
    "math_pipe_throttle",
    "mio_throttle",
    "lg_throttle",
    "not_selected",
    "dispatch_stall",
    "no_instruction",
    "membar",
    "branch_resolving",
    "drain",
    "imc_miss",
    "sleeping",
    "tex_throttle",
)


def metric_names() -> list[str]:
    return [*METRICS, *(f"{STALL_PREFIX}{r}{STALL_SUFFIX}" for r in STALL_REASONS)]


def command(ncu_bin: str, target: list[str]) -> list[str]:
    return [
        ncu_bin,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metric_names()),
        *target,
    ]


def _number(text: str) -> float | None:
    cleaned = str(text).replace(",", "").strip()
    if not cleaned or cleaned.lower() in ("n/a", "nan"):
        return None
    try:
        return float(cleaned)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> ProfileReport:
    """Per-launch rows -> per-kernel profiles (durations summed, ratios averaged over launches)."""
    lines = [ln for ln in text.splitlines() if not ln.startswith("==")]
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    report = ProfileReport(tool="ncu", kernels=[])
    if start is None:
        report.warnings.append("no CSV table in the ncu output (no kernel was profiled?)")
        return report
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, data = rows[0], rows[1:]
    if data and not _number(data[0][0] if data[0] else ""):  # the units row
        units = dict(zip(header, data[0], strict=False))
        data = data[1:]
    else:
        units = {}
    kernels: dict[str, KernelProfile] = {}
    sums: dict[str, dict[str, list[float]]] = {}
    for row in data:
        if len(row) != len(header):
            continue
        values = dict(zip(header, row, strict=True))
        name = values.get("Kernel Name", "?").split("(")[0].strip() or "?"
        profile = kernels.setdefault(name, KernelProfile(name=name))
        acc = sums.setdefault(name, {})
        profile.launches += 1
        for column, value in values.items():
            number = _number(value)
            if number is None:
                continue
            if column == "gpu__time_duration.sum":
                scale = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6}.get(
                    units.get(column, "nsecond"), 1e-3
                )
                profile.total_us += number * scale
            elif column in METRICS:
                acc.setdefault(METRICS[column], []).append(number)
            elif column.startswith(STALL_PREFIX) and column.endswith(STALL_SUFFIX):
                reason = column[len(STALL_PREFIX) : -len(STALL_SUFFIX)]
                acc.setdefault(f"stall:{reason}", []).append(number)
    for name, profile in kernels.items():
        means = {k: sum(v) / len(v) for k, v in sums[name].items()}
        profile.metrics = {k: v for k, v in means.items() if not k.startswith("stall:")}
        stalls = {k[6:]: v for k, v in means.items() if k.startswith("stall:") and k[6:] != "selected"}
        total = sum(stalls.values())
        if total > 0:
            profile.stalls = {r: 100.0 * v / total for r, v in stalls.items() if v > 0}
    report.kernels = list(kernels.values())
    return report

"""``kp_doctor_checks`` for the Xe backend: icpx, ocloc, sycl-tla headers, Intel GPUs, runtime env."""

from __future__ import annotations

from kernelpilot.hookspecs import hookimpl
from kernelpilot.plugin_types import DoctorCheck


@hookimpl
def kp_doctor_checks() -> list[DoctorCheck]:
    from kernelpilot.dsl_plugins.sycl.doctor import sycl_doctor

    report = sycl_doctor()
    missing = report["missing"]
    checks = [
        DoctorCheck(
            "sycl",
            "xe: icpx",
            report["icpx"]["path"] is not None,
            report["icpx"]["version"] or next((m for m in missing if m.startswith("icpx")), ""),
        ),
        DoctorCheck(
            "sycl",
            "xe: ocloc",
            report["ocloc"] is not None,
            report["ocloc"] or next((m for m in missing if m.startswith("ocloc")), ""),
        ),
        DoctorCheck(
            "sycl",
            "xe: sycl-tla headers",
            report["sycl_tla"]["include"] is not None,
            f"{report['sycl_tla']['include']} ({report['sycl_tla'].get('version')})"
            if report["sycl_tla"]["include"]
            else next((m for m in missing if m.startswith("sycl-tla")), ""),
        ),
        DoctorCheck(
            "sycl",
            "xe: Intel GPUs",
            bool(report["devices"]["gpus"]),
            ", ".join(report["devices"]["gpus"]) or report["devices"]["note"],
        ),
        DoctorCheck(
            "sycl",
            "xe: runtime environment",
            True,
            " ".join(f"{k}={v}" for k, v in report["runtime_env"].items()) + " (set by the runner)",
            data=report,
        ),
    ]
    return checks
